"""Unit tests of ReasonActObserveLoop with a ScriptedLLM: events, calls, results."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from backend.agent.loop import AgentContext, AgentResult, RunControl, UserAnswer
from backend.agent.react import LoopConfig, ReasonActObserveLoop
from backend.errors import LLMError
from backend.events import (
    AgentFailed,
    ApprovalRequested,
    DuplicateCall,
    Event,
    InputRequested,
    Observed,
    Reasoned,
    StepsGranted,
    TokenStreamed,
    ToolCompleted,
    ToolFailed,
    ToolStarted,
)
from backend.history import History
from backend.llm.base import Completion, Message
from backend.prompts import PromptProvider
from backend.tools.base import Tool, ToolRegistry
from backend.tools.executor import ExecutorConfig, ToolExecutor
from backend.tools.policy import RateLimiter
from tests.fakes import (
    Saver,
    ScriptedLLM,
    SlowTool,
    approval_registry,
    calls,
    observe,
    reason,
    test_registry,
)

QUESTION = "What is 2+3?"


def make_loop(
    llm: ScriptedLLM, slow: SlowTool | None = None, **config: Any
) -> ReasonActObserveLoop:
    registry = test_registry(slow)
    return ReasonActObserveLoop(
        llm, registry, ToolExecutor(registry), PromptProvider(), LoopConfig(**config)
    )


class Run:
    """One loop run with its recorded events."""

    def __init__(self, max_steps: int = 10, cap: int = 50) -> None:
        self.events: list[Event] = []
        self.history = History([Message.user(QUESTION)])
        self.control = RunControl(max_steps=max_steps, max_steps_cap=cap)
        self.on_event: Callable[[Event], None] = lambda event: None

    def emit(self, event: Event) -> None:
        self.events.append(event)
        self.on_event(event)

    def ctx(self) -> AgentContext:
        return AgentContext(
            session_id="s1",
            run_id="r1",
            question=QUESTION,
            history=self.history,
            selected_tools=None,
            read_only=False,
            control=self.control,
            emit=self.emit,
        )

    def names(self) -> list[str]:
        return [_label(e) for e in self.events]


def _label(event: Event) -> str:
    name = type(event).__name__
    if isinstance(event, ToolStarted | ToolCompleted):
        return f"{name}:{event.tool_name}"
    if isinstance(event, ToolFailed):
        return f"{name}:{event.tool_name}:{event.status}"
    return name


STEP = ["TurnStarted", "Reasoned", "ToolStarted:add", "ToolCompleted:add", "Observed"]


async def test_finishes_after_one_step_with_the_observed_answer() -> None:
    llm = ScriptedLLM(
        reason("Add the numbers with add.", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe("2+3 is 5.", should_continue=False, final="2 + 3 = **5**"),
    )
    run = Run()
    result = await make_loop(llm).run(run.ctx())

    assert run.names() == ["AgentStarted", *STEP]
    assert result == AgentResult("2 + 3 = **5**", "finished", 1, result.usage, None)
    assert result.usage.llm_calls == 3
    assert llm.purposes == ["reason", "act", "observe"]
    reasoned = run.events[2]
    assert isinstance(reasoned, Reasoned)
    assert reasoned.content == "I will work it out."
    assert (
        reasoned.control is not None
        and reasoned.control.plan == "Add the numbers with add."
    )


async def test_plan_reaches_act_and_observe_sees_real_results() -> None:
    llm = ScriptedLLM(
        reason("PLAN-XYZ: add 2 and 3"),
        calls(("add", {"expression": "2+3"})),
        observe(should_continue=False, final="5"),
    )
    run = Run()
    await make_loop(llm).run(run.ctx())

    reason_call, act_call, observe_call = llm.requests
    assert reason_call.tools == () and reason_call.tool_choice is None
    assert "`add`" in (reason_call.messages[-1].content or "")
    assert "`request_input`" in (reason_call.messages[-1].content or "")
    assert act_call.tool_choice == "auto"
    assert [t.name for t in act_call.tools] == ["add", "fail", "slow", "request_input"]
    assert "PLAN-XYZ: add 2 and 3" in (act_call.messages[-1].content or "")
    observe_prompt = observe_call.messages[-1].content or ""
    assert observe_call.tools == ()
    assert '"result": 5.0' in observe_prompt
    assert "Agent step 1 of 10: OBSERVE" in observe_prompt
    assert QUESTION in observe_prompt
    # history: user, assistant tool call, tool result (the final answer is the service's)
    assert [m.role for m in run.history] == ["user", "assistant", "tool"]
    assert run.history[2].content == '{\n  "expression": "2+3",\n  "result": 5.0\n}'


async def test_three_steps_then_finish() -> None:
    llm = ScriptedLLM(
        reason("step one"),
        calls(("add", {"expression": "1+1"})),
        observe("got 2"),
        reason("step two"),
        calls(("add", {"expression": "2+2"})),
        observe("got 4"),
        reason("step three"),
        calls(("add", {"expression": "4+4"})),
        observe("got 8", should_continue=False, final="8"),
    )
    run = Run()
    result = await make_loop(llm).run(run.ctx())

    assert run.names() == ["AgentStarted", *STEP, *STEP, *STEP]
    assert [e.step for e in run.events if isinstance(e, Observed)] == [1, 2, 3]
    assert (
        result.final_answer == "8" and result.steps == 3 and result.reason == "finished"
    )
    third_reason = llm.requests[6].messages[-1].content or ""
    assert "- Step 1: got 2" in third_reason and "- Step 2: got 4" in third_reason


async def test_reason_can_finish_without_acting() -> None:
    llm = ScriptedLLM(reason("greet", finish=True, final="Hello!"))
    run = Run()
    result = await make_loop(llm).run(run.ctx())

    assert run.names() == ["AgentStarted", "TurnStarted", "Reasoned"]
    assert result.final_answer == "Hello!" and result.reason == "finished"
    assert llm.purposes == ["reason"]


async def test_no_tool_call_records_no_action() -> None:
    llm = ScriptedLLM(
        reason("nothing to run"),
        Completion(content="No action needed."),
        observe(should_continue=False, final="Done."),
    )
    run = Run()
    result = await make_loop(llm).run(run.ctx())

    assert run.names() == ["AgentStarted", "TurnStarted", "Reasoned", "Observed"]
    assert "No tool was called in this step. The act phase said: No action needed." in (
        llm.requests[2].messages[-1].content or ""
    )
    assert result.final_answer == "Done."


async def test_observe_without_final_answer_forces_a_streamed_final_answer() -> None:
    llm = ScriptedLLM(
        reason(),
        calls(("add", {"expression": "2+3"})),
        observe(should_continue=False),
        "The answer is 5.",
    )
    run = Run()
    result = await make_loop(llm).run(run.ctx())

    tokens = [e for e in run.events if isinstance(e, TokenStreamed)]
    assert [(t.token, t.is_first, t.is_last) for t in tokens] == [
        ("The ", True, False),
        ("answer ", False, False),
        ("is ", False, False),
        ("5.", False, False),
        ("", False, True),
    ]
    assert result.final_answer == "The answer is 5."
    final_call = llm.requests[-1]
    assert final_call.purpose == "final" and final_call.tool_choice == "none"


async def test_tool_failure_is_fed_back_and_loop_goes_on() -> None:
    llm = ScriptedLLM(
        reason(),
        calls(
            ("fail", {"reason": "disk on fire"}),
            ("nope", {}),
            ("add", {"expression": "1+1"}),
        ),
        observe(should_continue=False, final="One worked."),
    )
    run = Run()
    result = await make_loop(llm).run(run.ctx())

    failures = [e for e in run.events if isinstance(e, ToolFailed)]
    assert [(f.tool_name, f.status, f.error) for f in failures] == [
        ("fail", "failed", "disk on fire"),
        (
            "nope",
            "failed",
            "there is no tool named 'nope' here; available tools: add, fail, slow",
        ),
    ]
    tool_messages = [m.content for m in run.history if m.role == "tool"]
    assert tool_messages[0] == "Error (failed): disk on fire"
    assert result.final_answer == "One worked." and result.reason == "finished"


async def test_consecutive_failures_end_the_loop_honestly() -> None:
    llm = ScriptedLLM(
        reason(),
        calls(
            ("fail", {"reason": "disk on fire"}),
            ("nope", {}),
            ("add", '{"expression": 5}'),
        ),
        "Sorry: every tool call failed (the disk is on fire).",
    )
    run = Run()
    result = await make_loop(llm).run(run.ctx())

    failures = [e for e in run.events if isinstance(e, ToolFailed)]
    assert [f.status for f in failures] == ["failed", "failed", "failed"]
    assert (
        failures[2].error
        == "invalid arguments for add: expression: Input should be a valid string"
    )
    assert "Observed" not in run.names()
    assert result.reason == "error"
    assert result.final_answer == "Sorry: every tool call failed (the disk is on fire)."
    why = llm.requests[-1].messages[-1].content or ""
    assert "3 tool calls in a row failed (last: add: invalid arguments" in why


async def test_request_input_waits_for_the_answer_and_records_it() -> None:
    llm = ScriptedLLM(
        reason("ask for the unit"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("user said km"),
        reason("convert", finish=True, final="10 miles is 16.09 km"),
    )
    run = Run()
    run.on_event = lambda e: (
        run.control.answers.put_nowait(UserAnswer(e.question_id, "km"))
        if isinstance(e, InputRequested)
        else None
    )
    result = await make_loop(llm).run(run.ctx())

    assert run.names() == [
        "AgentStarted",
        "TurnStarted",
        "Reasoned",
        "InputRequested",
        "Observed",
        "TurnStarted",
        "Reasoned",
    ]
    asked = run.events[3]
    assert isinstance(asked, InputRequested)
    assert (asked.question, asked.step, asked.timeout_s) == ("Which unit?", 1, 300.0)
    assert run.history[-1] == Message.tool(asked.question_id, "request_input", "km")
    assert "km" in (llm.requests[2].messages[-1].content or "")
    assert run.control.pending_question is None
    assert result.final_answer == "10 miles is 16.09 km" and result.steps == 2


async def test_request_input_timeout_ends_with_a_final_answer() -> None:
    llm = ScriptedLLM(
        reason("ask"),
        calls(
            ("request_input", {"question": "Which unit?"}),
            ("add", {"expression": "1+1"}),
        ),
        "You did not answer, so I could not convert.",
    )
    run = Run()
    result = await make_loop(llm, request_input_timeout_s=0.05).run(run.ctx())

    assert run.names()[:5] == [
        "AgentStarted",
        "TurnStarted",
        "Reasoned",
        "InputRequested",
        "InputTimedOut",
    ]
    assert "ToolFailed:add:cancelled" in run.names()
    assert result.reason == "timeout"
    assert result.final_answer == "You did not answer, so I could not convert."
    assert "no answer came within 0.05 seconds" in (
        llm.requests[-1].messages[-1].content or ""
    )
    assert [m.content for m in run.history if m.role == "tool"] == [
        "No answer: the user did not reply within 0.05 seconds.",
        "Not run: the user stopped the run before this call.",
    ]


async def test_max_steps_reached_forces_final_answer() -> None:
    llm = ScriptedLLM(
        reason(),
        calls(("add", {"expression": "1+1"})),
        observe("more to do"),
        reason(),
        calls(("add", {"expression": "2+2"})),
        observe("still more"),
        "Best so far: 4.",
    )
    run = Run(max_steps=2)
    result = await make_loop(llm).run(run.ctx())

    assert run.names() == [
        "AgentStarted",
        *STEP,
        *STEP,
        "MaxStepsReached",
        *["TokenStreamed"] * 5,
    ]
    assert result.reason == "max_steps" and result.steps == 2
    assert result.final_answer == "Best so far: 4."


async def test_empty_final_answer_falls_back_to_a_tool_summary() -> None:
    llm = ScriptedLLM(reason(), calls(("add", {"expression": "1+1"})), observe(), "")
    run = Run(max_steps=1)
    result = await make_loop(llm).run(run.ctx())

    assert result.reason == "max_steps"
    assert result.final_answer == (
        "I could not write a full answer, but here is what 1 step(s) found:\n"
        '- `add` returned: {\n  "expression": "1+1",\n  "result": 2.0\n}'
    )


async def test_malformed_control_is_prose_and_three_in_a_row_end_the_loop() -> None:
    llm = ScriptedLLM(
        "I think {not json",
        Completion(content="No action needed."),
        "Observed something, no block",
        'still no block {"plan": }',
        "Here is the answer anyway: 42.",
    )
    run = Run()
    result = await make_loop(llm).run(run.ctx())

    reasoned = [e for e in run.events if isinstance(e, Reasoned)]
    assert reasoned[0].content == "I think {not json" and reasoned[0].control is None
    assert run.names() == [
        "AgentStarted",
        "TurnStarted",
        "Reasoned",
        "Observed",
        "TurnStarted",
        "Reasoned",
        *["TokenStreamed"] * 7,
    ]
    assert result.reason == "error"
    assert result.final_answer == "Here is the answer anyway: 42."
    assert "no usable control block" in (llm.requests[-1].messages[-1].content or "")


async def test_a_parse_failure_then_success_resets_the_count() -> None:
    llm = ScriptedLLM(
        "no block",
        Completion(content="No action needed."),
        "no block either",
        reason("now fine"),
        Completion(content="No action needed."),
        observe(should_continue=False, final="ok"),
    )
    run = Run()
    result = await make_loop(llm).run(run.ctx())
    assert (
        result.final_answer == "ok"
        and result.reason == "finished"
        and result.steps == 2
    )


async def test_stop_after_step_stops_at_the_next_boundary_after_the_tool() -> None:
    llm = ScriptedLLM(
        reason(), calls(("add", {"expression": "1+1"}), ("add", {"expression": "2+2"}))
    )
    run = Run()
    run.on_event = lambda e: (
        run.control.stop("after_step") if isinstance(e, ToolCompleted) else None
    )
    result = await make_loop(llm).run(run.ctx())

    assert run.names() == [
        "AgentStarted",
        "TurnStarted",
        "Reasoned",
        "ToolStarted:add",
        "ToolCompleted:add",
        "ToolFailed:add:cancelled",
    ]
    assert result == AgentResult(None, "stopped", 1, result.usage, "after_step")
    assert llm.purposes == ["reason", "act"]


async def test_stop_after_step_while_waiting_for_input() -> None:
    llm = ScriptedLLM(reason(), calls(("request_input", {"question": "Which?"})))
    run = Run()
    run.on_event = lambda e: (
        run.control.stop("after_step") if isinstance(e, InputRequested) else None
    )
    result = await make_loop(llm).run(run.ctx())
    assert result.reason == "stopped" and result.stop_mode == "after_step"
    assert run.control.pending_question is None
    assert run.history[-1].role == "tool"


async def test_grant_steps_extends_the_running_budget() -> None:
    llm = ScriptedLLM(
        reason(),
        Completion(content="No action needed."),
        observe("continue"),
        reason(),
        Completion(content="No action needed."),
        observe(should_continue=False, final="done in two"),
    )
    run = Run(max_steps=1, cap=5)
    run.on_event = lambda e: (
        run.control.grant(10, run.emit)
        if isinstance(e, Reasoned) and e.step == 1
        else None
    )
    result = await make_loop(llm).run(run.ctx())

    granted = [e for e in run.events if isinstance(e, StepsGranted)]
    assert granted == [StepsGranted(granted=4, max_steps=5)]
    assert result.final_answer == "done in two" and result.steps == 2


async def test_llm_error_ends_with_agent_failed_and_a_summary() -> None:
    llm = ScriptedLLM(
        reason(),
        calls(("add", {"expression": "1+1"})),
        LLMError("the LLM server answered 500"),
    )
    run = Run()
    result = await make_loop(llm).run(run.ctx())

    assert run.names()[-1] == "AgentFailed"
    failed = run.events[-1]
    assert (
        isinstance(failed, AgentFailed)
        and failed.message == "the LLM server answered 500"
    )
    assert result.reason == "error"
    assert result.final_answer is not None and "`add` returned" in result.final_answer


async def test_cancellation_reports_the_running_tool_and_reraises() -> None:
    slow = SlowTool()
    llm = ScriptedLLM(reason(), calls(("slow", {"label": "x"})))
    run = Run()
    task = asyncio.ensure_future(make_loop(llm, slow).run(run.ctx()))
    await slow.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.cancelled.is_set()
    assert run.names()[-2:] == ["ToolStarted:slow", "ToolFailed:slow:cancelled"]


def approval_loop(
    llm: ScriptedLLM, saver: Saver | None = None, **config: Any
) -> ReasonActObserveLoop:
    registry = approval_registry(saver)
    executor = ToolExecutor(registry, ExecutorConfig(retry_backoff_s=0))
    return ReasonActObserveLoop(
        llm, registry, executor, PromptProvider(), LoopConfig(**config)
    )


async def test_duplicate_call_is_not_run_again_and_repeats_force_the_answer() -> None:
    llm = ScriptedLLM(
        reason(),
        calls(("add", {"expression": "1+1"})),
        observe("two"),
        reason(),
        calls(("add", '{ "expression" : "1+1" }')),
        observe("again"),
        reason(),
        calls(("add", {"expression": "1+1"})),
        "It is 2.",
    )
    run = Run()
    result = await make_loop(llm).run(run.ctx())

    assert run.names().count("ToolStarted:add") == 1
    duplicates = [e for e in run.events if isinstance(e, DuplicateCall)]
    assert duplicates == [DuplicateCall(2, "add"), DuplicateCall(3, "add")]
    tool_messages = [m.content or "" for m in run.history if m.role == "tool"]
    assert tool_messages[1].startswith(
        "Duplicate call: add was already called with the same arguments in step 1, "
        "so it was not run again. Use that result:\n{"
    )
    assert result.final_answer == "It is 2." and result.reason == "finished"
    assert llm.purposes[-1] == "final"


async def test_finalize_tool_summary_becomes_the_answer() -> None:
    llm = ScriptedLLM(
        reason(), calls(("finish", {"summary": "All 3 files converted."}))
    )
    run = Run()
    result = await approval_loop(llm).run(run.ctx())
    assert (
        result.final_answer == "All 3 files converted." and result.reason == "finished"
    )
    assert llm.purposes == ["reason", "act"]


async def test_side_effect_notes_reach_history_as_system_messages() -> None:
    async def note(args: Any, result: Any, ctx: Any) -> str:
        return f"The note '{result['echo']}' is now visible to the whole team."

    async def echo(args: Any, ctx: Any) -> dict[str, str]:
        return {"echo": args.text}

    from tests.test_executor import TextArgs

    registry = ToolRegistry(
        [Tool("share", "Share.", TextArgs, echo, side_effects=(note,))]
    )
    llm = ScriptedLLM(
        reason(),
        calls(("share", {"text": "hi"})),
        observe(should_continue=False, final="ok"),
    )
    run = Run()
    loop = ReasonActObserveLoop(llm, registry, ToolExecutor(registry), PromptProvider())
    await loop.run(run.ctx())
    assert [(m.role, m.content) for m in run.history][-2:] == [
        ("tool", '{\n  "echo": "hi"\n}'),
        ("system", "The note 'hi' is now visible to the whole team."),
    ]
    assert llm.requests[2].messages[-2] == Message.system(
        "The note 'hi' is now visible to the whole team."
    )


def _approve(
    run: Run, approved: bool, reason: str | None = None
) -> Callable[[Event], None]:
    def on_event(event: Event) -> None:
        if isinstance(event, ApprovalRequested):
            run.control.resolve_approval(event.tool_call_id, approved, reason)

    return on_event


async def test_rejection_stops_the_run_with_an_explaining_answer() -> None:
    saver = Saver()
    llm = ScriptedLLM(
        reason(), calls(("save", {"text": "milk"})), "OK, I did not save the note."
    )
    run = Run()
    run.on_event = _approve(run, False, "not now")
    result = await approval_loop(llm, saver).run(run.ctx())

    assert saver.saved == []
    assert (
        result.reason == "rejected"
        and result.final_answer == "OK, I did not save the note."
    )
    why = llm.requests[-1].messages[-1].content or ""
    assert "the user declined to run save (reason: not now)" in why


async def test_rejection_with_on_reject_continue_tells_the_model() -> None:
    llm = ScriptedLLM(
        reason(),
        calls(("save", {"text": "milk"})),
        observe(should_continue=False, final="Not saved, as you wished."),
    )
    run = Run()
    run.on_event = _approve(run, False)
    result = await approval_loop(llm, on_reject="continue").run(run.ctx())

    assert (
        result.reason == "finished"
        and result.final_answer == "Not saved, as you wished."
    )
    assert run.history[-1].content == (
        "Error (rejected): the user declined to run save\n"
        "Do not call it again; continue without it."
    )


async def test_approved_call_runs() -> None:
    saver = Saver()
    llm = ScriptedLLM(
        reason(),
        calls(("save", {"text": "milk"})),
        observe(should_continue=False, final="Saved."),
    )
    run = Run()
    run.on_event = _approve(run, True)
    result = await approval_loop(llm, saver).run(run.ctx())
    assert saver.saved == ["milk"] and result.final_answer == "Saved."
    assert run.names()[3:6] == [
        "ToolStarted:save",
        "ApprovalRequested",
        "ToolCompleted:save",
    ]


async def test_policy_refusals_reach_the_model_verbatim() -> None:
    slow = SlowTool()
    registry = test_registry(slow)
    limiter = RateLimiter(1, 60.0, clock=lambda: 0.0)
    config = ExecutorConfig(default_timeout_s=0.05, retry_backoff_s=0)
    executor = ToolExecutor(registry, config, rate_limiter=limiter)
    llm = ScriptedLLM(
        reason(),
        calls(
            ("slow", {"label": "a"}),
            ("slow", {"label": "b"}),
            ("add", {"expression": "1+2"}),
        ),
        observe(should_continue=False, final="done"),
    )
    run = Run()
    loop = ReasonActObserveLoop(llm, registry, executor, PromptProvider())
    await loop.run(run.ctx())

    observe_call = llm.requests[2]
    tool_messages = [m.content for m in observe_call.messages if m.role == "tool"]
    assert tool_messages == [
        "Error (timeout): timed out after 0.05s",
        "Error (rate_limited): slow was not run: at most 1 changing tool calls per 60s "
        "in a session; try again in 60.0s or continue without it",
        '{\n  "expression": "1+2",\n  "result": 3.0\n}',
    ]
    assert run.names()[3:9] == [
        "ToolStarted:slow",
        "ToolFailed:slow:timeout",
        "ToolStarted:slow",
        "ToolFailed:slow:rate_limited",
        "ToolStarted:add",
        "ToolCompleted:add",
    ]


async def test_read_only_run_hides_and_blocks_mutating_tools() -> None:
    llm = ScriptedLLM(
        reason(),
        calls(("slow", {})),
        observe(should_continue=False, final="Could not."),
    )
    run = Run()
    ctx = run.ctx()
    ctx.read_only = True
    await make_loop(llm).run(ctx)

    assert [t.name for t in llm.requests[1].tools] == ["add", "fail", "request_input"]
    assert run.names()[3:5] == ["ToolStarted:slow", "ToolFailed:slow:blocked"]
    assert llm.requests[2].messages[-2].content == (
        "Error (blocked): slow changes data and this session is read-only; "
        "answer without it or ask the user to turn read-only off"
    )
