"""What each strategy does of its own, driven with a ScriptedLLM:
plan_execute's plan and re-plan, llm_only's questions and plain replies, act's
budget. (The guarantees they share are in test_strategy_contract.py.)"""

from __future__ import annotations

import json
import time
from typing import Any

from backend.agent.strategies.act import ActUntilAnswer
from backend.agent.strategies.llm_only import LLMOnly
from backend.agent.strategies.plan_execute import PlanAndExecute
from backend.llm.base import Completion, Message
from backend.protocol import AgentPlan, AgentReason, AgentRequestInput, TokenStream
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry
from tests.run_harness import QUESTION, Run, make_kit


def plan(*steps: str, final: str = "", prose: str = "My plan.") -> str:
    block = json.dumps({"steps": list(steps), "final_answer": final})
    return f"{prose}\n\n```json\n{block}\n```"


def replan(observation: str = "The plan does not fit.") -> str:
    block = {
        "observation": observation,
        "should_continue": True,
        "final_answer": "",
        "replan": True,
    }
    return f"Rethinking.\n```json\n{json.dumps(block)}\n```"


def plan_execute(llm: ScriptedLLM, **config: Any) -> PlanAndExecute:
    return PlanAndExecute(make_kit(llm, test_registry(), **config))


# ------------------------------------------------------------------ plan_execute


async def test_plan_execute_plans_then_runs_act_and_observe_per_plan_step() -> None:
    """`plan_execute` plans once, then makes an act and an observe call per step."""
    llm = ScriptedLLM(
        plan("Add 1 and 1", "Add 2 and 2", prose="Two sums."),
        calls(("add", {"expression": "1+1"})),
        observe("got 2"),
        calls(("add", {"expression": "2+2"})),
        observe("got 4", should_continue=False, final="2 and 4"),
    )
    run = Run(plan_execute(llm))
    result = await run.go()

    step = ["AgentTurnStart", "ToolStart:add", "ToolComplete:add", "AgentObserve"]
    assert run.names() == ["AgentStart", "AgentPlan", *step, *step]
    (planned,) = run.of(AgentPlan)
    assert planned == AgentPlan(
        step=0, steps=["Add 1 and 1", "Add 2 and 2"], revision=1, content="Two sums."
    )
    assert llm.purposes == ["plan", "act", "observe", "act", "observe"]
    act_prompts = [
        r.messages[-1].content or "" for r in llm.requests if r.purpose == "act"
    ]
    assert "Carry out this plan now: Add 1 and 1" in act_prompts[0]
    assert "Carry out this plan now: Add 2 and 2" in act_prompts[1]
    assert [t.name for t in llm.requests[1].tools] == [
        "add",
        "fail",
        "slow",
        "request_input",
    ]
    assert "- `add`: Add two numbers" in (llm.requests[0].messages[-1].content or "")
    assert (result.answer, result.reason, result.steps) == ("2 and 4", "finished", 2)


async def test_an_observation_can_ask_for_a_new_plan() -> None:
    """An observation asking to replan gets a new plan that sees the old one and why."""
    llm = ScriptedLLM(
        plan("Add 1 and 1", "Add 5 and 5"),
        calls(("add", {"expression": "1+1"})),
        replan("1+1 was enough; no second sum is needed."),
        plan("Answer with 2"),
        Completion(content="No action needed."),
        observe("done", should_continue=False, final="It is 2."),
    )
    run = Run(plan_execute(llm))
    result = await run.go()

    plans = run.of(AgentPlan)
    assert [(p.revision, p.steps, p.step) for p in plans] == [
        (1, ["Add 1 and 1", "Add 5 and 5"], 0),
        (2, ["Answer with 2"], 1),
    ]
    second_plan = llm.requests[3].messages[-1].content or ""
    assert second_plan.startswith("# Planning again (plan 2)")
    assert "1. Add 1 and 1\n2. Add 5 and 5" in second_plan
    assert "- 1+1 was enough; no second sum is needed." in second_plan
    assert (result.answer, result.steps) == ("It is 2.", 2)


