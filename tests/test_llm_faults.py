"""LLM faults end to end: the whole server on the `openai` provider against a
fault-injecting OpenAI-compatible server (`tests/faulty_openai.py`), over
real HTTP.

For each fault the run ends with a clear error (or, once a retry works, the
answer) within the time the settings allow; the faulty server counts the
attempts — `1 + LOOPWIRE_LLM_MAX_RETRIES` for a fault worth retrying, 1 for
one that is not, never the SDK's retries on top of ours; `Retry-After` is
honoured up to `LOOPWIRE_LLM_RETRY_MAX_WAIT_S`; and the tool the act phase
ran is never run again, whatever happens after it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from tests.conftest import StartServer
from tests.fakes import observe, reason
from tests.faulty_openai import (
    Cut,
    ErrorReply,
    Fault,
    FaultyOpenAIServer,
    Malformed,
    Reply,
    Stall,
    running_faulty_openai,
)
from tests.ws_client import Frame, labels

TIMEOUT_S = 0.5
RETRIES = 2
BACKOFF_S = 0.05
SLACK_S = 2.0
"""Headroom for a loaded machine on top of the time a fault may take."""
SECRET_KEY = "sk-loopwire-test-0123456789abcdef"


@pytest.fixture
async def faulty() -> AsyncIterator[FaultyOpenAIServer]:
    async with running_faulty_openai() as server:
        yield server


class CountArgs(BaseModel):
    n: int


@dataclass
class Counter:
    """A read-only tool that records every call it gets."""

    calls: list[int] = field(default_factory=list)

    async def __call__(self, args: CountArgs, ctx: ToolContext) -> dict[str, int]:
        self.calls.append(args.n)
        return {"n": args.n, "calls": len(self.calls)}

    def registry(self) -> ToolRegistry:
        effect = ToolEffect(read_only=True, idempotent=True)
        return ToolRegistry([Tool("count", "Count.", CountArgs, self, effect)])


@dataclass
class Outcome:
    frames: list[Frame]
    seconds: float
    requests: int
    tool_calls: list[int]

    def error(self) -> str:
        errors = [
            f
            for f in self.frames
            if f["type"] == "error" or f.get("update_type") == "agent_error"
        ]
        assert len(errors) == 1, labels(self.frames)
        message: str = errors[0]["message"]
        return message


async def run_agent(
    start_server: StartServer,
    faulty: FaultyOpenAIServer,
    *replies: Fault,
    agent_mode: bool = True,
    **settings: Any,
) -> Outcome:
    """One chat against `faulty` scripted with `replies`; the counting tool
    is the only tool."""
    counter = Counter()
    faulty.script(*replies)
    settings = {
        "llm_base_url": faulty.base_url,
        "llm_api_key": SECRET_KEY,
        "llm_timeout_s": TIMEOUT_S,
        "llm_max_retries": RETRIES,
        "llm_retry_backoff_s": BACKOFF_S,
        **settings,
    }
    harness = await start_server(None, counter.registry(), **settings)
    client, _ = await harness.ready_client()
    began = time.monotonic()
    tools = {} if agent_mode else {"selected_tools": ["count"]}  # tool mode
    frames = await client.chat("Count to one.", agent_mode=agent_mode, **tools)
    seconds = time.monotonic() - began
    outcome = Outcome(frames, seconds, len(faulty.requests), counter.calls)
    assert_nothing_leaks(frames, faulty.base_url)
    return outcome


def assert_nothing_leaks(frames: list[Frame], base_url: str) -> None:
    text = json.dumps(frames)
    for secret in (SECRET_KEY, base_url, "127.0.0.1", "Traceback", "Error:"):
        assert secret not in text


def failed_attempts(fault: Fault) -> list[Fault]:
    return [fault] * (1 + RETRIES)


# -- agent runs: a fault in observe, after act ran the tool -------------------

BEFORE_OBSERVE: list[Fault] = [
    Reply(content=reason("Count once.", tools=["count"])),
    Reply(tool_calls=[("count", {"n": 1})]),
]
RUN_WITH_ERROR = [
    "agent_start",
    "agent_turn_start",
    "agent_reason",
    "tool_start:count",
    "tool_complete:count",
    "agent_error",
    "chat_response",
    "agent_completion",
    "response_complete",
]
SUMMARY = (
    "I could not write a full answer, but here is what 1 step(s) found:\n"
    '- `count` returned: {\n  "n": 1,\n  "calls": 1\n}'
)


@pytest.mark.parametrize(
    ("fault", "message", "attempts"),
    [
        (
            ErrorReply(500, "the model crashed", "server_error"),
            "the LLM server answered 500: the model crashed (gave up after 3 attempts)",
            3,
        ),
        (
            ErrorReply(429, "Rate limit reached", "rate_limit", retry_after="0.05"),
            "the LLM server answered 429: Rate limit reached (gave up after 3 attempts)",
            3,
        ),
        (
            Cut(),
            "the LLM server closed the connection before its reply was complete "
            "(gave up after 3 attempts)",
            3,
        ),
        (
            Stall(),
            "the LLM request timed out after 0.5s (gave up after 3 attempts)",
            3,
        ),
        (
            Malformed(),
            "the LLM server sent a malformed reply (invalid JSON)",
            1,
        ),
        (
            ErrorReply(400, "model 'm' does not exist", "invalid_request_error"),
            "the LLM server answered 400: model 'm' does not exist",
            1,
        ),
    ],
    ids=["500", "429", "cut", "stall", "malformed", "400"],
)
async def test_a_fault_in_observe_ends_the_run_without_running_the_tool_again(
    start_server: StartServer,
    faulty: FaultyOpenAIServer,
    fault: Fault,
    message: str,
    attempts: int,
) -> None:
    """A failing observe call ends the run in error with a summary; no tool rerun."""
    outcome = await run_agent(
        start_server, faulty, *BEFORE_OBSERVE, *[fault] * attempts, Reply("unused")
    )

    assert labels(outcome.frames) == RUN_WITH_ERROR
    assert outcome.error() == message
    assert outcome.frames[6]["message"] == SUMMARY
    assert outcome.frames[7]["reason"] == "error"
    assert outcome.requests == 2 + attempts  # reason, act, then observe's
    assert faulty.pending_replies == 1
    assert outcome.tool_calls == [1]
    waits = sum(BACKOFF_S * 2**n for n in range(attempts - 1))
    stalls = attempts * TIMEOUT_S if isinstance(fault, Stall) else 0
    assert outcome.seconds < stalls + waits + SLACK_S
    if isinstance(fault, Stall):
        assert outcome.seconds >= attempts * TIMEOUT_S
        assert faulty.dropped.is_set()


async def test_a_retry_that_works_finishes_the_run_with_the_tool_run_once(
    start_server: StartServer, faulty: FaultyOpenAIServer
) -> None:
    """Observe recovering on its third attempt finishes the run; the tool ran once."""
    outcome = await run_agent(
        start_server,
        faulty,
        *BEFORE_OBSERVE,
        ErrorReply(503, "overloaded", "server_error"),
        Stall(),
        Reply(content=observe("Counted.", should_continue=False, final="One.")),
    )

    assert labels(outcome.frames) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:count",
        "tool_complete:count",
        "agent_observe",
        "chat_response",
        "agent_completion",
        "response_complete",
    ]
    assert outcome.frames[6]["message"] == "One."
    assert outcome.frames[7]["reason"] == "finished"
    assert outcome.requests == 5
    assert outcome.tool_calls == [1]
    assert outcome.seconds < TIMEOUT_S + 3 * BACKOFF_S + SLACK_S


# -- Retry-After ----------------------------------------------------------------


async def test_retry_after_is_honoured(
    start_server: StartServer, faulty: FaultyOpenAIServer
) -> None:
    """A 429's one-second `Retry-After` is waited out before the retry."""
    outcome = await run_agent(
        start_server,
        faulty,
        *BEFORE_OBSERVE,
        ErrorReply(429, "slow down", "rate_limit", retry_after="1"),
        Reply(content=observe(should_continue=False, final="One.")),
    )

    assert outcome.frames[-2]["reason"] == "finished"
    assert outcome.requests == 4
    gap = faulty.gaps()[-1]
    assert 1.0 <= gap < 1.0 + SLACK_S  # not the 0.05 s back-off


