"""Read-only tool calls of one reply run at once (`agent/tool_batch.py`).

The tools here prove concurrency without timing: they wait on a barrier
only calls running together can pass, or count how many run at a time.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from backend.agent.cutoffs import CANCELLED_NOTE
from backend.agent.state import RunState
from backend.agent.strategies.act import ActUntilAnswer
from backend.protocol import ToolApprovalRequest, ToolComplete, ToolError, ToolStart
from backend.settings import Settings
from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from tests.fakes import NoteArgs, Saver, ScriptedLLM, calls
from tests.run_harness import Run, make_kit

READ_ONLY = ToolEffect(read_only=True, idempotent=True, untrusted_result=False)


class ProbeArgs(BaseModel):
    n: int


@dataclass
class Probe:
    """A read-only tool that counts how many of its calls run at once.

    `barrier`: every call waits on it (only calls running together pass);
    `hold`: every call waits for it (a stop or a crash cuts them off);
    `after`: call n waits until call `after[n]` has finished."""

    barrier: asyncio.Barrier | None = None
    hold: asyncio.Event | None = None
    after: dict[int, int] = field(default_factory=dict)
    calls: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    running: int = 0
    most: int = 0
    started: dict[int, asyncio.Event] = field(default_factory=dict)
    done: dict[int, asyncio.Event] = field(default_factory=dict)

    def event(self, table: dict[int, asyncio.Event], n: int) -> asyncio.Event:
        return table.setdefault(n, asyncio.Event())

    async def __call__(self, args: ProbeArgs, ctx: ToolContext) -> dict[str, int]:
        n = args.n
        self.calls.append(n)
        self.running += 1
        self.most = max(self.most, self.running)
        self.event(self.started, n).set()
        try:
            await self._wait(n)
        except asyncio.CancelledError:
            self.cancelled.append(n)
            raise
        finally:
            self.running -= 1
        self.finished.append(n)
        self.event(self.done, n).set()
        return {"n": n}

    async def _wait(self, n: int) -> None:
        await asyncio.sleep(0)  # one turn of the loop: others may start
        if self.barrier is not None:
            await self.barrier.wait()
        if self.hold is not None:
            await self.hold.wait()
        if n in self.after:
            await self.event(self.done, self.after[n]).wait()


def registry(probe: Probe, saver: Saver | None = None) -> ToolRegistry:
    return ToolRegistry(
        [
            Tool("probe", "Look something up.", ProbeArgs, probe, READ_ONLY),
            Tool(
                "save",
                "Save a note (asks first).",
                NoteArgs,
                saver or Saver(),
                ToolEffect(requires_approval=True, untrusted_result=False),
            ),
        ]
    )


def act(llm: ScriptedLLM, tools: ToolRegistry, **config: Any) -> ActUntilAnswer:
    return ActUntilAnswer(make_kit(llm, tools, **config))


def probes(*numbers: int) -> tuple[tuple[str, dict[str, Any]], ...]:
    return tuple(("probe", {"n": n}) for n in numbers)


def tool_frames(run: Run) -> list[str]:
    """The run's tool frames: `start 1`, `done 1`, `asked save`, …"""
    frames: list[str] = []
    for event in run.events:
        if isinstance(event, ToolStart | ToolComplete | ToolError):
            kind = {ToolStart: "start", ToolComplete: "done", ToolError: "error"}
            tag = type(event)
            frames.append(f"{kind[tag]} {_label(run, event.tool_call_id)}")
        elif isinstance(event, ToolApprovalRequest):
            frames.append(f"asked {event.tool_name}")
    return frames


def _label(run: Run, call_id: str) -> str:
    """`probe 2` for the call of probe with n=2; `save` for a save."""
    for message in run.history:
        for call in message.tool_calls:
            if call.id == call_id:
                n = json.loads(call.arguments).get("n")
                return call.name if n is None else f"{call.name} {n}"
    raise AssertionError(f"no call {call_id}")


def shown(n: int) -> str:
    """What the model reads of probe n's result."""
    return json.dumps({"n": n}, indent=2)


def tool_results(run: Run) -> list[tuple[str | None, str | None]]:
    return [(m.name, m.content) for m in run.history if m.role == "tool"]


async def test_three_read_only_calls_run_at_once() -> None:
    """Three calls that each wait for the other two all pass a barrier of three."""
    probe = Probe(barrier=asyncio.Barrier(3))
    llm = ScriptedLLM(calls(*probes(1, 2, 3)), "Done.")
    run = Run(act(llm, registry(probe)))
    result = await run.go()

    assert probe.most == 3 and sorted(probe.finished) == [1, 2, 3]
    assert tool_frames(run) == [
        "start probe 1",
        "start probe 2",
        "start probe 3",
        "done probe 1",
        "done probe 2",
        "done probe 3",
    ]
    assert tool_results(run) == [
        ("probe", shown(1)),
        ("probe", shown(2)),
        ("probe", shown(3)),
    ]
    assert (result.answer, result.reason) == ("Done.", "finished")
    tools_phase = [t for t in run.state.trace if t.phase == "tools"]
    assert [t.tool_calls for t in tools_phase] == [0, 3, 0]  # announce, run, next


