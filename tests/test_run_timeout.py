"""The run time limit (`LOOPWIRE_RUN_TIMEOUT_S`): active time only.

Driven directly (a strategy, a `RunDriver`) with a `ScriptedLLM`. Where the
question is *how much* time counts, the driver times its phases with a
`FakeClock` the scripted replies advance: a reply "takes" as long as the
test says, and a pause takes an hour without any real waiting. Where the
question is whether a call in flight is cut off, the limit is real and
short, and the call hangs until it is cancelled.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from backend.agent.cutoffs import TIMED_OUT_NOTE, UNASKED_NOTE
from backend.agent.driver import RunDriver
from backend.agent.loop import AgentContext, AgentLoop
from backend.agent.run_control import UserAnswer
from backend.agent.state import RunState
from backend.agent.strategies.react import ReasonActObserve
from backend.agent.time_limit import TimeLimit
from backend.llm.base import Completion, LLMRequest, Message
from backend.protocol import AgentRequestInput, RunEvent, TokenStream, ToolError
from backend.settings import Settings
from tests.conftest import StartServer
from tests.fakes import Hang, ScriptedLLM, SlowTool, calls, observe, reason
from tests.fakes import test_registry as tools
from tests.faulty_openai import (
    FaultyOpenAIServer,
    Reply,
    Stall,
    running_faulty_openai,
)
from tests.run_harness import Run, make_kit
from tests.ws_client import labels

LIMIT = TimeLimit(active_s=10.0, final_answer_s=5.0)
FINAL = "Out of time: here is what I have."
FINAL_TOKENS = ["TokenStream"] * (len(FINAL.split(" ")) + 1)  # + the closing one
SLACK_S = 2.0


class FakeClock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Taking:
    """A scripted reply that takes `seconds` of the clock's time."""

    clock: FakeClock
    seconds: float
    reply: Completion | str

    def __call__(self, request: LLMRequest) -> Completion:
        self.clock.advance(self.seconds)
        reply = self.reply
        return Completion(content=reply) if isinstance(reply, str) else reply


class TimedRun(Run):
    """A `Run` whose driver times its phases with `monotonic`."""

    def __init__(
        self,
        strategy: AgentLoop,
        monotonic: Callable[[], float] = time.perf_counter,
        *,
        limit: TimeLimit = LIMIT,
        **kwargs: Any,
    ) -> None:
        super().__init__(strategy, **kwargs)
        self.monotonic = monotonic
        self.limit = limit

    def driver(self) -> RunDriver:
        ctx = AgentContext(self.state, self.history, self.emit)
        return RunDriver(
            self.strategy,
            ctx,
            self.control,
            checkpoint=self._save,
            time_limit=self.limit,
            monotonic=self.monotonic,
        )


def react(llm: ScriptedLLM, slow: SlowTool | None = None) -> AgentLoop:
    return ReasonActObserve(make_kit(llm, tools(slow)))


def final_prompt(llm: ScriptedLLM) -> str:
    assert llm.purposes[-1] == "final"
    return llm.requests[-1].messages[-1].content or ""


# -- what counts --------------------------------------------------------------


async def test_time_waiting_for_the_user_does_not_count() -> None:
    """An hour waiting on the user's answer adds nothing to the run's active time."""
    clock = FakeClock()
    llm = ScriptedLLM(
        Taking(clock, 4, reason("Ask which number.")),
        Taking(clock, 4, calls(("request_input", {"question": "Which number?"}))),
        Taking(clock, 1, observe(should_continue=False, final="One.")),
    )
    run = TimedRun(react(llm), clock)

    def answer_an_hour_later(event: RunEvent) -> None:
        if isinstance(event, AgentRequestInput):
            clock.advance(3600)
            run.control.answer(UserAnswer(event.question_id, "1"))

    run.on_event = answer_an_hour_later
    result = await run.go()

    assert run.names() == [
        "AgentStart",
        "AgentTurnStart",
        "AgentReason",
        "AgentRequestInput",
        "AgentObserve",
    ]
    assert (result.answer, result.reason) == ("One.", "finished")
    assert run.state.active_ms == 9000.0  # 4 + 4 + 1 s of work, not the hour


