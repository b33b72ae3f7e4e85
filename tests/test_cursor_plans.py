"""A flush on SQLite's cursor (`store/cursor_plans.py`) writes what
SQLAlchemy's own execution writes, value for value and type for type, and
fails as it fails; what a plan cannot run goes to SQLAlchemy."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Connection, Executable
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import IntegrityError, StatementError

from backend.llm.base import Message, ToolCall, Usage
from backend.store.base import Batch, SetAside
from backend.store.cursor_plans import CursorPlans, plan
from backend.store.records import ConversationRecord, PendingInputRecord, RunRecord
from backend.store.schema import metadata
from backend.store.sql import SqlStore
from backend.store.usage_records import RunUsageRecord
from backend.store.writes import Statements
from backend.transcript import Frame


class ThroughSqlAlchemy(CursorPlans):
    """Every statement through `Connection.execute`: the reference."""

    def execute(
        self, conn: Connection, statement: Executable, rows: Sequence[dict[str, Any]]
    ) -> int:
        return int(conn.execute(statement, list(rows)).rowcount or 0)


def run(rid: str, status: Any, at: float, steps: int = 2) -> RunRecord:
    return RunRecord(
        id=rid,
        conversation_id="c1",
        strategy="react",
        status=status,
        request="convert 10 miles",
        steps=steps,
        usage=Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7, llm_calls=5),
        started_at=at,
        active_ms=1.5,
        state=f'{{"run_id": "{rid}"}}',
    )


def usage(rid: str, at: float, cost: float | None) -> RunUsageRecord:
    return RunUsageRecord(
        run_id=rid,
        owner="ann",
        conversation_id="c1",
        model="m",
        started_at=at,
        input_tokens=3,
        output_tokens=4,
        total_tokens=7,
        llm_calls=2,
        cost_usd=cost,
        active_ms=12.25,
    )


def batches() -> list[Batch]:
    """A conversation's life: created, a run with tool calls, its end, an
    edit setting a branch aside, held inputs, a reset."""
    asked = Message.assistant(
        "", tool_calls=[ToolCall(id="t1", name="add", arguments='{"a": 1}')]
    )
    inputs = [
        PendingInputRecord(
            id="i1",
            mode="queue",
            message={"type": "chat", "content": "ünïcode ✓"},
            position=1.5,
            created_at=2.0,
        )
    ]
    created = ConversationRecord(id="c1", owner="ann", created_at=1.0, updated_at=1.0)
    return [
        Batch(
            "c1",
            1.0,
            create=created,
            messages=[(0, Message.user("how far is 10 miles?")), (1, asked)],
            frames=[Frame(s, "r1", f'{{"seq": {s}}}') for s in range(1, 6)],
            runs=[run("r1", "running", 10.0)],
            usage=[usage("r1", 10.0, None)],
            title="how far is 10 miles?",
        ),
        Batch(
            "c1",
            2.0,
            messages=[
                (2, Message.tool("t1", "add", "11")),
                (3, Message.assistant("16 km")),
            ],
            frames=[Frame(6, "r1", '{"seq": 6}'), Frame(7, None, '{"seq": 7}')],
            keep_frames_from=3,
            runs=[run("r1", "finished", 10.0, steps=3)],
            usage=[usage("r1", 10.0, 0.000125)],
            inputs=inputs,
        ),
        Batch(
            "c1",
            3.0,
            truncate_history_at=2,
            messages=[(2, Message.user("and 20?"))],
            runs=[run("r2", "stopped", 30.0)],
            set_aside=[SetAside("b1", 2, [Message.user("x")], ["r1"], 20.0)],
            delete_inputs=["i1"],
            title="and 20?",
            title_was="how far is 10 miles?",
        ),
        Batch("c1", 4.0, restore=["b1"], frames=[Frame(8, "r2", '{"seq": 8}')]),
        Batch("c1", 5.0, truncate_history_at=0, drop_branches=True),
    ]


def table_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, with each value's SQLite type, in a stable order."""
    with sqlite3.connect(path) as db:
        names = [
            str(n)
            for (n,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'search_index%' AND name != 'alembic_version'"
            )
        ]
        dumped = {}
        for name in names:
            columns = [str(c[1]) for c in db.execute(f"PRAGMA table_info({name})")]
            typed = ", ".join(f"{c}, typeof({c})" for c in columns)
            rows = db.execute(f"SELECT {typed} FROM {name}").fetchall()
            dumped[name] = sorted(rows, key=repr)
        return dumped


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SqlStore, SqlStore]]:
    """Two stores on SQLite files: the second one's flushes all through SQLAlchemy."""
    planned = SqlStore(f"sqlite:///{tmp_path / 'planned.db'}")
    reference = SqlStore(f"sqlite:///{tmp_path / 'reference.db'}")
    for store in (planned, reference):
        await store.open()
    reference._statements.plans = ThroughSqlAlchemy()
    try:
        yield planned, reference
    finally:
        for store in (planned, reference):
            await store.close()


