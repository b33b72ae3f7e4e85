"""`SqlStore` on SQLite and on a real PostgreSQL: migrations, every table."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, text

from backend.errors import ConfigError
from backend.files.blobs import BlobStore
from backend.files.shelf import FileShelf
from backend.files.tools import file_tools
from backend.llm.base import Message, ToolCall, Usage
from backend.store import migrate, writes
from backend.store.base import Batch, EffectKey, Fenced, LimitReached, SetAside
from backend.store.engine import Database, engine_url
from backend.store.records import (
    BranchRecord,
    ConversationRecord,
    PendingInputRecord,
    RunRecord,
)
from backend.store.schema import ENGINE_ONLY, metadata
from backend.store.share_records import (
    SharedCall,
    SharedMessage,
    ShareRecord,
    Snapshot,
)
from backend.store.sql import SqlStore
from backend.tools.base import Reconciled, ToolContext
from backend.tools.threads import ThreadRunner
from backend.transcript import Frame


def conversation(cid: str, owner: str = "ann", at: float = 100.0) -> ConversationRecord:
    return ConversationRecord(id=cid, owner=owner, created_at=at, updated_at=at)


def run(rid: str, cid: str, status: Any, at: float = 100.0) -> RunRecord:
    return RunRecord(
        id=rid,
        conversation_id=cid,
        strategy="react",
        status=status,
        request="convert 10 miles",
        steps=2,
        usage=Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7, llm_calls=5),
        started_at=at,
        active_ms=1.5,
        state=json.dumps({"run_id": rid}),
    )


def frame(seq: int, text: str = "x" * 10, run_id: str | None = None) -> Frame:
    return Frame(seq, run_id, text)


# ---------------------------------------------------------------- migrations


async def test_open_migrates_to_the_newest_revision_and_again_changes_nothing(
    database_url: str,
) -> None:
    """Opening migrates to head `0013`, and opening the database again is harmless."""
    for _ in range(2):
        store = SqlStore(database_url)
        await store.open()
        assert await store.revision() == migrate.head() == "0013"
        await store.close()


def declared(name: str | None, kind: str, _parents: Any) -> bool:
    """Whether `metadata` declares the object (the search's are one engine's)."""
    return not (name or "").startswith(ENGINE_ONLY)


async def test_the_migrated_schema_is_exactly_the_declared_one(store: SqlStore) -> None:
    """The schema the migrations build does not differ from the declared `metadata`."""

    def differences(connection: sa.Connection) -> list[Any]:
        opts = {"compare_type": True, "include_name": declared}
        context = MigrationContext.configure(connection, opts=opts)
        return list(compare_metadata(context, metadata))

    assert await store.run_sync(differences) == []


async def test_a_database_at_the_first_schema_is_upgraded_in_place(
    database_url: str,
) -> None:
    """A database at revision `0001` upgrades to head, keeping its data."""
    old = SqlStore(database_url)

    def first_schema(connection: sa.Connection) -> None:
        migrate.upgrade(connection, "0001")
        connection.execute(
            sa.text(
                "INSERT INTO conversations (id, owner, title, created_at, "
                "updated_at, settings) VALUES ('c1', 'ann', 'old', 1, 2, '{}')"
            )
        )
        connection.execute(
            sa.text(
                "INSERT INTO messages (conversation_id, position, role, content) "
                "VALUES ('c1', 0, 'user', 'hello from 0001')"
            )
        )

    await old.run_sync(first_schema)
    assert await old.revision() == "0001"
    await old.close()

    upgraded = SqlStore(database_url)
    await upgraded.open()
    try:
        assert await upgraded.revision() == "0013"
        assert await upgraded.messages("c1") == [Message.user("hello from 0001")]
        record = await upgraded.conversation("c1")
        assert record is not None and record.title == "old"
        note = await upgraded.add_note("ann", "kept", 5.0, limit=10)
        assert note.id == 1
    finally:
        await upgraded.close()


def test_urls_get_the_async_driver_and_unknown_databases_are_refused() -> None:
    """SQLite and PostgreSQL URLs get async drivers; others are refused."""
    assert engine_url("sqlite:///data/x.db") == "sqlite+aiosqlite:///data/x.db"
    assert engine_url("postgresql://u:p@h:5/db") == "postgresql+asyncpg://u:p@h:5/db"
    assert engine_url("postgres://h/db") == "postgresql+asyncpg://h/db"
    with pytest.raises(ConfigError, match="unsupported database 'mysql'"):
        engine_url("mysql://h/db")
    with pytest.raises(ConfigError, match="not a database URL"):
        engine_url("not a url")


async def test_the_sqlite_file_and_its_folder_are_created_on_first_use(
    tmp_path: Any,
) -> None:
    """Opening a SQLite store creates the database file and its missing folders."""
    path = tmp_path / "nested" / "deeper" / "lw.db"
    store = SqlStore(f"sqlite:///{path}")
    await store.open()
    await store.close()
    assert path.is_file()


# ---------------------------------------------------------------- conversations


async def test_conversations_page_newest_first_for_their_owner_only(
    store: SqlStore,
) -> None:
    """Conversations list newest first, page by cursor and hide other owners' ones."""
    for i in range(5):
        await store.create_conversation(conversation(f"c{i}", at=100.0 + i))
    await store.create_conversation(conversation("other", owner="bob", at=500.0))

    first = await store.conversations("ann", limit=2)
    assert [c.id for c in first.items] == ["c4", "c3"]
    assert first.next is not None
    second = await store.conversations("ann", limit=2, cursor=first.next)
    assert [c.id for c in second.items] == ["c2", "c1"]
    last = await store.conversations("ann", limit=2, cursor=second.next)
    assert [c.id for c in last.items] == ["c0"] and last.next is None
    with pytest.raises(ValueError, match="invalid cursor"):
        await store.conversations("ann", limit=2, cursor="garbage!")


