"""Budgets beyond one strategy's run: prices and their errors, each user's
daily budget (its bound on a run, its refusal with the reset time, over
WebSocket and HTTP, with a user's own line in the tokens file), and a
run's budget across a restart of a real server process.

The per-strategy guarantees (warning, the end at a bound with the model's
answer, `grant_budget`, Continue) are in tests/test_strategy_contract.py.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from backend.budget import Budget, day_end
from backend.errors import ConfigError, InvalidMessage
from backend.llm.prices import Price, PriceTable
from backend.transcript import Usage
from backend.users import Users
from tests.conftest import StartServer, make_settings
from tests.databases import stored
from tests.fakes import test_registry
from tests.protocol_llm import ANSWER, ProtocolLLM, Use
from tests.server_process import server_process
from tests.service_harness import ServiceClient, serving
from tests.ws_client import Client, Frame, label, labels

ADDS = [Use("add", {"expression": f"{n}+{n}"}) for n in range(1, 4)]
"""Three steps of work; `ProtocolLLM` spends 15 tokens a call."""
QUESTION = "3*7 and convert 10 miles"
"""The offline model works out 3*7, then asks which unit."""


def resets() -> set[float]:
    """When today's budgets start over (two readings: the test may cross
    midnight)."""
    return {day_end(time.time()), day_end(time.time() + 60)}


async def agent_run(client: ServiceClient, **fields: object) -> list[Frame]:
    await client.send(type="chat", content="Do it.", agent_mode=True, **fields)
    return await client.run()


def frame(frames: list[Frame], name: str) -> Frame:
    return next(f for f in frames if label(f) == name)


# ------------------------------------------------------------------ prices


def test_a_price_costs_fresh_cached_and_output_tokens_apart() -> None:
    """Cost is fresh input, cached input and output tokens, each at its price
    per million; cached tokens cost as input when no cached price is given."""
    usage = Usage(prompt_tokens=1_000, cached_tokens=400, completion_tokens=200)
    priced = Price(input=2.0, cached_input=0.5, output=8.0)
    assert priced.cost(usage) == pytest.approx((600 * 2 + 400 * 0.5 + 200 * 8) / 1e6)
    plain = Price(input=2.0, output=8.0)
    assert plain.cost(usage) == pytest.approx((1_000 * 2 + 200 * 8) / 1e6)
    table = PriceTable.parse('{"m": {"input": 2, "cached_input": 0.5, "output": 8}}')
    assert table.cost("m", usage) == priced.cost(usage)
    assert table.cost("unpriced", usage) is None  # unknown, never invented
    assert not PriceTable.parse("") and "m" in table


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1]", "must be a JSON object"),
        ("{", "is not JSON"),
        ('{"m": {"input": -1, "output": 1}}', "model 'm': input: Input should be"),
        ('{"m": {"input": 1}}', "model 'm': output: Field required"),
        ('{"m": {"input": 1, "output": 1, "extra": 2}}', "extra: Extra inputs"),
    ],
)
def test_a_bad_price_table_is_refused_naming_the_problem(text: str, says: str) -> None:
    """`LOOPWIRE_PRICES` that is not a table of prices stops the start, saying why."""
    with pytest.raises(ConfigError, match="LOOPWIRE_PRICES") as raised:
        PriceTable.parse(text)
    assert says in str(raised.value)
    with pytest.raises(ValueError, match="LOOPWIRE_PRICES"):
        make_settings(prices=text)


# ------------------------------------------------------------------ the day


async def test_the_daily_budget_bounds_a_run_then_refuses_the_next() -> None:
    """A run is held to what is left of its user's day (scope `day`, no grant
    raises it, the reset time said); once spent, the next chat is refused
    `budget_exhausted` with the time it starts over, and nothing runs."""
    llm = ProtocolLLM(*ADDS)
    async with serving(llm, test_registry(), daily_budget_tokens=40) as client:
        first = await agent_run(client, agent_budget={"tokens": 1_000})
        calls = len(llm.requests)
        await client.send(type="chat", content="More.", agent_mode=True)
        refused = await client.recv()
    assert first[0]["budget"]["tokens"] == 40
    reached = frame(first, "agent_budget_reached")
    assert (reached["scope"], reached["can_grant"], reached["limit"]) == (
        "day",
        False,
        40,
    )
    assert reached["resets_at"] in resets()
    assert completion_reason(first) == "budget" and first[-3]["message"] == ANSWER
    assert (refused["type"], refused["error_type"]) == ("error", "budget_exhausted")
    assert refused["resets_at"] in resets()
    assert refused["message"].startswith(
        "your daily budget (40 tokens) is used up; it starts over at "
    )
    assert len(llm.requests) == calls  # the refused chat called nothing


async def test_a_run_says_plainly_when_no_answer_fit_its_budget() -> None:
    """When the final answer after a bound comes back empty, the answer says
    that none could be written within the budget, then what the tools found."""
    llm = ProtocolLLM(*ADDS, answer="")
    async with serving(llm, test_registry()) as client:
        frames = await agent_run(client, agent_budget={"tokens": 30})
    answer = frame(frames, "chat_response")["message"]
    assert answer.startswith(
        "The run's budget was used up and no answer could be written within it.\n\n"
    )
    assert "add" in answer  # the summary of the tool results follows
    assert completion_reason(frames) == "budget" and llm.purposes[-1] == "final"


async def test_a_grant_cannot_raise_what_the_day_has_left() -> None:
    """`grant_budget` on a run bound by the day's remainder adds nothing."""
    llm = ProtocolLLM(*ADDS, hold="reason")
    async with serving(
        llm, test_registry(), daily_budget_tokens=40, run_budget_tokens=1_000
    ) as client:
        await client.send(type="chat", content="Do it.", agent_mode=True)
        assert llm.hold is not None
        await llm.hold.started.wait()
        await client.send(
            type="agent_control", action="grant_budget", budget={"tokens": 500}
        )
        llm.hold.release.set()
        frames = await client.run()
    granted = frame(frames, "agent_budget_granted")
    assert granted["granted"]["tokens"] == 0 and granted["budget"]["tokens"] == 40
    assert completion_reason(frames) == "budget"


