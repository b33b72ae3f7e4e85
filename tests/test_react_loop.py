"""The react strategy, driven directly with a ScriptedLLM: events, calls, results."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backend.agent.run_control import UserAnswer
from backend.agent.strategies.react import ReasonActObserve
from backend.errors import LLMError
from backend.llm.base import Completion, Message
from backend.protocol import (
    AgentDuplicateCall,
    AgentObserve,
    AgentReason,
    AgentRequestInput,
    AgentStepsGranted,
    TokenStream,
    ToolComplete,
    ToolError,
    ToolStart,
)
from backend.tools.base import Tool, ToolEffect, ToolRegistry
from backend.tools.config import ExecutorConfig
from backend.tools.executor import ToolExecutor
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
from tests.run_harness import QUESTION, Run, make_kit


def make_loop(
    llm: ScriptedLLM, slow: SlowTool | None = None, **config: Any
) -> ReasonActObserve:
    return ReasonActObserve(make_kit(llm, test_registry(slow), **config))


STEP = [
    "AgentTurnStart",
    "AgentReason",
    "ToolStart:add",
    "ToolComplete:add",
    "AgentObserve",
]


async def test_finishes_after_one_step_with_the_observed_answer() -> None:
    """One reason-act-observe step ends the run with the observe phase's answer."""
    llm = ScriptedLLM(
        reason("Add the numbers with add.", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe("2+3 is 5.", should_continue=False, final="2 + 3 = **5**"),
    )
    run = Run(make_loop(llm))
    result = await run.go()

    assert run.names() == ["AgentStart", *STEP]
    assert (result.answer, result.reason, result.steps) == (
        "2 + 3 = **5**",
        "finished",
        1,
    )
    assert result.error is None and result.stop_mode is None
    assert result.usage.llm_calls == 3
    assert llm.purposes == ["reason", "act", "observe"]
    reasoned = run.events[2]
    assert isinstance(reasoned, AgentReason)
    assert reasoned.content == "I will work it out."
    assert (
        reasoned.control is not None
        and reasoned.control.plan == "Add the numbers with add."
    )


async def test_plan_reaches_act_and_observe_sees_real_results() -> None:
    """The reason plan is passed to act, and observe sees the actual tool results."""
    llm = ScriptedLLM(
        reason("PLAN-XYZ: add 2 and 3"),
        calls(("add", {"expression": "2+3"})),
        observe(should_continue=False, final="5"),
    )
    run = Run(make_loop(llm))
    await run.go()

    reason_call, act_call, observe_call = llm.requests
    # every call offers act's tools, a prefix a prompt cache keeps; only act
    # lets the model call them
    assert reason_call.tools == act_call.tools and reason_call.tool_choice == "none"
    assert "`add`" in (reason_call.messages[-1].content or "")
    assert "`request_input`" in (reason_call.messages[-1].content or "")
    assert act_call.tool_choice == "auto"
    assert [t.name for t in act_call.tools] == ["add", "fail", "slow", "request_input"]
    assert "PLAN-XYZ: add 2 and 3" in (act_call.messages[-1].content or "")
    observe_prompt = observe_call.messages[-1].content or ""
    assert (observe_call.tools, observe_call.tool_choice) == (act_call.tools, "none")
    assert '"result": 5.0' in observe_prompt
    assert "Agent step 1 of 10: OBSERVE" in observe_prompt
    assert QUESTION in observe_prompt
    # history: user, assistant tool call, tool result (the final answer is the service's)
    assert [m.role for m in run.history] == ["user", "assistant", "tool"]
    assert run.history[2].content == '{\n  "expression": "2+3",\n  "result": 5.0\n}'


async def test_three_steps_then_finish() -> None:
    """Each reason prompt lists earlier steps' observations until observe finishes."""
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
    run = Run(make_loop(llm))
    result = await run.go()

    assert run.names() == ["AgentStart", *STEP, *STEP, *STEP]
    assert [e.step for e in run.events if isinstance(e, AgentObserve)] == [1, 2, 3]
    assert result.answer == "8" and result.steps == 3 and result.reason == "finished"
    third_reason = llm.requests[6].messages[-1].content or ""
    assert "- Step 1: got 2" in third_reason and "- Step 2: got 4" in third_reason


async def test_reason_can_finish_without_acting() -> None:
    """A reason phase that says finish ends the run with no act or observe call."""
    llm = ScriptedLLM(reason("greet", finish=True, final="Hello!"))
    run = Run(make_loop(llm))
    result = await run.go()

    assert run.names() == ["AgentStart", "AgentTurnStart", "AgentReason"]
    assert result.answer == "Hello!" and result.reason == "finished"
    assert llm.purposes == ["reason"]


async def test_no_tool_call_records_no_action() -> None:
    """An act reply with no tool call tells observe no tool ran, quoting the reply."""
    llm = ScriptedLLM(
        reason("nothing to run"),
        Completion(content="No action needed."),
        observe(should_continue=False, final="Done."),
    )
    run = Run(make_loop(llm))
    result = await run.go()

    assert run.names() == [
        "AgentStart",
        "AgentTurnStart",
        "AgentReason",
        "AgentObserve",
    ]
    assert "No tool was called in this step. The act phase said: No action needed." in (
        llm.requests[2].messages[-1].content or ""
    )
    assert result.answer == "Done."


async def test_observe_without_final_answer_forces_a_streamed_final_answer() -> None:
    """When observe stops without a final answer, a `final` LLM call streams one."""
    llm = ScriptedLLM(
        reason(),
        calls(("add", {"expression": "2+3"})),
        observe(should_continue=False),
        "The answer is 5.",
    )
    run = Run(make_loop(llm))
    result = await run.go()

    tokens = [e for e in run.events if isinstance(e, TokenStream)]
    assert [(t.token, t.is_first, t.is_last) for t in tokens] == [
        ("The ", True, False),
        ("answer ", False, False),
        ("is ", False, False),
        ("5.", False, False),
        ("", False, True),
    ]
    assert result.answer == "The answer is 5."
    final_call = llm.requests[-1]
    assert final_call.purpose == "final" and final_call.tool_choice == "none"


async def test_tool_failure_is_fed_back_and_loop_goes_on() -> None:
    """Failed and unknown tool calls go back to the model and the run still finishes."""
    llm = ScriptedLLM(
        reason(),
        calls(
            ("fail", {"reason": "disk on fire"}),
            ("nope", {}),
            ("add", {"expression": "1+1"}),
        ),
        observe(should_continue=False, final="One worked."),
    )
    run = Run(make_loop(llm))
    result = await run.go()

    failures = [e for e in run.events if isinstance(e, ToolError)]
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
    assert result.answer == "One worked." and result.reason == "finished"


async def test_consecutive_failures_end_the_loop_honestly() -> None:
    """Three failed tool calls in a row end the run as an error, with an explanation."""
    llm = ScriptedLLM(
        reason(),
        calls(
            ("fail", {"reason": "disk on fire"}),
            ("nope", {}),
            ("add", '{"expression": 5}'),
        ),
        "Sorry: every tool call failed (the disk is on fire).",
    )
    run = Run(make_loop(llm))
    result = await run.go()

    failures = [e for e in run.events if isinstance(e, ToolError)]
    assert [f.status for f in failures] == ["failed", "failed", "failed"]
    assert (
        failures[2].error
        == "invalid arguments for add: expression: Input should be a valid string"
    )
    assert "AgentObserve" not in run.names()
    assert result.reason == "error"
    assert result.answer == "Sorry: every tool call failed (the disk is on fire)."
    why = llm.requests[-1].messages[-1].content or ""
    assert "3 tool calls in a row failed (last: add: invalid arguments" in why


async def test_request_input_waits_for_the_answer_and_records_it() -> None:
    """A `request_input` call waits for the user's reply and records it as a result."""
    llm = ScriptedLLM(
        reason("ask for the unit"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("user said km"),
        reason("convert", finish=True, final="10 miles is 16.09 km"),
    )
    run = Run(make_loop(llm))
    run.answer_with("km")
    result = await run.go()

    assert run.names() == [
        "AgentStart",
        "AgentTurnStart",
        "AgentReason",
        "AgentRequestInput",
        "AgentObserve",
        "AgentTurnStart",
        "AgentReason",
    ]
    asked = run.events[3]
    assert isinstance(asked, AgentRequestInput)
    assert (asked.question, asked.step, asked.timeout_s) == ("Which unit?", 1, 300.0)
    assert run.history[-1] == Message.tool(asked.question_id, "request_input", "km")
    assert "km" in (llm.requests[2].messages[-1].content or "")
    assert run.state.pending_question is None
    assert result.answer == "10 miles is 16.09 km" and result.steps == 2


async def test_request_input_timeout_ends_with_a_final_answer() -> None:
    """An unanswered `request_input` times out, cancels later calls, still answers."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(
            ("request_input", {"question": "Which unit?"}),
            ("add", {"expression": "1+1"}),
        ),
        "You did not answer, so I could not convert.",
    )
    run = Run(make_loop(llm, request_input_timeout_s=0.05))
    result = await run.go()

    assert run.names()[:5] == [
        "AgentStart",
        "AgentTurnStart",
        "AgentReason",
        "AgentRequestInput",
        "AgentRequestInputTimeout",
    ]
    assert "ToolError:add:cancelled" in run.names()
    assert result.reason == "timeout"
    assert result.answer == "You did not answer, so I could not convert."
    assert "no answer came within 0.05 seconds" in (
        llm.requests[-1].messages[-1].content or ""
    )
    assert [m.content for m in run.history if m.role == "tool"] == [
        "No answer: the user did not reply within 0.05 seconds.",
        "Not run: the run ended before this call.",
    ]
    assert [m.status for m in run.history if m.role == "tool"] == ["timeout", "not_run"]


async def test_max_steps_reached_forces_final_answer() -> None:
    """Running out of steps emits `AgentMaxStepsReached` and streams a final answer."""
    llm = ScriptedLLM(
        reason(),
        calls(("add", {"expression": "1+1"})),
        observe("more to do"),
        reason(),
        calls(("add", {"expression": "2+2"})),
        observe("still more"),
        "Best so far: 4.",
    )
    run = Run(make_loop(llm), max_steps=2)
    result = await run.go()

    assert run.names() == [
        "AgentStart",
        *STEP,
        *STEP,
        "AgentMaxStepsReached",
        *["TokenStream"] * 5,
    ]
    assert result.reason == "max_steps" and result.steps == 2
    assert result.answer == "Best so far: 4."


async def test_empty_final_answer_falls_back_to_a_tool_summary() -> None:
    """An empty forced final answer is replaced by a summary of the tool results."""
    llm = ScriptedLLM(reason(), calls(("add", {"expression": "1+1"})), observe(), "")
    run = Run(make_loop(llm), max_steps=1)
    result = await run.go()

    assert result.reason == "max_steps"
    assert result.answer == (
        "I could not write a full answer, but here is what 1 step(s) found:\n"
        '- `add` returned: {\n  "expression": "1+1",\n  "result": 2.0\n}'
    )


async def test_malformed_control_is_prose_and_three_in_a_row_end_the_loop() -> None:
    """A reply with no valid control block stays prose; three in a row end the run."""
    llm = ScriptedLLM(
        "I think {not json",
        Completion(content="No action needed."),
        "Observed something, no block",
        'still no block {"plan": }',
        "Here is the answer anyway: 42.",
    )
    run = Run(make_loop(llm))
    result = await run.go()

    reasoned = [e for e in run.events if isinstance(e, AgentReason)]
    assert reasoned[0].content == "I think {not json" and reasoned[0].control is None
    assert run.names() == [
        "AgentStart",
        "AgentTurnStart",
        "AgentReason",
        "AgentObserve",
        "AgentTurnStart",
        "AgentReason",
        *["TokenStream"] * 7,
    ]
    assert result.reason == "error"
    assert result.answer == "Here is the answer anyway: 42."
    assert "no usable control block" in (llm.requests[-1].messages[-1].content or "")


async def test_a_parse_failure_then_success_resets_the_count() -> None:
    """A valid control block after malformed ones resets the count; the run finishes."""
    llm = ScriptedLLM(
        "no block",
        Completion(content="No action needed."),
        "no block either",
        reason("now fine"),
        Completion(content="No action needed."),
        observe(should_continue=False, final="ok"),
    )
    run = Run(make_loop(llm))
    result = await run.go()
    assert result.answer == "ok" and result.reason == "finished" and result.steps == 2


async def test_stop_after_step_stops_at_the_next_boundary_after_the_tool() -> None:
    """An `after_step` stop lets the running tool finish and cancels the later
    calls (one call at a time: read-only calls in a batch all run at once)."""
    llm = ScriptedLLM(
        reason(), calls(("add", {"expression": "1+1"}), ("add", {"expression": "2+2"}))
    )
    run = Run(make_loop(llm, parallel_tool_calls=1))
    run.on_event = lambda e: (
        run.control.stop("after_step") if isinstance(e, ToolComplete) else None
    )
    result = await run.go()

    assert run.names() == [
        "AgentStart",
        "AgentTurnStart",
        "AgentReason",
        "ToolStart:add",
        "ToolComplete:add",
        "ToolError:add:cancelled",
    ]
    assert (result.answer, result.reason, result.steps, result.stop_mode) == (
        None,
        "stopped",
        1,
        "after_step",
    )
    assert llm.purposes == ["reason", "act"]


async def test_stop_after_step_while_waiting_for_input() -> None:
    """An `after_step` stop while a question waits keeps the question: its
    answer ends the step, and the run stops then (no observe)."""
    llm = ScriptedLLM(reason(), calls(("request_input", {"question": "Which?"})))
    run = Run(make_loop(llm))

    def on_event(event: object) -> None:
        if isinstance(event, AgentRequestInput):
            run.control.stop("after_step")
            run.control.answer(UserAnswer(event.question_id, "the blue one"))

    run.on_event = on_event
    result = await run.go()
    assert result.reason == "stopped" and result.stop_mode == "after_step"
    assert run.state.pending_question is None
    assert (run.history[-1].role, run.history[-1].content) == ("tool", "the blue one")
    assert llm.purposes == ["reason", "act"]


async def test_grant_steps_extends_the_running_budget() -> None:
    """Steps granted mid-run raise the budget up to the cap, letting the run go on."""
    llm = ScriptedLLM(
        reason(),
        Completion(content="No action needed."),
        observe("continue"),
        reason(),
        Completion(content="No action needed."),
        observe(should_continue=False, final="done in two"),
    )
    run = Run(make_loop(llm), max_steps=1, cap=5)
    run.on_event = lambda e: (
        run.emit(
            AgentStepsGranted(
                granted=run.state.grant(10), max_steps=run.state.max_steps
            )
        )
        if isinstance(e, AgentReason) and e.step == 1
        else None
    )
    result = await run.go()

    granted = [e for e in run.events if isinstance(e, AgentStepsGranted)]
    assert granted == [AgentStepsGranted(granted=4, max_steps=5)]
    assert result.answer == "done in two" and result.steps == 2


async def test_llm_error_ends_the_run_with_the_error_and_a_summary() -> None:
    """An LLM error ends the run as an error, its answer summing up the tool results."""
    llm = ScriptedLLM(
        reason(),
        calls(("add", {"expression": "1+1"})),
        LLMError("the LLM server answered 500"),
    )
    run = Run(make_loop(llm))
    result = await run.go()

    assert run.names()[-1] == "ToolComplete:add"
    assert result.error == "the LLM server answered 500"
    assert result.reason == "error"
    assert result.answer is not None and "`add` returned" in result.answer


async def test_cancellation_suspends_the_run_and_reraises() -> None:
    """Cancelled (a shutdown), not stopped: nothing is closed, the state stays
    as the last phase left it, so a checkpoint of it can be continued."""
    slow = SlowTool()
    llm = ScriptedLLM(reason(), calls(("slow", {"label": "x"})))
    run = Run(make_loop(llm, slow))
    task = asyncio.ensure_future(run.go())
    await slow.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.cancelled.is_set()
    assert run.names()[-1] == "ToolStart:slow"
    assert [c.name for c in run.state.queue] == ["slow"]
    assert run.state.in_flight is not None and run.state.ending is None


def approval_loop(
    llm: ScriptedLLM, saver: Saver | None = None, **config: Any
) -> ReasonActObserve:
    return ReasonActObserve(make_kit(llm, approval_registry(saver), **config))


async def test_duplicate_call_is_not_run_again_and_repeats_force_the_answer() -> None:
    """An identical repeat call is not run; repeating it again forces the answer."""
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
    run = Run(make_loop(llm))
    result = await run.go()

    assert run.names().count("ToolStart:add") == 1
    duplicates = [e for e in run.events if isinstance(e, AgentDuplicateCall)]
    assert duplicates == [
        AgentDuplicateCall(step=2, tool_name="add"),
        AgentDuplicateCall(step=3, tool_name="add"),
    ]
    tool_messages = [m.content or "" for m in run.history if m.role == "tool"]
    assert tool_messages[1].startswith(
        "Duplicate call: add was already called with the same arguments in step 1, "
        "so it was not run again. Use that result:\n{"
    )
    assert result.answer == "It is 2." and result.reason == "finished"
    assert llm.purposes[-1] == "final"


async def test_finalize_tool_summary_becomes_the_answer() -> None:
    """A `finish` call's summary is the answer and ends the run without observe."""
    llm = ScriptedLLM(
        reason(), calls(("finish", {"summary": "All 3 files converted."}))
    )
    run = Run(approval_loop(llm))
    result = await run.go()
    assert result.answer == "All 3 files converted." and result.reason == "finished"
    assert llm.purposes == ["reason", "act"]


async def test_side_effect_notes_reach_history_as_system_messages() -> None:
    """Tool side-effect notes join the history as system messages that observe sees."""

    async def note(args: Any, result: Any, ctx: Any) -> str:
        return f"The note '{result['echo']}' is now visible to the whole team."

    async def echo(args: Any, ctx: Any) -> dict[str, str]:
        return {"echo": args.text}

    from tests.test_executor import TextArgs

    unasked = ToolEffect(requires_approval=False)
    registry = ToolRegistry(
        [Tool("share", "Share.", TextArgs, echo, unasked, side_effects=(note,))]
    )
    llm = ScriptedLLM(
        reason(),
        calls(("share", {"text": "hi"})),
        observe(should_continue=False, final="ok"),
    )
    run = Run(ReasonActObserve(make_kit(llm, registry)))
    await run.go()
    assert [(m.role, m.content) for m in run.history][-2:] == [
        ("tool", '{\n  "echo": "hi"\n}'),
        ("system", "The note 'hi' is now visible to the whole team."),
    ]
    assert llm.requests[2].messages[-2] == Message.system(
        "The note 'hi' is now visible to the whole team."
    )


async def test_rejection_stops_the_run_with_an_explaining_answer() -> None:
    """A declined approval ends the run as rejected, runs nothing and explains why."""
    saver = Saver()
    llm = ScriptedLLM(
        reason(), calls(("save", {"text": "milk"})), "OK, I did not save the note."
    )
    run = Run(approval_loop(llm, saver))
    run.approve_with(False, "not now")
    result = await run.go()

    assert saver.saved == []
    assert (
        result.reason == "rejected" and result.answer == "OK, I did not save the note."
    )
    why = llm.requests[-1].messages[-1].content or ""
    assert "the user declined to run save (reason: not now)" in why


async def test_rejection_with_on_reject_continue_tells_the_model() -> None:
    """If `on_reject` is continue, a declined call is reported and the run goes on."""
    llm = ScriptedLLM(
        reason(),
        calls(("save", {"text": "milk"})),
        observe(should_continue=False, final="Not saved, as you wished."),
    )
    run = Run(approval_loop(llm, on_reject="continue"))
    run.approve_with(False)
    result = await run.go()

    assert result.reason == "finished" and result.answer == "Not saved, as you wished."
    assert run.history[-1].content == (
        "Error (rejected): the user declined to run save\n"
        "Do not call it again; continue without it."
    )


async def test_approved_call_runs() -> None:
    """An approved call asks for approval, then runs the tool and completes."""
    saver = Saver()
    llm = ScriptedLLM(
        reason(),
        calls(("save", {"text": "milk"})),
        observe(should_continue=False, final="Saved."),
    )
    run = Run(approval_loop(llm, saver))
    run.approve_with(True)
    result = await run.go()
    assert saver.saved == ["milk"] and result.answer == "Saved."
    assert run.names()[3:6] == [
        "ToolStart:save",
        "ToolApprovalRequest:save",
        "ToolComplete:save",
    ]


async def test_policy_refusals_reach_the_model_verbatim() -> None:
    """Timeout and rate-limit refusals reach the observe prompt word for word."""
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
    run = Run(ReasonActObserve(make_kit(llm, registry, executor)))
    await run.go()

    observe_call = llm.requests[2]
    tool_messages = [m.content for m in observe_call.messages if m.role == "tool"]
    assert tool_messages == [
        "Error (timeout): timed out after 0.05s",
        "Error (rate_limited): slow was not run: at most 1 changing tool calls per 60s "
        "in a session; try again in 60.0s or continue without it",
        '{\n  "expression": "1+2",\n  "result": 3.0\n}',
    ]
    assert run.names()[3:9] == [
        "ToolStart:slow",
        "ToolError:slow:timeout",
        "ToolStart:slow",
        "ToolError:slow:rate_limited",
        "ToolStart:add",
        "ToolComplete:add",
    ]


async def test_read_only_run_hides_and_blocks_mutating_tools() -> None:
    """A read-only run hides mutating tools from act and blocks a call to one."""
    llm = ScriptedLLM(
        reason(),
        calls(("slow", {})),
        observe(should_continue=False, final="Could not."),
    )
    run = Run(make_loop(llm), read_only=True)
    await run.go()

    assert [t.name for t in llm.requests[1].tools] == ["add", "fail", "request_input"]
    assert run.names()[3:5] == ["ToolStart:slow", "ToolError:slow:blocked"]
    assert llm.requests[2].messages[-2].content == (
        "Error (blocked): slow changes data and this session is read-only; "
        "answer without it or ask the user to turn read-only off"
    )


async def test_tool_calls_past_the_per_step_limit_are_dropped_from_the_reply() -> None:
    """Tool calls beyond the per-step limit are neither run nor kept in history."""
    many = calls(*[("add", {"expression": f"{n}+1"}) for n in range(12)])
    llm = ScriptedLLM(
        reason("Add them all.", tools=["add"]),
        many,
        observe("Done.", should_continue=False, final="Three sums."),
    )
    run = Run(make_loop(llm, max_tool_calls_per_step=3))
    result = await run.go()

    started = [event.arguments for event in run.of(ToolStart)]
    assert started == [{"expression": f"{n}+1"} for n in range(3)]
    (asked,) = [m for m in run.history.messages if m.tool_calls]
    assert [call.id for call in asked.tool_calls] == [
        call.id for call in many.tool_calls[:3]
    ]
    results = [m.tool_call_id for m in run.history.messages if m.role == "tool"]
    assert results == [call.id for call in many.tool_calls[:3]]
    assert result.answer == "Three sums."
