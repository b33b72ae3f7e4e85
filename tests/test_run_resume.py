"""A paused run survives being dropped.

The run pauses (a question, or an approval); its last checkpoint — the
`RunState` as JSON, and the history — is kept; the task is cancelled, as a
process that dies; a new driver, with new strategy objects, continues the run
from the JSON and the history alone. The frames before the drop and after it
are those of a run never interrupted, with the same answer, and no tool runs
twice (the test tools count their calls). A tool that was running when the
process died is reported as interrupted, never run again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from backend.agent.loop import AgentLoop, AgentResult
from backend.agent.run_control import UserAnswer
from backend.agent.state import RunState
from backend.app import default_strategies
from backend.errors import InvalidMessage
from backend.llm.base import Message
from backend.protocol import (
    AgentRequestInput,
    RunEvent,
    ToolApprovalRequest,
    ToolComplete,
    ToolError,
)
from backend.tools.base import Reconciled, Tool, ToolContext, ToolEffect, ToolRegistry
from tests.fakes import NoteArgs, Saver, SlowTool, test_registry
from tests.protocol_llm import ANSWER, Ask, ProtocolLLM, Use
from tests.run_harness import Run, make_kit
from tests.service_harness import serving
from tests.ws_client import labels

STRATEGIES = [
    s.name
    for s in default_strategies(make_kit(ProtocolLLM(), ToolRegistry()))
    if s.loop  # `retrieve` is a mode: tests/test_retrieval.py
]


class CountArgs(BaseModel):
    n: int


@dataclass
class Counter:
    """A read-only tool that records every call it gets."""

    calls: list[int] = field(default_factory=list)

    async def __call__(self, args: CountArgs, ctx: ToolContext) -> dict[str, int]:
        self.calls.append(args.n)
        return {"n": args.n, "calls": len(self.calls)}


@dataclass
class World:
    """The tools' side effects, shared by a run before and after the drop."""

    counter: Counter = field(default_factory=Counter)
    saver: Saver = field(default_factory=Saver)

    def registry(self) -> ToolRegistry:
        return ToolRegistry(
            [
                Tool(
                    "count",
                    "Count.",
                    CountArgs,
                    self.counter,
                    ToolEffect(read_only=True, idempotent=True),
                ),
                Tool(
                    "save",
                    "Save a note.",
                    NoteArgs,
                    self.saver,
                    ToolEffect(requires_approval=True),
                ),
            ]
        )


def strategy(name: str, registry: ToolRegistry, *actions: Any) -> AgentLoop:
    """A fresh strategy object on a fresh kit: nothing carries over in memory."""
    found = default_strategies(make_kit(ProtocolLLM(*actions), registry)).get(name)
    assert found is not None
    return found


def uses_tools(name: str) -> bool:
    return strategy(name, ToolRegistry()).uses_tools


def with_question(name: str) -> list[Use | Ask]:
    if uses_tools(name):
        return [Use("count", {"n": 1}), Ask("Which one?"), Use("count", {"n": 2})]
    return [Ask("Which one?"), Ask("And then?")]


WITH_APPROVAL = [
    Use("count", {"n": 1}),
    Use("save", {"text": "milk"}),
    Use("count", {"n": 2}),
]


def respond(run: Run) -> None:
    """Answer every question with "yes"; approve every call."""

    def on_event(event: RunEvent) -> None:
        if isinstance(event, AgentRequestInput):
            run.control.answer(UserAnswer(event.question_id, "yes"))
        elif isinstance(event, ToolApprovalRequest):
            run.control.resolve_approval(event.tool_call_id, True, None)

    run.on_event = on_event


def comparable(events: list[RunEvent]) -> list[dict[str, Any]]:
    """Events without what differs between two runs (timings, random ids)."""
    return [e.model_dump(exclude={"duration_ms", "question_id"}) for e in events]


async def uninterrupted(
    name: str, actions: list[Use | Ask]
) -> tuple[Run, AgentResult, World]:
    world = World()
    run = Run(strategy(name, world.registry(), *actions), max_steps=6)
    respond(run)
    return run, await run.go(), world


async def dropped_when(
    run: Run, happened: Callable[[], Awaitable[object]]
) -> tuple[str, tuple[Message, ...]]:
    """Run until `happened`, then drop the task as a dying process would;
    the last checkpoint (state JSON, history) is what survives."""
    task = asyncio.ensure_future(run.go())
    await happened()
    state_json, messages = run.checkpoints[-1]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert RunState.from_json(state_json).to_json() == state_json
    return state_json, messages


def seen(run: Run, kind: type[RunEvent]) -> asyncio.Event:
    """Set once `run` reports a `kind` event."""
    event = asyncio.Event()
    run.on_event = lambda e: event.set() if isinstance(e, kind) else None
    return event


