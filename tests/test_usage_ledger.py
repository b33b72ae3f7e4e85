"""The usage ledger (`schema.run_usage`): every run's row, saved or not,
written with its record; its sums per day, user and model; the migration
that backfills it. On SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from backend.budget import Spent
from backend.store import migrate
from backend.store.base import Batch, Fenced
from backend.store.records import ConversationRecord, RunRecord
from backend.store.sql import SqlStore
from backend.store.usage_records import RunUsageRecord, SpendingRow, SpendingTotals
from backend.transcript import Usage
from tests.conftest import StartServer
from tests.databases import stored
from tests.fakes import ScriptedLLM

DAY = 86_400.0
D0 = 20_000 * DAY
"""2024-10-04, 00:00 UTC."""
PRICES = json.dumps({"scripted-model": {"input": 1.0, "output": 2.0}})


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[SqlStore]:
    async with stored(database_url) as opened:
        yield opened


def conversation(cid: str, owner: str) -> ConversationRecord:
    return ConversationRecord(id=cid, owner=owner, created_at=1.0, updated_at=1.0)


def used(
    rid: str,
    cid: str,
    owner: str,
    model: str,
    at: float,
    usage: Usage,
    cost: float | None,
    active_ms: float,
) -> RunUsageRecord:
    record = RunRecord(
        id=rid,
        conversation_id=cid,
        strategy="react",
        status="finished",
        request="hi",
        usage=usage,
        model=model,
        cost_usd=cost,
        started_at=at,
        active_ms=active_ms,
        state="{}",
    )
    return RunUsageRecord.of(record, owner)


def tokens(prompt: int, completion: int, **more: int) -> Usage:
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        **more,
    )


R1 = used(
    "r1",
    "c1",
    "ann",
    "m1",
    D0 + 10,
    tokens(100, 20, cached_tokens=40, reasoning_tokens=5, llm_calls=2),
    0.5,
    1500.0,
)
R2 = used(
    "r2", "c1", "ann", "m1", D0 + 20, tokens(10, 2, llm_calls=1, estimated_calls=1),
    None, 500.0,
)  # fmt: skip
R3 = used(
    "r3", "c1", "ann", "m2", D0 + DAY + 5, tokens(7, 3, llm_calls=1), 0.25, 1000.0
)
R4 = used("r4", "c2", "bob", "m1", D0 + 30, tokens(1000, 100, llm_calls=4), 2.0, 2000.0)


async def ledger(store: SqlStore) -> None:
    for cid, owner in (("c1", "ann"), ("c2", "bob")):
        await store.create_conversation(conversation(cid, owner))
    await store.write_all(
        [Batch("c1", 5.0, usage=[R1, R2, R3]), Batch("c2", 5.0, usage=[R4])]
    )


ANN_M1 = SpendingRow(
    day="2024-10-04",
    user="ann",
    model="m1",
    runs=2,
    llm_calls=3,
    estimated_calls=1,
    input_tokens=110,
    output_tokens=22,
    total_tokens=132,
    cached_tokens=40,
    reasoning_tokens=5,
    cost_usd=0.5,
    unpriced_runs=1,
    active_s=2.0,
)
ANN_M2 = SpendingRow(
    day="2024-10-05",
    user="ann",
    model="m2",
    runs=1,
    llm_calls=1,
    input_tokens=7,
    output_tokens=3,
    total_tokens=10,
    cost_usd=0.25,
    active_s=1.0,
)
BOB_M1 = SpendingRow(
    day="2024-10-04",
    user="bob",
    model="m1",
    runs=1,
    llm_calls=4,
    input_tokens=1000,
    output_tokens=100,
    total_tokens=1100,
    cost_usd=2.0,
    active_s=2.0,
)


async def test_the_ledger_is_summed_per_day_user_and_model(store: SqlStore) -> None:
    """Sums per UTC day, user and model, ordered so; [since, until) bounds the runs."""
    await ledger(store)
    assert await store.spending("ann", D0, D0 + 2 * DAY) == [ANN_M1, ANN_M2]
    assert await store.spending(None, D0, D0 + DAY) == [ANN_M1, BOB_M1]
    assert await store.spending(None, D0 + DAY, D0 + 2 * DAY) == [ANN_M2]
    assert await store.spending("ann", D0 + 11, D0 + DAY + 5) == [
        ANN_M1.model_copy(
            update={
                "runs": 1,
                "llm_calls": 1,
                "input_tokens": 10,
                "output_tokens": 2,
                "total_tokens": 12,
                "cached_tokens": 0,
                "reasoning_tokens": 0,
                "cost_usd": None,
                "active_s": 0.5,
            }
        )
    ]
    assert await store.spending("carol", 0, D0 * 2) == []


async def test_what_was_spent_since_a_time_is_tokens_known_costs_and_seconds(
    store: SqlStore,
) -> None:
    """`spent_since` sums the owner's runs started at or after the time; none: zero."""
    await ledger(store)
    assert await store.spent_since("ann", D0) == Spent(
        tokens=142, cost_usd=0.75, time_s=3.0
    )
    assert await store.spent_since("ann", D0 + DAY + 5) == Spent(
        tokens=10, cost_usd=0.25, time_s=1.0
    )
    assert await store.spent_since("ann", D0 + DAY + 6) == Spent()
    assert await store.spent_since("bob", 0) == Spent(
        tokens=1100, cost_usd=2.0, time_s=2.0
    )