async def test_retry_after_is_capped(
    start_server: StartServer, faulty: FaultyOpenAIServer
) -> None:
    """An hour-long `Retry-After` is cut to the configured maximum wait."""
    hour = ErrorReply(429, "come back in an hour", "rate_limit", retry_after="3600")
    outcome = await run_agent(
        start_server,
        faulty,
        *BEFORE_OBSERVE,
        *failed_attempts(hour),
        llm_retry_max_wait_s=0.3,
    )

    assert outcome.error() == (
        "the LLM server answered 429: come back in an hour (gave up after 3 attempts)"
    )
    assert outcome.requests == 2 + 3
    assert all(0.3 <= gap < 0.3 + SLACK_S for gap in faulty.gaps()[-2:])
    assert outcome.seconds < 2 * 0.3 + SLACK_S


# -- streamed replies (tool mode): faults after the tool ran -------------------

TOOL_MODE_START: list[Fault] = [Reply(tool_calls=[("count", {"n": 1})])]


@pytest.mark.parametrize(
    ("fault", "message", "attempts", "shown"),
    [
        (
            Cut("Partial answer"),
            "the LLM server closed the connection before its reply was complete",
            1,
            "Partial answer",
        ),
        (
            Cut("Partial answer", framing="close"),
            "the LLM server's reply stopped before it was complete",
            1,
            "Partial answer",
        ),
        (
            Cut(),
            "the LLM server closed the connection before its reply was complete "
            "(gave up after 3 attempts)",
            3,
            "",
        ),
        (
            Stall("Half an ans"),
            "the LLM request timed out after 0.5s",
            1,
            "Half an ans",
        ),
        (
            Stall(),
            "the LLM request timed out after 0.5s (gave up after 3 attempts)",
            3,
            "",
        ),
        (
            Malformed("So far"),
            "the LLM server sent a malformed reply (invalid JSON)",
            1,
            "So far",
        ),
        (
            ErrorReply(502, "bad gateway", "server_error"),
            "the LLM server answered 502: bad gateway (gave up after 3 attempts)",
            3,
            "",
        ),
    ],
    ids=[
        "cut",
        "cut-close",
        "cut-before-text",
        "stall",
        "stall-before-text",
        "malformed",
        "502",
    ],
)
async def test_a_fault_in_a_streamed_reply_is_retried_only_before_any_text(
    start_server: StartServer,
    faulty: FaultyOpenAIServer,
    fault: Fault,
    message: str,
    attempts: int,
    shown: str,
) -> None:
    """A streamed reply failing after text is shown is not retried; one with none is."""
    outcome = await run_agent(
        start_server,
        faulty,
        *TOOL_MODE_START,
        *[fault] * attempts,
        Reply("unused"),
        agent_mode=False,
    )

    tokens = [f for f in outcome.frames if f["type"] == "token_stream"]
    streamed = ["token_stream"] * len(tokens)
    assert labels(outcome.frames) == [
        "tool_start:count",
        "tool_complete:count",
        *streamed,
        "error:llm_error",
        "chat_response",
        "response_complete",
    ]
    assert "".join(t["token"] for t in tokens) == shown
    assert [t["is_last"] for t in tokens] == [False] * (len(tokens) - 1) + [True] * (
        len(tokens) > 0
    )
    assert outcome.error() == message
    assert outcome.requests == 1 + attempts
    assert outcome.tool_calls == [1]
    stalls = attempts * TIMEOUT_S if isinstance(fault, Stall) else 0
    assert outcome.seconds < stalls + sum((0.05, 0.1)[: attempts - 1]) + SLACK_S


# -- what the user is told -----------------------------------------------------


async def test_an_error_names_no_key_url_or_exception(
    start_server: StartServer, faulty: FaultyOpenAIServer
) -> None:
    """An upstream error shown to the user has its API key and URL secrets masked."""
    echoed = (
        f"Incorrect API key provided: {SECRET_KEY}. Authorization: Bearer "
        f"{SECRET_KEY} at http://admin:hunter2@llm.internal:8000/v1?key=abc"
    )
    outcome = await run_agent(
        start_server,
        faulty,
        ErrorReply(401, echoed, "invalid_request_error"),
        agent_mode=False,
    )

    assert labels(outcome.frames) == ["error:llm_error", "response_complete"]
    assert outcome.error() == (
        "the LLM server answered 401: Incorrect API key provided: ***. "
        "Authorization: *** at http://llm.internal:8000/v1"
    )
    assert outcome.requests == 1
    assert not {"hunter2", "key=abc"} & set(outcome.error().split())