async def test_re_plans_are_bounded() -> None:
    """Past `max_replans` a request to re-plan is ignored and the plan goes on."""
    llm = ScriptedLLM(
        plan("Step A", "Step B"),
        Completion(content="No action needed."),
        replan(),
        plan("Step C", "Step D"),
        Completion(content="No action needed."),
        replan(),  # over the limit: the plan goes on instead
        Completion(content="No action needed."),
        observe("done", should_continue=False, final="Finished."),
    )
    run = Run(plan_execute(llm, max_replans=1))
    result = await run.go()
    assert [p.revision for p in run.of(AgentPlan)] == [1, 2]
    assert llm.purposes.count("plan") == 2
    assert "Carry out this plan now: Step D" in (
        llm.requests[6].messages[-1].content or ""
    )
    assert result.answer == "Finished."


async def test_a_finished_plan_has_the_model_write_the_answer() -> None:
    """When every plan step is done without an answer, a final call writes it."""
    llm = ScriptedLLM(
        plan("Add 1 and 1"),
        calls(("add", {"expression": "1+1"})),
        observe("got 2"),
        "The sum is 2.",
    )
    run = Run(plan_execute(llm))
    result = await run.go()
    assert llm.purposes[-1] == "final"
    assert "Every step of the plan is done" in (
        llm.requests[-1].messages[-1].content or ""
    )
    assert (result.answer, result.reason) == ("The sum is 2.", "finished")


async def test_a_plan_can_answer_at_once_and_bad_plans_end_the_run() -> None:
    """A plan with a final answer ends at once; three unusable plans end as `error`."""
    direct = ScriptedLLM(plan(final="Hello!"))
    run = Run(plan_execute(direct))
    result = await run.go()
    assert run.names() == ["AgentStart"] and result.answer == "Hello!"

    broken = ScriptedLLM(
        "no plan", plan(), "still none", "Sorry, I could not plan this."
    )
    run = Run(plan_execute(broken))
    result = await run.go()
    assert broken.purposes == ["plan", "plan", "plan", "final"]
    assert (result.reason, result.answer) == ("error", "Sorry, I could not plan this.")


# ------------------------------------------------------------------ llm_only


def llm_only(llm: ScriptedLLM, **config: Any) -> LLMOnly:
    return LLMOnly(make_kit(llm, test_registry(), **config))


def asking(question: str) -> str:
    block = {
        "plan": "Ask.",
        "tools_to_consider": [],
        "finish": False,
        "final_answer": "",
        "ask_user": question,
    }
    return f"I need to know something.\n\n```json\n{json.dumps(block)}\n```"


async def test_llm_only_asks_through_its_control_block() -> None:
    """`llm_only` asks the user through `ask_user` in its control block, not a tool."""
    llm = ScriptedLLM(
        asking("Which unit?"),
        observe("The user wants km.", should_continue=False, final="16.09 km"),
    )
    run = Run(llm_only(llm), question="convert 10 miles")
    run.answer_with("km")
    result = await run.go()

    assert run.names() == [
        "AgentStart",
        "AgentTurnStart",
        "AgentReason",
        "AgentRequestInput",
        "AgentObserve",
    ]
    (asked,) = run.of(AgentRequestInput)
    assert (asked.question, asked.step) == ("Which unit?", 1)
    assert [(m.role, m.content) for m in run.history] == [
        ("user", "convert 10 miles"),
        ("assistant", "Which unit?"),
        ("user", "km"),
    ]
    reason_call, observe_call = llm.requests
    assert reason_call.tools == () and '"ask_user": ""' in (
        reason_call.messages[-1].content or ""
    )
    assert "request_input" not in (reason_call.messages[-1].content or "")
    observe_prompt = observe_call.messages[-1].content or ""
    assert "## `ask_user` (answered)" in observe_prompt and "km" in observe_prompt
    assert observe_call.messages[-3:-1] == (
        Message.assistant("Which unit?"),
        Message.user("km"),
    )
    assert (result.answer, result.steps) == ("16.09 km", 1)


async def test_llm_only_question_timeout_ends_with_the_models_answer() -> None:
    """An unanswered `llm_only` question times out; a final call writes the answer."""
    llm = ScriptedLLM(asking("Which unit?"), "I could not convert without a unit.")
    run = Run(llm_only(llm, request_input_timeout_s=0.01))
    result = await run.go()
    names = [n for n in run.names() if n != "TokenStream"]
    assert names[-2:] == ["AgentRequestInput", "AgentRequestInputTimeout"]
    assert llm.purposes == ["reason", "final"]
    assert "no answer came within 0.01 seconds" in (
        llm.requests[-1].messages[-1].content or ""
    )
    assert (result.reason, result.answer) == (
        "timeout",
        "I could not convert without a unit.",
    )