async def test_a_conversations_totals_outlive_it_and_rows_upsert_by_run(
    store: SqlStore,
) -> None:
    """A run's row is replaced by its later one (start kept); deleting keeps it."""
    await ledger(store)
    later = R3.model_copy(update={"started_at": D0 + 9 * DAY, "output_tokens": 13})
    await store.write(Batch("c1", 6.0, usage=[later.model_copy()]))
    expected = SpendingTotals(
        runs=3,
        llm_calls=4,
        estimated_calls=1,
        input_tokens=117,
        output_tokens=35,
        total_tokens=142,
        cached_tokens=40,
        reasoning_tokens=5,
        cost_usd=0.75,
        unpriced_runs=1,
        active_s=3.0,
    )
    assert await store.conversation_spending("c1") == expected
    assert [r.day for r in await store.spending("ann", D0, D0 + 2 * DAY)] == [
        "2024-10-04",
        "2024-10-05",
    ]
    assert await store.delete_conversation("c1")
    assert await store.conversation_spending("c1") == expected
    assert await store.conversation_spending("nothing") == SpendingTotals()


async def test_usage_of_a_conversation_never_stored_is_written_alone_unfenced(
    store: SqlStore,
) -> None:
    """An unfenced batch writes usage rows without the conversation; a fenced one fails."""
    row = used("r9", "c9", "ann", "m1", D0, tokens(5, 5, llm_calls=1), None, 0.0)
    with pytest.raises(Fenced):
        await store.write(Batch("c9", 1.0, usage=[row]))
    assert await store.conversation_spending("c9") == SpendingTotals()
    await store.write(Batch("c9", 1.0, usage=[row], unfenced=True))
    assert await store.conversation("c9") is None
    assert (await store.conversation_spending("c9")).total_tokens == 10