async def test_rename_and_delete_say_whether_the_conversation_existed(
    store: SqlStore,
) -> None:
    """Rename and delete say if the conversation existed; delete drops its
    data; a rename keeps the conversation's time (its place in the list)."""
    await store.create_conversation(conversation("c1"))
    await store.write(
        Batch("c1", 101.0, messages=[(0, Message.user("hi"))], frames=[frame(1)])
    )
    assert await store.rename_conversation("c1", "Trip")
    renamed = await store.conversation("c1")
    assert renamed is not None and (renamed.title, renamed.updated_at) == (
        "Trip",
        101.0,
    )
    assert not await store.rename_conversation("nope", "x")
    assert await store.delete_conversation("c1")
    assert not await store.delete_conversation("c1")
    assert await store.conversation("c1") is None
    assert await store.messages("c1") == []  # deleted with it
    assert await store.last_seq("c1") == 0


# ---------------------------------------------------------------- batches


async def test_a_title_from_the_first_message_never_replaces_a_chosen_one(
    store: SqlStore,
) -> None:
    """A batch's title applies to an untitled conversation, or one whose
    title the old first message gave (`title_was`); a chosen one stays."""
    await store.create_conversation(conversation("c1"))
    said = [(0, Message.user("hi"))]

    async def titled(title: str, was: str) -> str:
        batch = Batch("c1", 101.0, messages=said, title=title, title_was=was)
        await store.write(batch)
        record = await store.conversation("c1")
        assert record is not None
        return record.title

    assert await titled("hi", "") == "hi"  # untitled: a file came first
    assert await titled("hello", "hi") == "hello"  # the first message edited
    assert await store.rename_conversation("c1", "Greetings")
    assert await titled("hey", "hello") == "Greetings"  # chosen: it stays


