"""Stop → `response_complete` latency, in each phase a run can be stopped in.

One session, no other load, on `python -m benchmarks.serve` (loopwire plus
the `bench_wait` tool), one run at a time. The clock starts when the client
sends `agent_control: stop` and ends when it receives `response_complete`;
the Stop is sent only once the run is really in the phase:

- **LLM call**: an agent run whose LLM calls take 60 s; Stop once the fake
  LLM signals the reason call arrived (`benchmarks/signals.py`);
- **mid-stream**: a plain chat streaming 5,000 tokens, 2 ms apart; Stop
  after the third `token_stream` frame;
- **tool call**: an agent run whose act calls `bench_wait` (60 s); Stop once
  the tool signals it started; the tool must be reported `cancelled`;
- **question**: an agent run whose act calls `request_input`; Stop once
  `agent_request_input` arrived.

Every stopped run must end cleanly (`agent_stopped` immediate and
`agent_completion` stopped for agent runs, no error). Two unmeasured stops
per phase come first; the session is reset after each.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable

from benchmarks.checks import BenchError, Frame, check_stopped, kind
from benchmarks.clients import Session
from benchmarks.harness import Harness, progress
from benchmarks.results import StopLatency
from benchmarks.serve import WAIT_TOOL
from benchmarks.signals import Signals
from benchmarks.stats import Summary

WARM_UP = 2
STREAM_TOKENS = 5000
STOP_AFTER_TOKENS = 3


def _agent(content: str) -> Frame:
    return {
        "type": "chat",
        "content": content,
        "agent_mode": True,
        "agent_max_steps": 3,
    }


async def _stopped(session: Session, *, agent: bool, tool: str = "") -> float:
    """Send Stop now; the ms until `response_complete` (the run checked)."""
    started = time.perf_counter()
    await session.stop()
    run = await session.until_kind("response_complete")
    check_stopped(run.frames, agent=agent, tool=tool)
    return (run.ended - started) * 1000


async def during_llm(session: Session, signals: Signals) -> float:
    tag = uuid.uuid4().hex[:12]
    await session.send(_agent(f"Add. latency_ms=60000 tag={tag}"))
    await signals.wait(f"llm:{tag}:reason")
    return await _stopped(session, agent=True)


async def mid_stream(session: Session, signals: Signals) -> float:
    await session.send(
        {
            "type": "chat",
            "content": f"Tell me. tokens={STREAM_TOKENS} token_delay_ms=2 latency_ms=0",
        }
    )
    seen = 0

    def enough(frame: Frame) -> bool:
        nonlocal seen
        seen += kind(frame) == "token_stream"
        return seen >= STOP_AFTER_TOKENS

    await session.read_until(enough)
    return await _stopped(session, agent=False)


async def during_tool(session: Session, signals: Signals) -> float:
    tag = uuid.uuid4().hex[:12]
    await session.send(_agent(f"Wait. act=wait wait_s=60 latency_ms=0 tag={tag}"))
    await signals.wait(f"tool:{tag}")
    return await _stopped(session, agent=True, tool=WAIT_TOOL)


async def during_question(session: Session, signals: Signals) -> float:
    await session.send(_agent("Convert this. act=ask latency_ms=0"))
    run = await session.until_kind("agent_request_input")
    if kind(run.frames[-1]) != "agent_request_input":
        raise BenchError(f"no question asked: {run.frames}")
    return await _stopped(session, agent=True)


Phase = Callable[[Session, Signals], Awaitable[float]]
PHASES: dict[str, Phase] = {
    "LLM call": during_llm,
    "mid-stream": mid_stream,
    "tool call": during_tool,
    "question": during_question,
}


async def measure(harness: Harness) -> StopLatency:
    samples = harness.sizes.stop_samples
    phases: dict[str, Summary] = {}
    async with harness.loopwire("stop", wait_tool=True) as server:
        session = await Session.open(server.ws_url)
        try:
            for name, phase in PHASES.items():
                taken: list[float] = []
                for number in range(WARM_UP + samples):
                    latency = await phase(session, harness.signals)
                    await session.reset()
                    if number >= WARM_UP:
                        taken.append(latency)
                phases[name] = Summary.of(taken)
                progress(
                    f"stop: {name}: median {phases[name].median:.2f} ms, "
                    f"p99 {phases[name].p99:.2f} ms over {samples}"
                )
        finally:
            await session.close()
    return StopLatency(samples=samples, phases=phases)