def completion_reason(frames: list[Frame]) -> str:
    reason: str = frame(frames, "agent_completion")["reason"]
    return reason


async def test_grant_budget_is_refused_plainly_when_it_cannot_apply() -> None:
    """A grant that adds nothing, or for a run without a budget, is an
    `invalid_message` naming what is wrong; the run goes on."""
    llm = ProtocolLLM(*ADDS, hold="reason")
    async with serving(llm, test_registry()) as client:
        await client.send(type="chat", content="Do it.", agent_mode=True)
        assert llm.hold is not None
        await llm.hold.started.wait()
        with pytest.raises(InvalidMessage) as empty:
            await client.send(type="agent_control", action="grant_budget", budget={})
        await client.send(
            type="agent_control", action="grant_budget", budget={"tokens": 5}
        )
        unbounded = await client.until_label("error:invalid_message")
        llm.hold.release.set()
        frames = await client.run()
    assert "grant_budget needs 'budget' with a positive tokens" in str(empty.value)
    assert unbounded[-1]["message"] == "this run has no budget to raise"
    assert completion_reason(frames) == "finished"


async def test_over_http_a_spent_day_is_a_429_with_retry_after(
    start_server: StartServer,
) -> None:
    """`POST /api/agent` takes a `budget`; once the day is spent it is refused
    429 `budget_exhausted` with `Retry-After` (the seconds to the reset);
    `POST …/budget` validates its body."""
    harness = await start_server(ProtocolLLM(*ADDS), daily_budget_tokens=40)
    base = harness.server.url("")
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        body = {"query": "Do it.", "stream": False, "budget": {"tokens": 30}}
        first = await http.post("/api/agent", json=body)
        again = await http.post("/api/agent", json={"query": "More.", "stream": False})
        cid = first.json()["conversation_id"]
        bad = await http.post(f"/api/conversations/{cid}/budget", json={"tokens": -1})
        idle = await http.post(f"/api/conversations/{cid}/budget", json={"tokens": 9})
    assert first.status_code == 200, first.text
    assert first.json()["agent_metadata"]["reason"] == "budget"
    assert again.status_code == 429
    assert again.json()["error_type"] == "budget_exhausted"
    wait = int(again.headers["retry-after"])
    assert 0 < wait <= 86_400 and abs(time.time() + wait - max(resets())) < 90
    assert bad.status_code == 400 and bad.json()["error_type"] == "invalid_message"
    assert idle.status_code == 409 and idle.json()["error_type"] == "no_active_run"