async def test_time_spent_working_ends_the_run_at_the_next_phase() -> None:
    """A reply overrunning the limit is kept; the next phase is a timeout answer."""
    clock = FakeClock()
    llm = ScriptedLLM(
        Taking(clock, 11, reason("Count.", tools=["add"])),
        FINAL,
    )
    run = TimedRun(react(llm), clock)

    result = await run.go()

    assert run.names() == ["AgentStart", "AgentTurnStart", "AgentReason", *FINAL_TOKENS]
    assert (result.answer, result.reason, result.steps) == (FINAL, "timeout", 1)
    assert llm.purposes == ["reason", "final"]
    assert "The run's time limit (10 seconds of work) ran out" in final_prompt(llm)
    assert run.state.active_ms == 11000.0
    assert [(t.phase, t.duration_ms) for t in run.state.trace] == [
        ("turn", 0.0),
        ("reason", 11000.0),
    ]


async def paused_after(
    clock: FakeClock, seconds: float
) -> tuple[str, tuple[Message, ...]]:
    """The checkpoint of a run dropped while waiting on a question, after
    `seconds` of work."""
    llm = ScriptedLLM(
        Taking(clock, seconds, reason("Ask.")),
        calls(("request_input", {"question": "Which number?"})),
    )
    run = TimedRun(react(llm), clock)
    asked = asyncio.Event()
    run.on_event = lambda e: asked.set() if isinstance(e, AgentRequestInput) else None
    task = asyncio.ensure_future(run.go())
    await asked.wait()
    state_json, messages = run.checkpoints[-1]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return state_json, messages


def restored(
    llm: ScriptedLLM,
    limit: TimeLimit,
    clock: FakeClock,
    checkpoint: tuple[str, tuple[Message, ...]],
) -> TimedRun:
    state_json, messages = checkpoint
    run = TimedRun.restore(react(llm), state_json, messages)
    run.monotonic, run.limit = clock, limit
    return run


async def test_active_time_survives_a_checkpoint() -> None:
    """Dropped while waiting after 6 s of work, the run continues with 4 s
    left: an observe that takes 5 s runs them out."""
    clock = FakeClock()
    checkpoint = await paused_after(clock, 6)
    assert RunState.from_json(checkpoint[0]).active_ms == 6000.0

    llm = ScriptedLLM(Taking(clock, 5, observe("Keep going.")), FINAL)
    run = restored(llm, LIMIT, clock, checkpoint)
    question = run.state.pending_question
    assert question is not None
    run.control.answer(UserAnswer(question.question_id, "1"))
    result = await run.go()

    assert run.names() == ["AgentObserve", *FINAL_TOKENS]
    assert (result.answer, result.reason) == (FINAL, "timeout")
    assert llm.purposes == ["observe", "final"]
    assert run.state.active_ms == 11000.0


async def test_a_question_is_not_put_once_the_time_is_up() -> None:
    """A run restored while waiting, on a server whose limit its work already
    exceeds, withdraws the question instead of waiting on it."""
    clock = FakeClock()
    checkpoint = await paused_after(clock, 6)

    llm = ScriptedLLM(FINAL)
    tighter = TimeLimit(active_s=5.0, final_answer_s=5.0)
    run = restored(llm, tighter, clock, checkpoint)
    result = await run.go()

    assert run.names() == FINAL_TOKENS
    assert (result.answer, result.reason) == (FINAL, "timeout")
    withdrawn = run.history[-1]
    assert (withdrawn.content, withdrawn.status) == (UNASKED_NOTE, "cancelled")
    assert "(5 seconds of work)" in final_prompt(llm)


# -- what is cut off ------------------------------------------------------------


async def test_a_hung_llm_call_is_cancelled_and_the_model_answers() -> None:
    """A model call hung past the limit is cancelled in time; a final answer follows."""
    hang = Hang()
    llm = ScriptedLLM(hang, FINAL)
    run = TimedRun(react(llm), limit=TimeLimit(active_s=0.2, final_answer_s=5.0))

    began = time.monotonic()
    result = await run.go()
    seconds = time.monotonic() - began

    assert run.names() == ["AgentStart", "AgentTurnStart", *FINAL_TOKENS]
    assert (result.answer, result.reason, result.steps) == (FINAL, "timeout", 1)
    assert hang.cancelled.is_set()
    assert llm.purposes == ["reason", "final"]
    assert 0.19 <= seconds < 0.2 + SLACK_S
    assert run.state.active_ms >= 199.0