async def test_a_flush_on_the_cursor_writes_what_sqlalchemy_writes(
    stores: tuple[SqlStore, SqlStore], tmp_path: Path
) -> None:
    """The same batches through plans and through SQLAlchemy leave the same
    rows, value for value and SQLite type for type, in every table."""
    planned, reference = stores
    for batch in batches():
        await planned.write(batch)
        await reference.write(batch)
    ran = planned._statements.plans.planned
    assert ran == 18  # the 17 kinds of change the batches make, and the fencing touch
    assert table_rows(tmp_path / "planned.db") == table_rows(tmp_path / "reference.db")
    kept = table_rows(tmp_path / "planned.db")
    assert [r[0] for r in kept["frames"]] == ["c1"] * 6  # seqs 3 to 8
    assert kept["messages"] == [] and kept["branches"] == []


async def test_a_stale_writer_is_fenced_on_the_cursor_too(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    """The touch that fences a lone batch counts its row on the cursor: a
    batch at an epoch not the conversation's fails and writes nothing."""
    planned, _reference = stores
    first, *_ = batches()
    await planned.write(first)
    taken = await planned.take("c1", max_frame_bytes=1000)
    assert taken is not None
    stale = Batch("c1", 9.0, epoch=taken.epoch - 1, messages=[(2, Message.user("x"))])
    with pytest.raises(Exception, match="c1") as failed:
        await planned.write(stale)
    assert type(failed.value).__name__ == "Fenced"
    assert len(await planned.messages("c1")) == 2


def test_what_only_sqlalchemy_can_run_gets_no_plan() -> None:
    """RETURNING, an IN list expanded per call, a Python-side default, and
    a required value the rows do not have: no plan."""
    dialect = sqlite.dialect()
    statements = Statements("sqlite")
    assert plan(dialect, statements.fence, ("owned",)) is None
    table = sa.Table(
        "t",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("made", sa.Float, default=lambda: 1.0),
    )
    assert plan(dialect, sa.insert(table), ("id",)) is None
    assert plan(dialect, statements.touch_fenced, ("cid", "held")) is None
    made = plan(dialect, statements.window, ("cid", "below"))
    assert made is not None and made.parameters({"cid": "c", "below": 3}) == ("c", 3)


def test_a_fixed_value_in_the_statement_is_sent_with_each_row() -> None:
    """The touch's empty title (a value of the statement, not of the row)
    takes its place among the row's, processed as SQLAlchemy would."""
    made = plan(
        sqlite.dialect(),
        Statements("sqlite").touch_fenced,
        ("cid", "at", "title", "was", "held"),
    )
    assert made is not None
    row = {"cid": "c1", "at": 2.5, "title": "t", "was": "w", "held": 4}
    assert made.parameters(row) == ("t", "w", "", "t", 2.5, "c1", 4)


def database(tmp_path: Path) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'plain.db'}")
    metadata.create_all(engine, tables=[metadata.tables["frames"]])
    return engine


def test_a_row_short_of_a_key_fails_as_sqlalchemy_says(tmp_path: Path) -> None:
    """A later row without a key the first one has: SQLAlchemy's own error."""
    frames = metadata.tables["frames"]
    full = {"conversation_id": "c", "seq": 1, "run_id": None, "text": "a", "epoch": 0}
    short = {k: v for k, v in full.items() if k != "text"} | {"seq": 2}
    engine = database(tmp_path)
    with engine.begin() as conn, pytest.raises(StatementError) as ours:
        CursorPlans().execute(conn, sa.insert(frames), [full, short])
    with engine.begin() as conn, pytest.raises(StatementError) as theirs:
        conn.execute(sa.insert(frames), [full, short])
    assert str(ours.value) == str(theirs.value)


def test_a_database_error_is_sqlalchemys_and_the_transaction_rolls_back(
    tmp_path: Path,
) -> None:
    """A duplicate key on the cursor: SQLAlchemy's `IntegrityError` over
    sqlite3's, and nothing of the transaction is kept."""
    frames = metadata.tables["frames"]
    row = {"conversation_id": "c", "seq": 1, "run_id": None, "text": "a", "epoch": 0}
    engine = database(tmp_path)
    plans = CursorPlans()
    with pytest.raises(IntegrityError) as failed, engine.begin() as conn:
        plans.execute(conn, sa.insert(frames), [row | {"seq": 2}])
        plans.execute(conn, sa.insert(frames), [row, row])
    assert isinstance(failed.value.orig, sqlite3.IntegrityError)
    with engine.connect() as conn:
        assert (
            conn.execute(sa.select(sa.func.count()).select_from(frames)).scalar() == 0
        )