async def test_llm_only_without_steps_is_one_streamed_reply() -> None:
    """With no steps `llm_only` makes one tool-less chat call and streams its reply."""
    llm = ScriptedLLM("Hello there.")
    run = Run(llm_only(llm), max_steps=0, agent=False)
    result = await run.go()
    assert run.names() == ["AgentStart", "TokenStream", "TokenStream", "TokenStream"]
    request = llm.requests[0]
    assert request.purpose == "chat" and request.tools == ()
    assert [m.role for m in request.messages] == ["system", "user"]
    assert (result.answer, result.steps) == ("Hello there.", 0)


async def test_an_empty_reply_has_the_model_try_once_more_then_a_summary() -> None:
    """After an empty reply and an empty retry, the answer is the server's fallback."""
    llm = ScriptedLLM("", "")
    run = Run(llm_only(llm), max_steps=0, agent=False)
    result = await run.go()
    assert llm.purposes == ["chat", "final"]
    assert result.answer is not None and result.answer.startswith("I could not produce")


async def test_llm_only_with_steps_reasons_then_observes() -> None:
    """With steps, `llm_only` reasons then observes, and is told it has no tools."""
    llm = ScriptedLLM(
        reason("Think it through.", finish=False),
        observe("Enough.", should_continue=False, final="42"),
    )
    run = Run(llm_only(llm))
    result = await run.go()
    (reasoned,) = run.of(AgentReason)
    assert reasoned.control is not None and reasoned.control.plan == "Think it through."
    assert llm.purposes == ["reason", "observe"]
    assert "This strategy has no tools" in (llm.requests[1].messages[-1].content or "")
    assert result.answer == "42"


# ------------------------------------------------------------------ act


async def test_act_in_tool_mode_has_the_model_answer_once_the_rounds_run_out() -> None:
    """Out of rounds, `act` forbids tools in a final call and ends as `max_steps`."""
    llm = ScriptedLLM(
        calls(("add", {"expression": "1+1"})),
        calls(("add", {"expression": "2+2"})),
        "Both sums are done.",
    )
    strategy = ActUntilAnswer(make_kit(llm, test_registry()))
    run = Run(strategy, max_steps=2, agent=False, selected_tools=["add"])
    result = await run.go()
    assert llm.purposes == ["chat", "chat", "final"]
    assert [t.name for t in llm.requests[0].tools] == ["add"]  # no request_input
    final = llm.requests[-1]
    assert final.tool_choice == "none" and [t.name for t in final.tools] == ["add"]
    assert "The step budget (2) ran out" in (final.messages[-1].content or "")
    assert (result.answer, result.reason) == ("Both sums are done.", "max_steps")


async def test_act_offers_request_input_in_agent_runs() -> None:
    """In agent runs `act` offers `request_input`; the user's answer is its result."""
    llm = ScriptedLLM(calls(("request_input", {"question": "Which?"})), "Done.")
    run = Run(ActUntilAnswer(make_kit(llm, test_registry())), question=QUESTION)
    run.answer_with("that one")
    result = await run.go()
    assert [t.name for t in llm.requests[0].tools][-1] == "request_input"
    asked = llm.requests[0]
    answer = run.history[-1]
    assert (answer.role, answer.name, answer.content, answer.status) == (
        "tool",
        "request_input",
        "that one",
        "ok",
    )
    assert answer.tool_call_id == run.history[-2].tool_calls[0].id
    assert asked.purpose == "chat" and result.answer == "Done."


async def test_a_20_mb_streamed_answer_is_joined_once() -> None:
    """200,000 pieces of 100 characters: kept as pieces and joined once
    (adding each to one string copied it every time: 17 s for 20 MB, and
    the event loop stalled with it)."""
    piece = "x" * 99 + " "
    llm = ScriptedLLM(piece * 200_000)
    run = Run(llm_only(llm), agent=False, max_steps=0)
    started = time.perf_counter()
    result = await run.go()
    took = time.perf_counter() - started
    print(f"a 20 MB answer in 200,000 pieces: {took:.2f} s")
    assert result.answer is not None and len(result.answer) == 20_000_000 - 1
    tokens = run.of(TokenStream)
    assert "".join(t.token for t in tokens) == piece * 200_000
    # no timed assertion: quadratic joining takes hours here, far past the
    # test's timeout, and the figure above is printed for the record