async def dropped_at_pause(
    name: str, actions: list[Use | Ask], pause: type[RunEvent]
) -> tuple[list[RunEvent], Run, AgentResult, World]:
    world = World()
    first = Run(strategy(name, world.registry(), *actions), max_steps=6)
    state_json, messages = await dropped_when(first, seen(first, pause).wait)

    second = Run.restore(
        strategy(name, world.registry(), *actions), state_json, messages
    )
    respond(second)
    driver = second.driver()  # reopens a pending approval: answerable at once
    state = second.state
    assert state.waiting and isinstance(first.events[-1], pause)
    if state.pending_question is not None:
        second.control.answer(UserAnswer(state.pending_question.question_id, "yes"))
    if state.pending_approval is not None:
        second.control.resolve_approval(state.pending_approval.tool_call_id, True, None)
    return first.events, second, await driver.run(), world


@pytest.mark.parametrize("name", STRATEGIES)
async def test_a_run_paused_on_a_question_continues_from_its_checkpoint(
    name: str,
) -> None:
    """Each strategy restored at a question ends as an unbroken run would."""
    actions = with_question(name)
    whole, whole_result, whole_world = await uninterrupted(name, actions)
    before, after, result, world = await dropped_at_pause(
        name, actions, AgentRequestInput
    )

    assert comparable([*before, *after.events]) == comparable(whole.events)
    assert (result.answer, result.reason, result.steps) == (
        whole_result.answer,
        whole_result.reason,
        whole_result.steps,
    )
    assert result.answer == ANSWER and result.reason == "finished"
    assert world.counter.calls == whole_world.counter.calls
    if uses_tools(name):
        assert world.counter.calls == [1, 2]  # each ran once, across the drop
    assert [m.model_dump() for m in after.history] == [
        m.model_dump() for m in whole.history
    ]


@pytest.mark.parametrize("name", [n for n in STRATEGIES if uses_tools(n)])
async def test_a_run_paused_on_an_approval_continues_from_its_checkpoint(
    name: str,
) -> None:
    """Restored at an approval, a run matches an unbroken one; the note saves once."""
    whole, whole_result, whole_world = await uninterrupted(name, WITH_APPROVAL)
    before, after, result, world = await dropped_at_pause(
        name, WITH_APPROVAL, ToolApprovalRequest
    )

    assert comparable([*before, *after.events]) == comparable(whole.events)
    assert result.answer == whole_result.answer == ANSWER
    assert world.counter.calls == whole_world.counter.calls == [1, 2]
    assert world.saver.saved == whole_world.saver.saved == ["milk"]


@pytest.mark.parametrize("name", [n for n in STRATEGIES if uses_tools(n)])
async def test_a_tool_running_when_the_process_died_is_in_doubt_until_the_user_says(
    name: str,
) -> None:
    """A call cut off by a crash may or may not have taken effect; a tool
    that cannot tell (no `reconcile`) is not run again unasked: the user is
    asked (an approval `in_doubt`), and a "no" reports it as may-have-run."""
    slow = SlowTool()
    registry = test_registry(slow)
    first = Run(strategy(name, registry, Use("slow", {"label": "x"})))
    state_json, messages = await dropped_when(first, slow.started.wait)

    slow.started.clear()
    second = Run.restore(
        strategy(name, registry, Use("slow", {"label": "x"})), state_json, messages
    )
    second.approve_with(False)
    result = await second.go()

    assert not slow.started.is_set()  # not run again
    (asked,) = second.of(ToolApprovalRequest)
    assert (asked.tool_name, asked.in_doubt) == ("slow", True)
    assert "cannot tell whether it took effect" in asked.description
    interrupted = second.of(ToolError)
    assert [(e.tool_name, e.status) for e in interrupted] == [("slow", "cancelled")]
    assert interrupted[0].error.startswith("slow was interrupted: the server stopped")
    tool_messages = [m for m in second.history if m.role == "tool"]
    assert [(m.status, m.content) for m in tool_messages] == [
        ("cancelled", f"Error (cancelled): {interrupted[0].error}")
    ]
    assert result.answer == ANSWER


async def test_a_call_in_doubt_runs_again_once_the_user_approves() -> None:
    """A call cut off by a crash runs again after the user approves it in doubt."""
    slow = SlowTool()
    registry = test_registry(slow)
    first = Run(strategy("react", registry, Use("slow", {"label": "x"})))
    state_json, messages = await dropped_when(first, slow.started.wait)

    slow.started.clear()
    slow.release.set()
    second = Run.restore(
        strategy("react", registry, Use("slow", {"label": "x"})), state_json, messages
    )
    second.approve_with(True)
    result = await second.go()
    assert slow.started.is_set()
    assert [label for label in second.names() if "slow" in label] == [
        "ToolApprovalRequest:slow",
        "ToolComplete:slow",
    ]
    assert result.answer == ANSWER