async def test_results_are_settled_in_the_models_order() -> None:
    """The last-called finishes first, yet the frames and history keep the
    model's order."""
    probe = Probe(barrier=asyncio.Barrier(3), after={1: 2, 2: 3})
    llm = ScriptedLLM(calls(*probes(1, 2, 3)), "Done.")
    run = Run(act(llm, registry(probe)))
    await run.go()

    assert probe.finished == [3, 2, 1]
    assert tool_frames(run) == [
        "start probe 1",
        "start probe 2",
        "start probe 3",
        "done probe 1",
        "done probe 2",
        "done probe 3",
    ]
    assert [name for name, _ in tool_results(run)] == ["probe"] * 3
    assert [m.content for m in run.history if m.role == "tool"] == [
        shown(1),
        shown(2),
        shown(3),
    ]


async def test_with_the_setting_at_one_calls_run_one_at_a_time() -> None:
    """`parallel_tool_calls=1` is the old behaviour: never two at once."""
    probe = Probe()
    llm = ScriptedLLM(calls(*probes(1, 2, 3)), "Done.")
    run = Run(act(llm, registry(probe), parallel_tool_calls=1))
    await run.go()

    assert probe.most == 1 and probe.calls == [1, 2, 3]
    assert tool_frames(run) == [
        "start probe 1",
        "done probe 1",
        "start probe 2",
        "done probe 2",
        "start probe 3",
        "done probe 3",
    ]
    assert run.state.batch == []


async def test_the_bound_holds() -> None:
    """Five calls with the setting at 2 run two, two, then one at a time."""
    probe = Probe()
    llm = ScriptedLLM(calls(*probes(1, 2, 3, 4, 5)), "Done.")
    run = Run(act(llm, registry(probe), parallel_tool_calls=2))
    await run.go()

    assert probe.most == 2 and probe.calls == [1, 2, 3, 4, 5]
    assert tool_frames(run) == [
        "start probe 1",
        "start probe 2",
        "done probe 1",
        "done probe 2",
        "start probe 3",
        "start probe 4",
        "done probe 3",
        "done probe 4",
        "start probe 5",
        "done probe 5",
    ]


async def test_a_call_that_asks_first_splits_the_batch_and_is_asked_alone() -> None:
    """Read-only calls around a call needing approval run in batches before
    and after it; the approval flow is unchanged."""
    probe, saver = Probe(), Saver()
    reply = calls(*probes(1, 2), ("save", {"text": "milk"}), *probes(3, 4))
    llm = ScriptedLLM(reply, "Done.")
    run = Run(act(llm, registry(probe, saver)))
    run.approve_with(True)
    result = await run.go()

    assert tool_frames(run) == [
        "start probe 1",
        "start probe 2",
        "done probe 1",
        "done probe 2",
        "start save",
        "asked save",
        "done save",
        "start probe 3",
        "start probe 4",
        "done probe 3",
        "done probe 4",
    ]
    assert saver.saved == ["milk"] and probe.most == 2
    assert [name for name, _ in tool_results(run)] == [
        "probe",
        "probe",
        "save",
        "probe",
        "probe",
    ]
    assert result.answer == "Done."


async def test_a_declined_call_between_batches_is_reported_and_the_run_stops() -> None:
    """A "no" to the call after a batch ends the run as before; the calls
    after it are not run."""
    probe, saver = Probe(), Saver()
    llm = ScriptedLLM(
        calls(*probes(1, 2), ("save", {"text": "milk"}), *probes(3)), "Not saved."
    )
    run = Run(act(llm, registry(probe, saver)))
    run.approve_with(False, "not now")
    result = await run.go()

    assert tool_frames(run) == [
        "start probe 1",
        "start probe 2",
        "done probe 1",
        "done probe 2",
        "start save",
        "asked save",
        "error save",
        "error probe 3",
    ]
    assert probe.calls == [1, 2] and saver.saved == []
    assert (result.answer, result.reason) == ("Not saved.", "rejected")


async def test_a_repeated_call_in_the_reply_is_not_run_twice() -> None:
    """The same call twice in one reply: the second is a duplicate, not run."""
    probe = Probe()
    llm = ScriptedLLM(calls(*probes(1, 1, 2)), "Done.")
    run = Run(act(llm, registry(probe)))
    await run.go()

    assert probe.calls == [1, 2]
    assert tool_frames(run) == [
        "start probe 1",
        "done probe 1",
        "start probe 2",
        "done probe 2",
    ]
    assert [m.status for m in run.history if m.role == "tool"] == [
        "ok",
        "not_run",
        "ok",
    ]


