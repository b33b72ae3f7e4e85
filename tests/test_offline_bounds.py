"""The offline model's cost is bounded whatever the user types.

Each pathological input below once took seconds and gigabytes (its patterns
were quadratic in the text's length). Now the model reads a bounded prefix
with patterns whose work per position is bounded, so each input costs a few
milliseconds of CPU and little memory. The bounds asserted are generous
(5x the worst measured) and count this thread's CPU time (the least of three
runs) and the Python heap peak, not wall-clock time or RSS, so a loaded
machine does not fail them.
"""

from __future__ import annotations

import time
import tracemalloc

import pytest

from backend.agent.request_input import REQUEST_INPUT_SPEC
from backend.app import default_registry
from backend.errors import LLMError
from backend.llm import offline
from backend.llm.base import LLMRequest, Message, Purpose
from backend.llm.offline import OfflineLLM, respond
from backend.tools.base import ToolRegistry

PATHOLOGICAL = {
    "time in in in": "time " + "in " * 21_000,  # 64 KB
    "1 1 1": "1 " * 24_000,  # 48 KB
    "how many how many": "how many " * 8_000,
    "in the in the": "what time is it in the " * 3_000,
    "numbers to numbers": "convert " + "1 2 3 4 5 to " * 5_000,
    "deep parentheses": "what is " + "(" * 20_000 + "1" + ")" * 20_000,
    "60k digits": "9" * 60_000,
    "many lines": "what is 2+2\n" * 6_000,
    "remember a lot": "remember that " + "x" * 60_000,
}
PURPOSES: tuple[Purpose, ...] = ("reason", "act", "chat", "plan", "observe")
CPU_LIMIT_S = 0.1
HEAP_LIMIT = 10 << 20
REPEATS = 3
"""The CPU figure is the least of this many runs: a busy machine (the suite's
other worker, its servers) slows a run down, never speeds one up."""


def _cpu_of(request: LLMRequest, registry: ToolRegistry) -> float:
    started = time.thread_time()
    respond(request, registry)
    return time.thread_time() - started


@pytest.mark.parametrize("name", PATHOLOGICAL)
def test_a_pathological_request_costs_milliseconds(name: str) -> None:
    """Each pathological input costs the offline model under 0.1 s of CPU and 10 MiB."""
    registry = default_registry()
    tools = (*(t.spec() for t in registry.available(None)), REQUEST_INPUT_SPEC)
    text = PATHOLOGICAL[name]
    for purpose in PURPOSES:
        request = LLMRequest(
            messages=(Message.user(text),), tools=tools, purpose=purpose
        )
        tracemalloc.start()
        try:
            completion = respond(request, registry)
            _, heap_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        cpu_s = min(_cpu_of(request, registry) for _ in range(REPEATS))
        assert completion.content or completion.tool_calls
        assert cpu_s < CPU_LIMIT_S, f"{purpose}: {cpu_s * 1000:.0f} ms of CPU"
        assert heap_peak < HEAP_LIMIT, f"{purpose}: {heap_peak >> 20} MiB peak"


async def test_a_long_request_is_answered_off_the_event_loop_within_a_time_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long request runs in a thread that gives up at its limit; short ones inline."""
    llm = OfflineLLM(default_registry())
    long_request = LLMRequest(messages=(Message.user("what is 2+2? " * 100),))
    assert len("what is 2+2? " * 100) > offline.INLINE_CHARS
    answered = await llm.complete(long_request)
    assert "4" in answered.content

    monkeypatch.setattr(offline, "THREAD_TIMEOUT_S", 0.0)
    with pytest.raises(LLMError, match="gave up on this request after 0s"):
        await llm.complete(long_request)
    short = await llm.complete(LLMRequest(messages=(Message.user("what is 2+2?"),)))
    assert "4" in short.content  # short requests never wait on a thread