async def test_a_batch_creates_the_conversation_and_round_trips_every_message(
    store: SqlStore,
) -> None:
    """A batch with `create` makes the conversation and stores every message intact."""
    call = ToolCall(id="t1", name="calculator", arguments='{"expression": "2+2"}')
    history = [
        Message.user("what is 2+2?"),
        Message.assistant(None, [call]),
        Message.tool("t1", "calculator", "Error: boom", "failed", "boom"),
        Message.assistant("It failed."),
    ]
    await store.write(
        Batch(
            "c1",
            150.0,
            create=conversation("c1"),
            messages=list(enumerate(history)),
            title="what is 2+2?",
        )
    )
    assert await store.messages("c1") == history
    record = await store.conversation("c1")
    assert record is not None
    assert (record.title, record.created_at, record.updated_at) == (
        "what is 2+2?",
        100.0,
        150.0,
    )


async def test_a_reset_replaces_the_stored_history(store: SqlStore) -> None:
    """A batch cutting history at zero replaces all stored messages with its own."""
    await store.create_conversation(conversation("c1"))
    await store.write(
        Batch("c1", 1.0, messages=[(0, Message.user("a")), (1, Message.user("b"))])
    )
    await store.write(
        Batch("c1", 2.0, truncate_history_at=0, messages=[(0, Message.user("c"))])
    )
    assert await store.messages("c1") == [Message.user("c")]


async def test_an_edit_cuts_the_history_and_sets_its_runs_aside_in_one_batch(
    store: SqlStore,
) -> None:
    """An edit batch cuts history and sets its runs aside as a branch, only its own."""
    await store.create_conversation(conversation("c1"))
    await store.create_conversation(conversation("c2"))
    history = [Message.user(text) for text in ("a", "A", "b", "B")]
    await store.write(
        Batch(
            "c1",
            1.0,
            messages=list(enumerate(history)),
            runs=[run("r1", "c1", "finished", 10), run("r2", "c1", "finished", 20)],
        )
    )
    await store.write(Batch("c2", 1.0, runs=[run("x1", "c2", "finished", 10)]))
    late = run("r2", "c1", "finished", 20).model_copy(update={"steps": 9})
    tail = SetAside("b1", 2, history[2:], ["r2", "x1"], 20.0)  # x1: c2's, kept
    await store.write(
        Batch(
            "c1",
            2.0,
            truncate_history_at=2,
            messages=[(2, Message.user("b, edited"))],
            runs=[late, run("r3", "c1", "running", 30)],
            set_aside=[tail],
        )
    )
    assert await store.messages("c1") == [
        Message.user("a"),
        Message.user("A"),
        Message.user("b, edited"),
    ]
    assert [r.id for r in await store.runs("c1")] == ["r1", "r3"]
    assert [r.id for r in await store.runs("c2")] == ["x1"]
    assert await store.branches("c1") == [
        BranchRecord(
            id="b1", parent=None, fork_at=2, messages=history[2:], created_at=20
        )
    ]
    found = await store.branch("c1", "b1")
    assert found is not None and [(r.id, r.steps) for r in found[1]] == [("r2", 9)]
    record = await store.conversation("c1")
    assert record is not None and record.updated_at == 2.0


async def test_frames_come_back_newest_within_a_byte_budget_and_can_be_pruned(
    store: SqlStore,
) -> None:
    """The newest frames that fit the byte budget come back; old ones can be pruned."""
    await store.create_conversation(conversation("c1"))
    await store.write(Batch("c1", 1.0, frames=[frame(s) for s in range(1, 11)]))
    window = await store.frames("c1", max_bytes=35)
    assert [f.seq for f in window] == [8, 9, 10]
    assert await store.last_seq("c1") == 10
    await store.write(Batch("c1", 2.0, frames=[frame(11)], keep_frames_from=9))
    assert [f.seq for f in await store.frames("c1", max_bytes=10_000)] == [9, 10, 11]