async def test_stop_during_a_batch_cancels_every_call() -> None:
    """An immediate stop while three calls run cancels all three; the run
    ends `stopped` with each reported cancelled, in order."""
    probe = Probe(hold=asyncio.Event())
    llm = ScriptedLLM(calls(*probes(1, 2, 3)))
    run = Run(act(llm, registry(probe)))
    task = asyncio.ensure_future(run.go())
    for n in (1, 2, 3):
        await probe.event(probe.started, n).wait()
    run.control.stop("immediate")
    result = await task

    assert (result.reason, result.stop_mode) == ("stopped", "immediate")
    assert sorted(probe.cancelled) == [1, 2, 3] and probe.finished == []
    assert tool_frames(run) == [
        "start probe 1",
        "start probe 2",
        "start probe 3",
        "error probe 1",
        "error probe 2",
        "error probe 3",
    ]
    assert [e.error for e in run.of(ToolError)] == [CANCELLED_NOTE] * 3
    assert [m.status for m in run.history if m.role == "tool"] == ["cancelled"] * 3
    assert run.state.batch == [] and run.state.queue == []


async def test_a_graceful_stop_lets_the_batch_finish_and_skips_the_rest() -> None:
    """An `after_step` stop asked during a batch lets all of it finish; the
    calls after it are not run."""
    probe = Probe()
    llm = ScriptedLLM(calls(*probes(1, 2, 3)))
    run = Run(act(llm, registry(probe), parallel_tool_calls=2))
    run.on_event = lambda e: (
        run.control.stop("after_step") if isinstance(e, ToolStart) else None
    )
    result = await run.go()

    assert probe.calls == [1, 2]
    assert tool_frames(run) == [
        "start probe 1",
        "start probe 2",
        "done probe 1",
        "done probe 2",
        "error probe 3",
    ]
    assert (result.reason, result.stop_mode) == ("stopped", "after_step")


async def test_a_batch_cut_off_by_a_crash_runs_again_after_the_restart() -> None:
    """A process dying mid-batch leaves every call of it in flight in the
    checkpoint; the run continued from it runs them all again (read-only)
    and finishes, without announcing them twice."""
    probe = Probe(hold=asyncio.Event())
    first = Run(act(ScriptedLLM(calls(*probes(1, 2, 3))), registry(probe)))
    task = asyncio.ensure_future(first.go())
    for n in (1, 2, 3):
        await probe.event(probe.started, n).wait()
    state_json, messages = first.checkpoints[-1]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    saved = RunState.from_json(state_json)
    assert saved.in_flight is not None
    assert saved.batch == [call.id for call in saved.queue]
    assert len(saved.batch) == 3 and saved.in_flight.tool_call_id == saved.batch[0]

    probe.hold.set()
    llm = ScriptedLLM("Done.")
    second = Run.restore(act(llm, registry(probe)), state_json, messages)
    result = await second.go()

    assert Counter(probe.calls) == {1: 2, 2: 2, 3: 2}  # each ran again, once
    assert tool_frames(second) == ["done probe 1", "done probe 2", "done probe 3"]
    assert (result.answer, result.reason) == ("Done.", "finished")
    tool_messages = [m for m in llm.requests[0].messages if m.role == "tool"]
    assert [m.content for m in tool_messages] == [shown(1), shown(2), shown(3)]


async def test_a_process_gone_mid_batch_reports_each_call_as_interrupted() -> None:
    """Not continued (`RunDriver.interrupted`), every call of the batch may
    have run and is reported so, not as never started."""
    probe = Probe(hold=asyncio.Event())
    first = Run(act(ScriptedLLM(calls(*probes(1, 2))), registry(probe)))
    task = asyncio.ensure_future(first.go())
    for n in (1, 2):
        await probe.event(probe.started, n).wait()
    state_json, messages = first.checkpoints[-1]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    second = Run.restore(act(ScriptedLLM(), registry(probe)), state_json, messages)
    result = second.driver().interrupted()

    assert result.reason == "interrupted"
    errors = second.of(ToolError)
    assert [e.error.split(":")[0] for e in errors] == ["probe was interrupted"] * 2
    assert [m.status for m in second.history if m.role == "tool"] == ["cancelled"] * 2


def test_a_checkpoint_from_before_batches_still_loads() -> None:
    """A state written without `batch` reads as one call at a time."""
    state = Run(act(ScriptedLLM(), registry(Probe()))).state
    old = json.loads(state.to_json())
    del old["batch"]
    assert RunState.from_json(json.dumps(old)).batch == []


def test_the_setting_reaches_the_loop() -> None:
    """`LOOPWIRE_AGENT_PARALLEL_TOOL_CALLS` sets the bound; 4 by default."""
    assert Settings().loop_config().parallel_tool_calls == 4
    configured = Settings(agent_parallel_tool_calls=1)
    assert configured.loop_config().parallel_tool_calls == 1