@pytest.mark.parametrize("took_effect", [True, False])
async def test_a_tool_that_can_reconcile_settles_a_call_in_doubt_itself(
    took_effect: bool,
) -> None:
    """With `reconcile`, nobody is asked: a call that took effect keeps the
    result it had (and is not run again); one that did not runs now."""
    slow = SlowTool()
    keys: list[str | None] = []

    async def reconcile(ctx: ToolContext) -> Reconciled:
        keys.append(ctx.idempotency_key)
        if took_effect:
            return Reconciled(took_effect=True, result={"label": "x", "status": "done"})
        return Reconciled(took_effect=False)

    def registry() -> ToolRegistry:
        plain = test_registry(slow)
        tools = [t for t in plain if t.name != "slow"]
        (slow_tool,) = [t for t in plain if t.name == "slow"]
        return ToolRegistry(
            [*tools, dataclasses.replace(slow_tool, reconcile=reconcile)]
        )

    first = Run(strategy("react", registry(), Use("slow", {"label": "x"})))
    state_json, messages = await dropped_when(first, slow.started.wait)
    call_id = RunState.from_json(state_json).queue[0].id

    slow.started.clear()
    slow.release.set()
    second = Run.restore(
        strategy("react", registry(), Use("slow", {"label": "x"})), state_json, messages
    )
    await second.go()
    assert keys == [f"r1:{call_id}"]
    assert slow.started.is_set() is not took_effect
    assert [label for label in second.names() if "slow" in label] == [
        "ToolComplete:slow"
    ]
    (done,) = second.of(ToolComplete)
    assert done.result == {"label": "x", "status": "done"}


async def test_a_state_from_another_strategy_is_refused() -> None:
    """A state whose phase the strategy does not have is refused with a `ValueError`."""
    run = Run(strategy("react", ToolRegistry()))
    run.state.phase = "no_such_phase"
    with pytest.raises(
        ValueError, match="strategy 'react' has no phase 'no_such_phase'"
    ):
        await run.go()


async def test_the_service_continues_a_checkpointed_run_in_a_session() -> None:
    """`ChatService.resume`: the paused run waits again, without asking twice,
    for the answer a client sends, and the run ends as usual."""
    world = World()
    actions = with_question("react")
    async with serving(ProtocolLLM(*actions), world.registry()) as client:
        session = client.session
        first = Run(strategy("react", world.registry(), *actions))
        first.state.session_id = session.id
        paused = seen(first, AgentRequestInput)
        state_json, messages = await dropped_when(first, paused.wait)

        for message in messages:
            session.history.append(message)
        client.service.resume(session, RunState.from_json(state_json))
        asked = first.events[-1]
        assert isinstance(asked, AgentRequestInput)
        await client.send(
            type="agent_user_input", content="yes", question_id=asked.question_id
        )
        frames = await client.run()
        again = RunState.from_json(state_json)
        with pytest.raises(InvalidMessage, match="cannot continue here"):
            again.session_id = "elsewhere"
            client.service.resume(session, again)

    names = labels(frames)
    assert "agent_start" not in names and "agent_request_input" not in names
    assert names[0] == "agent_observe"  # the step the question was in goes on
    assert names.count("tool_start:count") == 1  # the second count only
    assert labels(frames)[-3:] == [
        "chat_response",
        "agent_completion",
        "response_complete",
    ]
    assert world.counter.calls == [1, 2]
    assert session.history[-1].content == ANSWER


async def test_a_client_system_prompt_is_kept_across_the_checkpoint() -> None:
    """The instructions live in the run's state: the calls after a restart
    carry them as the calls before it did."""
    actions = with_question("react")
    before_llm, after_llm = ProtocolLLM(*actions), ProtocolLLM(*actions)
    world = World()

    def react(llm: ProtocolLLM) -> AgentLoop:
        found = default_strategies(make_kit(llm, world.registry())).get("react")
        assert found is not None
        return found

    first = Run(react(before_llm), max_steps=6)
    first.state.request = first.state.request.model_copy(
        update={"system_prompt": "Reply in haiku."}
    )
    state_json, messages = await dropped_when(
        first, seen(first, AgentRequestInput).wait
    )
    assert RunState.from_json(state_json).request.system_prompt == "Reply in haiku."

    second = Run.restore(react(after_llm), state_json, messages)
    respond(second)
    driver = second.driver()
    pending = second.state.pending_question
    assert pending is not None
    second.control.answer(UserAnswer(pending.question_id, "yes"))
    result = await driver.run()

    assert result.answer == ANSWER
    for llm in (before_llm, after_llm):
        assert llm.requests
        for request in llm.requests:
            assert [m.role for m in request.messages[:2]] == ["system", "system"]
            assert request.messages[1].content == "Reply in haiku."