def test_a_users_own_daily_budget_comes_from_the_tokens_file(tmp_path: Path) -> None:
    """A tokens file line may end with the user's own daily bounds; a bad
    one stops the start naming the line."""
    tokens = tmp_path / "tokens"
    tokens.write_text(
        "alice: alice-token-0123456789 tokens=5000 cost_usd=1.5\n"
        "bob: bob-token-0123456789 admin time_s=600\n"
        "carol: carol-token-0123456789\n"
    )
    tokens.chmod(0o600)
    users = Users.configured(None, tokens)
    assert users.daily_budgets == {
        "alice": Budget(tokens=5000, cost_usd=1.5),
        "bob": Budget(time_s=600),
    }
    assert users.role("bob") == "admin"
    for line, says in [
        ("dave: dave-token-0123456789 tokens=lots", "tokens='lots' must be a number"),
        ("dave: dave-token-0123456789 coins=3", "'coins' is not a daily budget"),
        ("dave: dave-token-0123456789 tokens=-1", "must be a number, 0 or more"),
    ]:
        tokens.write_text(line + "\n")
        with pytest.raises(ConfigError, match="line 1") as raised:
            Users.configured(None, tokens)
        assert says in str(raised.value)


# ------------------------------------------------------------------ a restart


async def asked_with(client: Client, budget: int | None) -> list[Frame]:
    """A new conversation's agent run, until it asks its question."""
    fields = {} if budget is None else {"agent_budget": {"tokens": budget}}
    await client.send(type="chat", content=QUESTION, agent_mode=True, **fields)
    return await client.until_label("agent_request_input")


async def test_a_runs_budget_and_spending_survive_a_restart(database_url: str) -> None:
    """A run paused on a question at SIGTERM keeps its budget and what it
    spent: after the restart the answer takes it over its bound, so it ends
    there (reason `budget`) with the model's answer; and what the day spent
    is still spent for the next chat."""
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(server_process(database_url))
        measure = await server.client(stack)
        first = (await measure.recv())["session_id"]
        await asked_with(measure, None)  # the offline model is deterministic
        async with stored(database_url) as store:
            (waiting,) = await store.runs(first)
        spent = waiting.usage.total_tokens  # before the question
        client = await server.client(stack)
        session = (await client.recv())["session_id"]
        before = await asked_with(client, spent + 1)
        stop = asyncio.create_task(server.terminate())
        goodbye = await until_closed(client)
        await stop
    assert waiting.status == "waiting" and spent > 0
    assert before[0]["budget"]["tokens"] == spent + 1
    assert labels(goodbye)[-1:] == ["error:server_restarting"]
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            server_process(database_url, daily_budget_tokens=1)
        )
        last = goodbye[-1]["seq"]
        client = await server.client(stack, f"session_id={session}&last_seq={last}")
        await client.recv()  # session_ready
        asked = before[-1]
        await client.send(
            type="agent_user_input", content="km", question_id=asked["question_id"]
        )
        after = await client.run()
        await client.send(type="chat", content="and more", agent_mode=True)
        refused = await client.recv()
    names = labels(after)
    assert "agent_start" not in names  # the same run went on
    reached = frame(after, "agent_budget_reached")
    assert (reached["dimension"], reached["limit"]) == ("tokens", spent + 1)
    assert reached["used"] > spent + 1
    assert names.index("agent_budget_reached") < names.index("chat_response")
    assert completion_reason(after) == "budget"
    assert (refused["type"], refused["error_type"]) == ("error", "budget_exhausted")
    async with stored(database_url) as store:
        (record,) = await store.runs(session)
    assert record.status == "budget" and record.usage.total_tokens > spent + 1


async def until_closed(client: Client) -> list[Frame]:
    frames: list[Frame] = []
    try:
        while True:
            frames.append(await client.recv())
    except ConnectionClosed:
        return frames
