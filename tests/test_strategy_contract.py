"""The guarantees every strategy keeps, asserted once for each registered one.

Each test runs a `chat` in agent mode with `loop_strategy` set, through a real
`ChatService`, and reads the frames a client gets. The model is
`ProtocolLLM`, which speaks the loop's protocol by purpose, so a strategy
registered in `default_strategies` gets all of these tests without writing
a script for it — and so does the example strategy of docs/architecture.md,
loaded from the document. Tool-based guarantees apply to strategies that use
tools.
"""

from __future__ import annotations

from typing import Any

import pytest

from backend.agent.kit import LoopKit
from backend.agent.loop import AgentLoop
from backend.agent.registry import StrategyRegistry
from backend.aio import race
from backend.app import default_strategies
from backend.llm.base import Purpose
from backend.tools.base import ToolRegistry
from tests.docs_strategy import example_strategy
from tests.fakes import Saver, SlowTool, approval_registry, test_registry
from tests.protocol_llm import ANSWER, Ask, ProtocolLLM, Use
from tests.run_harness import make_kit
from tests.service_harness import ServiceClient, serving
from tests.ws_client import Frame, label, labels

QUESTION = "Please do the work."
ENDING = ["chat_response", "agent_completion", "response_complete"]
STOPPED = ["agent_stopped", "agent_completion", "response_complete"]


def contract_strategies(kit: LoopKit) -> StrategyRegistry:
    """Every shipped strategy, and the one docs/architecture.md teaches."""
    return StrategyRegistry([*default_strategies(kit), example_strategy()(kit)])


REGISTERED: dict[str, AgentLoop] = {
    strategy.name: strategy
    for strategy in contract_strategies(make_kit(ProtocolLLM(), test_registry()))
    if strategy.loop  # `retrieve` is a mode, tested in tests/test_retrieval.py
}