async def test_a_hung_final_answer_is_cut_off_too() -> None:
    """A final answer call that hangs too is cancelled and a canned answer given."""
    first, last = Hang(), Hang()
    llm = ScriptedLLM(first, last)
    run = TimedRun(react(llm), limit=TimeLimit(active_s=0.1, final_answer_s=0.1))

    began = time.monotonic()
    result = await run.go()
    seconds = time.monotonic() - began

    assert run.names() == ["AgentStart", "AgentTurnStart"]
    assert result.reason == "timeout"
    assert result.answer == (
        "I could not produce an answer after 1 step(s), and no tool was run. "
        "Please try rephrasing the request."
    )
    assert first.cancelled.is_set() and last.cancelled.is_set()
    assert 0.19 <= seconds < 0.2 + SLACK_S


async def test_a_running_tool_is_cancelled_and_reported() -> None:
    """A tool running at the limit is cancelled and closed as timed out in history."""
    slow = SlowTool()
    llm = ScriptedLLM(
        reason("Wait for slow.", tools=["slow"]),
        calls(("slow", {"label": "x"})),
        FINAL,
    )
    run = TimedRun(
        react(llm, slow=slow), limit=TimeLimit(active_s=0.2, final_answer_s=5.0)
    )

    result = await run.go()

    assert run.names() == [
        "AgentStart",
        "AgentTurnStart",
        "AgentReason",
        "ToolStart:slow",
        "ToolError:slow:cancelled",
        *FINAL_TOKENS,
    ]
    assert (result.answer, result.reason) == (FINAL, "timeout")
    assert slow.started.is_set() and slow.cancelled.is_set()
    error = run.events[4]
    assert isinstance(error, ToolError) and error.error == TIMED_OUT_NOTE
    closed = run.history[-1]
    assert (closed.name, closed.content, closed.status) == (
        "slow",
        TIMED_OUT_NOTE,
        "cancelled",
    )
    assert isinstance(run.events[-1], TokenStream) and run.events[-1].is_last


# -- settings and the whole server ---------------------------------------------


def test_the_limit_must_be_positive() -> None:
    """A zero run timeout is refused; the default is 300 seconds."""
    with pytest.raises(ValidationError):
        Settings(_env_file=None, run_timeout_s=0)  # type: ignore[call-arg]
    assert Settings(_env_file=None).run_timeout_s == 300.0  # type: ignore[call-arg]


@pytest.fixture
async def faulty() -> AsyncIterator[FaultyOpenAIServer]:
    async with running_faulty_openai() as server:
        yield server


async def test_the_server_cuts_off_a_stalled_llm_at_the_run_limit(
    start_server: StartServer, faulty: FaultyOpenAIServer
) -> None:
    """LOOPWIRE_LLM_TIMEOUT_S would wait 30 s; the run's 0.5 s end it first,
    closing the upstream request."""
    faulty.script(Stall(), Reply(content="Sorry, I ran out of time."))
    harness = await start_server(
        None,
        tools(),
        llm_base_url=faulty.base_url,
        llm_timeout_s=30,
        run_timeout_s=0.5,
    )
    client, _ = await harness.ready_client()

    began = time.monotonic()
    frames = await client.chat("Count.", agent_mode=True)
    seconds = time.monotonic() - began

    streamed = [f for f in frames if f["type"] == "token_stream"]
    assert labels(frames) == [
        "agent_start",
        "agent_turn_start",
        *["token_stream"] * len(streamed),
        "chat_response",
        "agent_completion",
        "response_complete",
    ]
    assert frames[-3]["message"] == "Sorry, I ran out of time."
    assert frames[-2]["reason"] == "timeout"
    assert faulty.dropped.is_set()
    assert len(faulty.requests) == 2
    assert 0.49 <= seconds < 0.5 + SLACK_S