async def test_the_migration_backfills_the_ledger_from_stored_runs(
    database_url: str,
) -> None:
    """Upgrading from 0012 counts every stored run: its usage, owner and model."""
    old = SqlStore(database_url)

    def at_0012(connection: sa.Connection) -> None:
        migrate.upgrade(connection, "0012")
        connection.execute(
            sa.text(
                "INSERT INTO conversations (id, owner, title, created_at, "
                "updated_at, settings) VALUES ('c1', 'ann', 't', 1, 2, '{}')"
            )
        )
        usage = json.dumps(
            {
                "prompt_tokens": 30,
                "completion_tokens": 6,
                "total_tokens": 36,
                "llm_calls": 3,
                "cached_tokens": 8,
                "reasoning_tokens": 2,
                "estimated_calls": 1,
            }
        )
        states = {
            "r1": json.dumps({"model": "gpt-a", "request": {"model": "gpt-b"}}),
            "r2": json.dumps({"request": {"model": "gpt-b"}}),
            "r3": "{}",
        }
        for n, (rid, state) in enumerate(states.items()):
            connection.execute(
                sa.text(
                    "INSERT INTO runs (id, conversation_id, strategy, status, "
                    "request, steps, usage, started_at, active_ms, state) VALUES "
                    f"('{rid}', 'c1', 'react', 'finished', 'q', 1, "
                    f"'{usage if n < 2 else '{}'}', {D0 + n * DAY}, 250.0, "
                    f"'{state}')"
                )
            )

    await old.run_sync(at_0012)
    await old.close()
    upgraded = SqlStore(database_url)
    await upgraded.open()
    try:
        rows = await upgraded.spending("ann", 0, D0 + 3 * DAY)
    finally:
        await upgraded.close()
    counted = SpendingRow(
        day="2024-10-04",
        user="ann",
        model="gpt-a",
        runs=1,
        llm_calls=3,
        estimated_calls=1,
        input_tokens=30,
        output_tokens=6,
        total_tokens=36,
        cached_tokens=8,
        reasoning_tokens=2,
        cost_usd=None,
        unpriced_runs=1,
        active_s=0.25,
    )
    assert rows == [
        counted,
        counted.model_copy(update={"day": "2024-10-05", "model": "gpt-b"}),
        SpendingRow(
            day="2024-10-06",
            user="ann",
            model="",
            runs=1,
            unpriced_runs=1,
            active_s=0.25,
        ),
    ]


async def test_every_run_is_counted_with_its_model_and_cost_saved_or_not(
    start_server: StartServer, database_url: str
) -> None:
    """Runs through the service: saved and `save_chat: false` ones are in the ledger."""
    llm = ScriptedLLM("four", "that stays between us", "only this")
    harness = await start_server(llm, database_url=database_url, prices=PRICES)
    client, ready = await harness.ready_client()
    await client.chat("what is 2+2?")
    await client.chat("a secret", save_chat=False)
    other, elsewhere = await harness.ready_client()
    await other.chat("unsaved only", save_chat=False)
    await harness.service.flush_all()

    store = harness.server.app.state.store
    record = await store.conversation(ready["session_id"])
    assert record is not None
    (saved,) = await store.runs(record.id)
    totals = await store.conversation_spending(record.id)
    assert totals.model_copy(update={"cost_usd": 0.0, "active_s": 0.0}) == (
        SpendingTotals(
            runs=2,
            llm_calls=2,
            input_tokens=20,
            output_tokens=5,
            total_tokens=25,
            cost_usd=0.0,
        )
    )
    assert totals.cost_usd == pytest.approx((10 + 1 * 2.0 + 10 + 4 * 2.0) / 1e6)
    assert totals.active_s == pytest.approx(await _active_s(store, record.id))
    assert (saved.request, saved.model, saved.cost_usd) == (
        "what is 2+2?",
        "scripted-model",
        (10 * 1.0 + 1 * 2.0) / 1e6,
    )
    assert await store.conversation(elsewhere["session_id"]) is None
    alone = await store.conversation_spending(elsewhere["session_id"])
    assert (alone.runs, alone.total_tokens, alone.cost_usd) == (
        1,
        12,
        (10 * 1.0 + 2 * 2.0) / 1e6,
    )
    spent = await store.spent_since(record.owner, 0)
    assert spent.tokens == 37
    rows = await store.spending(record.owner, 0, D0 * 2)
    assert {(row.model, row.runs) for row in rows} == {("scripted-model", 3)}


async def _active_s(store: SqlStore, conversation_id: str) -> float:
    """The seconds of work the conversation's ledger rows hold, read raw."""

    def read(connection: sa.Connection) -> float:
        query = sa.text(
            "SELECT SUM(active_ms) FROM run_usage WHERE conversation_id = :cid"
        )
        return float(connection.execute(query, {"cid": conversation_id}).scalar())

    return float(await store.run_sync(read)) / 1000