@pytest.fixture(params=list(REGISTERED))
def strategy(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def needs_tools(strategy: str) -> None:
    if not REGISTERED[strategy].uses_tools:
        pytest.skip(f"{strategy} uses no tools")


def two_actions(strategy: str) -> list[Use | Ask]:
    """Two steps' work in any strategy: tool calls, or questions without tools."""
    if REGISTERED[strategy].uses_tools:
        return [Use("add", {"expression": "1+1"}), Use("add", {"expression": "2+2"})]
    return [Ask("First?"), Ask("Second?")]


async def agent_chat(client: ServiceClient, strategy: str, **fields: Any) -> None:
    await client.send(
        type="chat", content=QUESTION, agent_mode=True, loop_strategy=strategy, **fields
    )


async def answering(client: ServiceClient, answer: str = "yes") -> list[Frame]:
    """The run's frames, answering every question it asks."""
    frames: list[Frame] = []
    while not frames or label(frames[-1]) != "response_complete":
        frames.append(await client.recv())
        if label(frames[-1]) == "agent_request_input":
            await client.send(type="agent_user_input", content=answer)
    return frames


def completion(frames: list[Frame]) -> Frame:
    return next(f for f in frames if label(f) == "agent_completion")


async def test_a_run_is_announced_worked_and_closed_in_order(strategy: str) -> None:
    """A run opens with `agent_start`, numbers its frames and ends with the answer."""
    actions = (
        [Use("add", {"expression": "2+3"})] if REGISTERED[strategy].uses_tools else []
    )
    llm = ProtocolLLM(*actions)
    async with serving(llm, test_registry(), strategies=contract_strategies) as client:
        await agent_chat(client, strategy, agent_max_steps=4)
        frames = await client.run()
        history = client.session.history.messages

    start = frames[0]
    assert (label(start), start["strategy"], start["max_steps"]) == (
        "agent_start",
        strategy,
        4,
    )
    assert labels(frames)[-3:] == ENDING
    assert frames[-3]["message"] == ANSWER
    done = completion(frames)
    assert (done["reason"], done["strategy"]) == ("finished", strategy)
    assert done["usage"]["llm_calls"] == len(llm.requests) and done["steps"] >= 1
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert {f["run_id"] for f in frames} == {start["run_id"]}
    if actions:
        names = labels(frames)
        assert names.index("agent_turn_start") < names.index("tool_start:add")
        assert names.index("tool_start:add") + 1 == names.index("tool_complete:add")
        assert [(m.role, m.status) for m in history if m.role == "tool"] == [
            ("tool", "ok")
        ]
    assert (history[0].role, history[0].content) == ("user", QUESTION)
    assert (history[-1].role, history[-1].content) == ("assistant", ANSWER)


async def baseline_purposes(strategy: str) -> list[Purpose]:
    """The purposes of a run that works, runs out of budget and writes the answer."""
    llm = ProtocolLLM(*two_actions(strategy))
    async with serving(llm, test_registry(), strategies=contract_strategies) as client:
        await agent_chat(client, strategy, agent_max_steps=1)
        await answering(client)
    seen: list[Purpose] = []
    for purpose in llm.purposes:
        if purpose not in seen:
            seen.append(purpose)  # type: ignore[arg-type]
    assert seen[-1] == "final"
    return seen


async def test_stop_cuts_the_llm_call_in_every_phase(strategy: str) -> None:
    """A stop cancels the model call in whichever phase is running, and chat resumes."""
    for purpose in await baseline_purposes(strategy):
        llm = ProtocolLLM(*two_actions(strategy), hold=purpose)
        async with serving(
            llm, test_registry(), strategies=contract_strategies
        ) as client:
            await agent_chat(client, strategy, agent_max_steps=1)
            hold = llm.hold
            assert hold is not None
            frames: list[Frame] = []
            while (won := await race(client.recv(), hold.started.wait())) is not None:
                if won[0] == 1:
                    break  # the call to stop in is under way
                frames.append(won[1])
                if label(frames[-1]) == "agent_request_input":
                    await client.send(type="agent_user_input", content="yes")
            await client.send(type="agent_control", action="stop")
            frames += await client.run()
            assert hold.cancelled.is_set(), purpose
            tail = [n for n in labels(frames) if n != "token_stream"][-3:]
            assert tail == STOPPED, (purpose, labels(frames))
            stopped = next(f for f in frames if label(f) == "agent_stopped")
            assert stopped["mode"] == "immediate"
            assert completion(frames)["reason"] == "stopped"
            # the session is usable again at once
            again = await client.chat("hello")
            assert labels(again)[-2:] == ["chat_response", "response_complete"]


async def test_stop_cuts_a_running_tool(strategy: str) -> None:
    """A stop cancels a running tool, which ends as cancelled before the run stops."""
    needs_tools(strategy)
    slow = SlowTool()
    llm = ProtocolLLM(Use("slow", {"label": "x"}))
    async with serving(
        llm, test_registry(slow), strategies=contract_strategies
    ) as client:
        await agent_chat(client, strategy)
        frames = await client.until_label("tool_start:slow")
        await slow.started.wait()
        await client.send(type="agent_control", action="stop")
        frames += await client.run()
    assert slow.cancelled.is_set()
    assert labels(frames)[-4:] == ["tool_error:slow:cancelled", *STOPPED]


async def test_stop_after_step_ends_at_the_next_phase_boundary(strategy: str) -> None:
    """`stop_after_step` lets the phase in flight finish and starts no other."""
    first = (await baseline_purposes(strategy))[0]
    llm = ProtocolLLM(*two_actions(strategy), hold=first)
    async with serving(llm, test_registry(), strategies=contract_strategies) as client:
        await agent_chat(client, strategy)
        assert llm.hold is not None
        await llm.hold.started.wait()
        await client.send(type="agent_control", action="stop_after_step")
        llm.hold.release.set()
        frames = await client.run()
    assert len(llm.requests) == 1  # the phase in flight finished; no other began
    assert labels(frames)[-3:] == STOPPED
    stopped = next(f for f in frames if label(f) == "agent_stopped")
    assert stopped["mode"] == "after_step"
    assert not any(label(f) == "tool_start:add" for f in frames)


async def test_grant_steps_extends_the_running_budget(strategy: str) -> None:
    """Granted steps raise a one-step budget to the cap so the run finishes."""
    first = (await baseline_purposes(strategy))[0]
    llm = ProtocolLLM(*two_actions(strategy), hold=first)
    async with serving(
        llm, test_registry(), agent_max_steps_cap=6, strategies=contract_strategies
    ) as client:
        await agent_chat(client, strategy, agent_max_steps=1)
        assert llm.hold is not None
        await llm.hold.started.wait()
        await client.send(type="agent_control", action="grant_steps", steps=10)
        llm.hold.release.set()
        frames = await answering(client)
    granted = next(f for f in frames if label(f) == "agent_steps_granted")
    assert (granted["granted"], granted["max_steps"]) == (5, 6)
    done = completion(frames)
    assert done["reason"] == "finished" and done["steps"] >= 2
    assert "agent_max_steps_reached" not in labels(frames)


async def test_a_question_pauses_the_run_until_answered(strategy: str) -> None:
    """A question holds the run until the answer arrives, then lands in history."""
    llm = ProtocolLLM(Ask("Which unit?"))
    async with serving(llm, test_registry(), strategies=contract_strategies) as client:
        await agent_chat(client, strategy)
        frames = await client.until_label("agent_request_input")
        asked = frames[-1]
        assert asked["question"] == "Which unit?" and asked["step"] == 1
        calls_while_paused = len(llm.requests)
        assert client.session.run is not None
        assert client.session.run.state.pending_question is not None
        await client.send(
            type="agent_user_input",
            content="kilometres",
            question_id=asked["question_id"],
        )
        frames += await client.run()
        history = client.session.history.messages
    assert len(llm.requests) > calls_while_paused
    assert labels(frames).count("agent_request_input") == 1
    assert labels(frames)[-3:] == ENDING and completion(frames)["reason"] == "finished"
    answered = [m for m in history if m.content == "kilometres"]
    assert len(answered) == 1 and answered[0].role in ("tool", "user")
    asked_at = next(i for i, m in enumerate(history) if "Which unit?" in str(m))
    assert history.index(answered[0]) > asked_at


@pytest.mark.parametrize("approved", [True, False])
async def test_approval_decides_whether_the_tool_runs(
    strategy: str, approved: bool
) -> None:
    """An approved tool runs; a rejected one never runs and the run ends rejected."""
    needs_tools(strategy)
    saver = Saver()
    llm = ProtocolLLM(Use("save", {"text": "milk"}))
    async with serving(
        llm, approval_registry(saver), strategies=contract_strategies
    ) as client:
        await agent_chat(client, strategy)
        frames = await client.until_label("tool_approval_request:save")
        request = frames[-1]
        await client.send(
            type="tool_approval_response",
            tool_call_id=request["tool_call_id"],
            approved=approved,
        )
        frames += await client.run()
    names = labels(frames)
    assert names.index("tool_start:save") < names.index("tool_approval_request:save")
    if approved:
        assert saver.saved == ["milk"] and "tool_complete:save" in names
        assert completion(frames)["reason"] == "finished"
    else:
        assert saver.saved == [] and "tool_error:save:rejected" in names
        assert completion(frames)["reason"] == "rejected"
        assert llm.purposes[-1] == "final"  # the model explains what was not done
    assert names[-3:] == ENDING


async def test_an_exhausted_budget_still_ends_with_the_models_answer(
    strategy: str,
) -> None:
    """A spent step budget ends with a tools-off final answer from the model."""
    llm = ProtocolLLM(*two_actions(strategy))
    async with serving(llm, test_registry(), strategies=contract_strategies) as client:
        await agent_chat(client, strategy, agent_max_steps=1)
        frames = await answering(client)
        history = client.session.history.messages
    names = labels(frames)
    assert "agent_max_steps_reached" in names
    assert names.index("agent_max_steps_reached") < names.index("chat_response")
    assert llm.purposes[-1] == "final" and llm.requests[-1].tool_choice in (
        None,
        "none",
    )
    assert (
        frames[-3]["message"] == ANSWER and completion(frames)["reason"] == "max_steps"
    )
    assert history[-1].content == ANSWER


def test_the_shipped_strategies_react_first() -> None:
    """The shipped strategies are listed in a fixed order with `react` first."""
    names = default_strategies(make_kit(ProtocolLLM(), ToolRegistry())).names
    assert names == ("react", "act", "plan_execute", "llm_only", "retrieve")


# ------------------------------------------------------------------ budgets

PRICED = '{"protocol-model": {"input": 100000, "output": 200000}}'
"""$0.10 per input token, $0.20 per output token: each of `ProtocolLLM`'s
calls (10 in, 5 out) costs $2."""
BOUNDS = {"tokens": ({"tokens": 36}, 15), "cost": ({"cost_usd": 5}, 2.0)}
"""A bound met on the third call, warned about after the second, and what
one call spends against it."""


@pytest.mark.parametrize("dimension", ["tokens", "cost"])
async def test_a_spent_budget_ends_the_run_with_the_models_answer(
    strategy: str, dimension: str
) -> None:
    """At 80 % of a token or cost bound the run warns; at the bound it ends
    (reason `budget`) before its next model call, and the model writes the
    final answer within the reserved allowance."""
    bound, per_call = BOUNDS[dimension]
    llm = ProtocolLLM(*two_actions(strategy), Ask("Third?"))
    async with serving(
        llm,
        test_registry(),
        strategies=contract_strategies,
        prices=PRICED,
        budget_final_tokens=300,
    ) as client:
        await agent_chat(client, strategy, agent_budget=bound)
        frames = await answering(client)
        history = client.session.history.messages
    names = labels(frames)
    start = frames[0]
    limit = next(iter(bound.values()))
    assert start["budget"] == {"tokens": None, "cost_usd": None, "time_s": None} | bound
    warned = next(f for f in frames if label(f) == "agent_budget_warning")
    reached = next(f for f in frames if label(f) == "agent_budget_reached")
    assert names.index("agent_budget_warning") < names.index("agent_budget_reached")
    calls = len(llm.requests) - 1  # the final answer's is past the bound
    assert (warned["dimension"], warned["used"], warned["limit"]) == (
        dimension,
        2 * per_call,
        limit,
    )
    assert (reached["dimension"], reached["used"], reached["limit"]) == (
        dimension,
        calls * per_call,
        limit,
    )
    assert calls * per_call >= limit > (calls - 1) * per_call
    assert (reached["scope"], reached["can_grant"], reached["resets_at"]) == (
        "run",
        True,
        None,
    )
    assert llm.purposes[-1] == "final" and llm.requests[-1].max_tokens == 300
    assert [r.max_tokens for r in llm.requests[:-1]] == [None] * calls
    done = completion(frames)
    assert done["reason"] == "budget" and frames[-3]["message"] == ANSWER
    assert done["usage"]["total_tokens"] == 15 * len(llm.requests)
    assert done["usage"]["cost_usd"] == 2.0 * len(llm.requests)
    assert names[-3:] == ENDING and history[-1].content == ANSWER


async def test_a_spent_time_budget_ends_the_run_with_the_models_answer(
    strategy: str,
) -> None:
    """A time bound is checked at every phase boundary: a run whose first
    phase used it up ends there (reason `budget`), with the model's answer."""
    llm = ProtocolLLM(*two_actions(strategy))
    async with serving(llm, test_registry(), strategies=contract_strategies) as client:
        await agent_chat(client, strategy, agent_budget={"time_s": 1e-6})
        frames = await answering(client)
    reached = next(f for f in frames if label(f) == "agent_budget_reached")
    assert (reached["dimension"], reached["limit"]) == ("time", 1e-6)
    assert reached["used"] >= 1e-6
    assert len(llm.requests) <= 2 and llm.purposes[-1] == "final"
    assert completion(frames)["reason"] == "budget"
    assert frames[-3]["message"] == ANSWER


async def test_grant_budget_raises_the_running_budget_to_the_cap(
    strategy: str,
) -> None:
    """`grant_budget` raises a run's bound up to the server's cap, so the run
    it would have ended finishes."""
    first = (await baseline_purposes(strategy))[0]
    llm = ProtocolLLM(*two_actions(strategy), hold=first)
    async with serving(
        llm,
        test_registry(),
        strategies=contract_strategies,
        run_budget_tokens=10_000,
    ) as client:
        await agent_chat(client, strategy, agent_budget={"tokens": 20})
        assert llm.hold is not None
        await llm.hold.started.wait()
        await client.send(
            type="agent_control", action="grant_budget", budget={"tokens": 50_000}
        )
        llm.hold.release.set()
        frames = await answering(client)
    granted = next(f for f in frames if label(f) == "agent_budget_granted")
    assert granted["granted"]["tokens"] == 9_980
    assert granted["budget"]["tokens"] == 10_000
    assert "agent_budget_reached" not in labels(frames)
    assert completion(frames)["reason"] == "finished"


async def test_continue_with_more_budget_goes_on_from_where_the_run_ended(
    strategy: str,
) -> None:
    """A run ended by its budget is continued by the next chat with a larger
    budget: it picks up from what the first did, never doing it again."""
    tools = REGISTERED[strategy].uses_tools
    llm = ProtocolLLM(
        *[
            Use("add", {"expression": f"{n}+{n}"}) if tools else Ask(f"{n}?")
            for n in range(1, 5)
        ]
    )
    async with serving(
        llm, test_registry(), strategies=contract_strategies, run_budget_tokens=500
    ) as client:
        await agent_chat(client, strategy, agent_budget={"tokens": 30})
        first = await answering(client)
        done_before = len(llm.requests)
        await client.send(
            type="chat",
            content="Continue",
            agent_mode=True,
            loop_strategy=strategy,
            agent_budget={"tokens": 400},
        )
        second = await answering(client)
    reached = next(f for f in first if label(f) == "agent_budget_reached")
    assert reached["can_grant"] is True
    assert completion(first)["reason"] == "budget"
    assert completion(second)["reason"] == "finished"
    assert second[0]["budget"]["tokens"] == 400
    if REGISTERED[strategy].uses_tools:  # each action once, across the two runs
        done = [
            [f["arguments"]["expression"] for f in run if label(f) == "tool_start:add"]
            for run in (first, second)
        ]
        assert done[0] and done[1] and not set(done[0]) & set(done[1])
    assert len(llm.requests) > done_before