async def test_runs_are_upserted_and_live_ones_listed_oldest_first(
    store: SqlStore,
) -> None:
    """Run records upsert keeping their start time; live runs list oldest first."""
    await store.create_conversation(conversation("c1"))
    await store.write(
        Batch(
            "c1",
            1.0,
            runs=[run("r2", "c1", "waiting", at=20), run("r1", "c1", "running", at=10)],
        )
    )
    assert [r.id for r in await store.live_runs()] == ["r1", "r2"]
    done = run("r1", "c1", "finished", at=99).model_copy(
        update={"ended_at": 30.0, "steps": 4, "state": '{"done": true}'}
    )
    await store.write(Batch("c1", 2.0, runs=[done]))
    assert [r.id for r in await store.live_runs()] == ["r2"]
    stored = {r.id: r for r in await store.runs("c1")}
    assert stored["r1"] == done.model_copy(update={"started_at": 10.0})
    assert stored["r2"].usage == Usage(
        prompt_tokens=3, completion_tokens=4, total_tokens=7, llm_calls=5
    )


async def test_a_write_whose_caller_is_cancelled_ends_committed(
    store: SqlStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush whose caller is cancelled inside its transaction still ends
    (committed), and the store takes the next write: a transaction cut in
    the middle would leave its connection holding the database's locks.
    Held open on SQLite in the writer's thread, on PostgreSQL by a lock
    the test holds."""
    await store.create_conversation(conversation("c1"))
    loop = asyncio.get_running_loop()
    inside, gate = asyncio.Event(), threading.Event()
    real = writes.write
    key = 0x7465737

    def held_open(conn: Connection, *args: Any) -> None:
        real(conn, *args)
        loop.call_soon_threadsafe(inside.set)
        if conn.dialect.name == "sqlite":  # the writer's own thread
            assert gate.wait(30)
        else:  # on the event loop: wait on a lock the test holds
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})

    holder = None
    if not database_url.startswith("sqlite"):
        holder = await asyncpg.connect(database_url.replace("+asyncpg", ""))
        await holder.execute("SELECT pg_advisory_lock($1)", key)
    monkeypatch.setattr(writes, "write", held_open)
    flush = asyncio.create_task(
        store.write(Batch("c1", 1.0, messages=[(0, Message.user("kept"))]))
    )
    await inside.wait()
    flush.cancel()
    gate.set()
    if holder is not None:
        await holder.execute("SELECT pg_advisory_unlock($1)", key)
        await holder.close()
    with pytest.raises(asyncio.CancelledError):
        await flush
    monkeypatch.setattr(writes, "write", real)
    await store.write(Batch("c1", 2.0, messages=[(1, Message.user("next"))]))
    assert [m.content for m in await store.messages("c1")] == ["kept", "next"]


async def test_held_inputs_are_kept_loaded_and_used_once(store: SqlStore) -> None:
    """A conversation's held inputs come back with it, in order, until a
    batch uses them; one with held inputs is live, unless they wait with a
    parked run for its user."""
    for cid in ("c1", "c2"):
        await store.create_conversation(conversation(cid))
    later = PendingInputRecord(
        id="i2",
        mode="queue",
        message={"type": "chat", "content": "b"},
        position=2.0,
        created_at=2.0,
    )
    first = later.model_copy(update={"id": "i1", "mode": "steer", "position": 1.0})
    await store.write(Batch("c1", 1.0, inputs=[later, first]))
    await store.write(Batch("c2", 1.0, inputs=[later.model_copy(update={"id": "i3"})]))
    await store.write(Batch("c2", 1.0, runs=[run("r2", "c2", "waiting", at=20)]))
    taken = await store.take("c2", max_frame_bytes=1000)
    assert taken is not None
    await store.release([("c2", taken.epoch)])
    assert await store.live_conversations(parked=False) == ["c1"]
    assert sorted(await store.live_conversations()) == ["c1", "c2"]
    loaded = await store.take("c1", max_frame_bytes=1000)
    assert loaded is not None and [i.id for i in loaded.inputs] == ["i1", "i2"]
    await store.write(Batch("c1", 2.0, epoch=loaded.epoch, delete_inputs=["i1"]))
    again = await store.take("c1", max_frame_bytes=1000)
    assert again is not None and [i.id for i in again.inputs] == ["i2"]


async def test_a_waiting_run_let_go_cleanly_is_parked(store: SqlStore) -> None:
    """A run waiting in a conversation its owner let go cleanly (made room,
    shut down) is left out of what a starting or adopting server takes; one
    whose owner died holding it is not, nor is a working run."""
    for cid in ("c1", "c2"):
        await store.create_conversation(conversation(cid))
    await store.write(Batch("c1", 1.0, runs=[run("r1", "c1", "waiting", at=10)]))
    await store.write(Batch("c2", 1.0, runs=[run("r2", "c2", "suspended", at=20)]))
    for cid in ("c1", "c2"):
        taken = await store.take(cid, max_frame_bytes=1000)
        assert taken is not None
        await store.release([(cid, taken.epoch)])
    assert [r.id for r in await store.live_runs(parked=False)] == ["r2"]
    assert await store.live_conversations(parked=False) == ["c2"]
    assert [r.id for r in await store.live_runs()] == ["r1", "r2"]
    assert [r.id for r in await store.live_runs("c1")] == ["r1"]  # opened: it goes on
    await store.take("c1", max_frame_bytes=1000)  # held again, e.g. then crashed
    assert [r.id for r in await store.live_runs(parked=False)] == ["r1", "r2"]


async def test_a_batch_from_a_stale_owner_writes_nothing(store: SqlStore) -> None:
    """The fence: a take-over raises the epoch, and a batch written at the
    epoch before it is refused whole, messages, frames and runs alike."""
    await store.create_conversation(conversation("c1"))
    await store.write(Batch("c1", 1.0, frames=[frame(1)]))  # epoch 0: ours
    taken = await store.take("c1", max_frame_bytes=1 << 20)
    assert taken is not None and taken.epoch == 1
    assert [f.seq for f in taken.frames] == [1] and taken.last_seq == 1
    with pytest.raises(Fenced) as refused:
        await store.write(
            Batch(
                "c1",
                2.0,
                epoch=0,
                messages=[(0, Message.user("lost?"))],
                frames=[frame(2)],
                runs=[run("r1", "c1", "running")],
            )
        )
    assert refused.value.conversation_ids == ("c1",)
    assert await store.messages("c1") == []
    assert await store.last_seq("c1") == 1
    assert await store.runs("c1") == []
    await store.write(Batch("c1", 3.0, epoch=1, frames=[frame(2)]))  # the owner's
    assert await store.last_seq("c1") == 2


async def test_one_stale_batch_fails_a_write_of_several_and_names_itself(
    store: SqlStore,
) -> None:
    """One fenced batch in `write_all` fails the whole write and is named."""
    for cid in ("c1", "c2"):
        await store.create_conversation(conversation(cid))
    await store.take("c2", max_frame_bytes=1000)
    with pytest.raises(Fenced) as refused:
        await store.write_all(
            [Batch("c1", 1.0, frames=[frame(1)]), Batch("c2", 1.0, frames=[frame(1)])]
        )
    assert refused.value.conversation_ids == ("c2",)
    assert await store.last_seq("c1") == 0  # one transaction: nothing written


async def test_a_batch_applied_twice_ends_as_if_applied_once(store: SqlStore) -> None:
    """What a retry does after a COMMIT whose answer was lost: the same batch
    again, harmless by natural keys."""
    record = conversation("c1")
    batch = Batch(
        "c1",
        1.0,
        epoch=1,
        create=record,
        messages=[(0, Message.user("hi")), (1, Message.assistant("hello"))],
        frames=[frame(1), frame(2)],
        runs=[run("r1", "c1", "finished")],
    )
    await store.write(batch)
    await store.write(batch)
    assert [m.content for m in await store.messages("c1")] == ["hi", "hello"]
    assert [f.seq for f in await store.frames("c1", max_bytes=1000)] == [1, 2]
    assert [r.id for r in await store.runs("c1")] == ["r1"]


async def test_a_clean_release_is_seen_by_the_next_take(store: SqlStore) -> None:
    """A take reports whether the last owner released; a released epoch is fenced."""
    await store.create_conversation(conversation("c1"))
    first = await store.take("c1", max_frame_bytes=1000)
    assert first is not None and first.released  # never owned before
    crashed = await store.take("c1", max_frame_bytes=1000)
    assert crashed is not None and not crashed.released  # epoch 1 never let go
    await store.release([("c1", crashed.epoch)])
    with pytest.raises(Fenced):  # let go: its owner writes nothing more
        await store.write(Batch("c1", 1.0, epoch=crashed.epoch, frames=[frame(1)]))
    again = await store.take("c1", max_frame_bytes=1000)
    assert again is not None and again.released and again.epoch == crashed.epoch + 1
    await store.release([("c1", crashed.epoch)])  # stale: changes nothing
    await store.write(Batch("c1", 2.0, epoch=again.epoch, frames=[frame(1)]))
    assert await store.take("nobody", max_frame_bytes=1000) is None


async def test_a_keyed_note_is_saved_once_and_fenced(store: SqlStore) -> None:
    """A note keyed by its call is saved once, replayed on repeat, fenced if stale."""
    await store.create_conversation(conversation("c1"))
    taken = await store.take("c1", max_frame_bytes=1000)
    assert taken is not None
    key = EffectKey("run1:call1", "c1", taken.epoch, "save_note")
    first = await store.add_note("ann", "buy milk", 1.0, limit=5, effect=key)
    again = await store.add_note("ann", "buy milk", 2.0, limit=5, effect=key)
    assert again == first
    assert [n.text for n in await store.notes("ann")] == ["buy milk"]
    assert await store.effect("run1:call1") == first.model_dump_json()
    assert await store.effect("run1:other") is None

    stale = EffectKey("run1:call2", "c1", taken.epoch - 1, "save_note")
    with pytest.raises(Fenced):
        await store.add_note("ann", "twice?", 3.0, limit=5, effect=stale)
    deleting = EffectKey("run1:call3", "c1", taken.epoch, "delete_note")
    deleted = await store.delete_note("ann", first.id, effect=deleting)
    assert deleted == first
    assert await store.delete_note("ann", first.id, effect=deleting) == first
    assert await store.notes("ann") == []
    assert await store.effect("run1:call2") is None


# ---------------------------------------------------------------- notes


async def test_notes_are_numbered_per_owner_bounded_and_deleted(
    store: SqlStore,
) -> None:
    """Note ids count per owner, the limit refuses more, a note deletes only once."""
    first = await store.add_note("ann", "buy milk", 1.0, limit=2)
    await store.add_note("ann", "call mom", 2.0, limit=2)
    bob = await store.add_note("bob", "his own", 3.0, limit=2)
    assert (first.id, bob.id) == (1, 1)
    with pytest.raises(LimitReached, match="2 notes are saved already"):
        await store.add_note("ann", "one too many", 4.0, limit=2)
    deleted = await store.delete_note("ann", 1)
    assert deleted is not None and deleted.text == "buy milk"
    assert await store.delete_note("ann", 1) is None
    assert [(n.id, n.text) for n in await store.notes("ann")] == [(2, "call mom")]
    assert [n.text for n in await store.notes("bob")] == ["his own"]


async def test_a_tools_file_is_made_once_per_key_and_fenced(
    store: SqlStore, tmp_path: Path
) -> None:
    """`write_file` through the shelf: its file's id comes from the call's
    key, so a second execution finds the first file (nothing new, no second
    `files_update`), `reconcile` finds it too, and a stale owner is refused."""
    await store.create_conversation(conversation("c1"))
    taken = await store.take("c1", max_frame_bytes=1000)
    assert taken is not None
    shelf = FileShelf(
        store, BlobStore(tmp_path), max_bytes=1000, max_files=5, clock=lambda: 5.0
    )
    announced: list[str] = []
    shelf.on_added = lambda record: announced.append(record.id)
    tools = file_tools(shelf, ThreadRunner(1))  # no PDF is read here
    (write_file,) = [t for t in tools if t.name == "write_file"]
    args = write_file.args_model(name="sum.md", content="# Sum")
    ctx = ToolContext("c1", "run1", idempotency_key="run1:call1", epoch=taken.epoch)
    assert write_file.reconcile is not None
    assert await write_file.reconcile(ctx) == Reconciled(took_effect=False)

    first = await write_file(args, ctx)
    again = await write_file(args, ctx)
    assert again == first and announced == [first["file_id"]]
    assert [f.name for f in await store.files("c1")] == ["sum.md"]
    assert await write_file.reconcile(ctx) == Reconciled(took_effect=True, result=first)

    stale = ToolContext("c1", "run1", idempotency_key="run1:call2", epoch=0)
    with pytest.raises(Fenced):
        await write_file(args, stale)
    assert len(await store.files("c1")) == 1


async def test_an_in_memory_database_outlives_a_connection_thrown_away() -> None:
    """A connection invalidated mid-use (a cancelled statement) is replaced,
    and the in-memory database keeps its tables and rows; two databases
    never share one."""
    database, other = Database("sqlite://"), Database("sqlite://")
    try:
        async with database.begin() as conn:
            await conn.execute(sa.text("CREATE TABLE kept (x INTEGER)"))
            await conn.execute(sa.text("INSERT INTO kept VALUES (1)"))
        async with database.connect() as conn:
            await conn.invalidate()
        async with database.connect() as conn:
            rows = (await conn.execute(sa.text("SELECT x FROM kept"))).all()
        assert [tuple(row) for row in rows] == [(1,)]
        async with other.connect() as conn:
            tables = await conn.execute(sa.text("SELECT name FROM sqlite_master"))
            assert tables.all() == []
    finally:
        await database.dispose()
        await other.dispose()


# ---------------------------------------------------------------- share links

SNAPSHOT = Snapshot(
    messages=(
        SharedMessage(role="user", text="what is 2+3? «café»"),
        SharedMessage(
            role="assistant",
            text="2 + 3 = 5",
            tools=(
                SharedCall(name="add", arguments='{"expression": "2+3"}', status="ok"),
            ),
        ),
    ),
    files=("notes.txt",),
)


def link(share_id: str, at: float, conversation_id: str = "c1") -> ShareRecord:
    return ShareRecord(
        id=share_id,
        conversation_id=conversation_id,
        owner="ann",
        title="Sums",
        snapshot=SNAPSHOT,
        created_at=at,
    )


async def test_a_share_is_kept_listed_and_deleted_by_its_owner_only(
    store: SqlStore,
) -> None:
    """The snapshot reads back equal; the list is newest first; bob cannot delete."""
    await store.write(Batch("c1", 1.0, create=conversation("c1")))
    await store.add_share(link("s1", 10.0))
    await store.add_share(link("s2", 20.0))

    assert await store.share("s1") == link("s1", 10.0)
    assert [s.id for s in await store.shares("c1")] == ["s2", "s1"]
    assert await store.delete_share("s1", "bob") is False
    assert await store.delete_share("s1", "ann") is True
    assert await store.share("s1") is None
    assert await store.delete_share("s1", "ann") is False

    assert await store.delete_conversation("c1") is True
    assert await store.share("s2") is None
