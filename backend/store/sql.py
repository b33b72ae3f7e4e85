"""`SqlStore`: the `Store` on SQLAlchemy's asyncio engine.

SQLite (through aiosqlite) is the embedded default: a file created on first
use, in WAL mode so readers never wait for the writer. PostgreSQL (through
asyncpg) is chosen by URL. `open()` applies the migrations.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Collection, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import (
    CursorResult,
    Row,
    and_,
    bindparam,
    delete,
    event,
    func,
    insert,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.elements import ColumnElement

from backend.bounded_json import load_json
from backend.errors import ConfigError, InvalidMessage
from backend.llm.base import Message, ToolCall, ToolResultMeta
from backend.notifications import Frame
from backend.store import migrate, sql_identity
from backend.store.base import (
    LIVE_STATUSES,
    Batch,
    ConversationRecord,
    EffectKey,
    Fenced,
    FileRecord,
    LimitReached,
    Loaded,
    NoteRecord,
    Page,
    QuotaExceeded,
    RunRecord,
    SignInRecord,
    StoreError,
    UsageRecord,
    files_full,
    shown_bytes,
)
from backend.store.schema import (
    conversations,
    files,
    frames,
    messages,
    notes,
    runs,
    tool_effects,
)

DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
ALIASES = {"postgres": "postgresql"}


def engine_url(url: str) -> str:
    """`url` with loopwire's async driver for its database (see DRIVERS)."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(
            f"LOOPWIRE_DATABASE_URL is not a database URL: {exc}"
        ) from exc
    backend = ALIASES.get(parsed.get_backend_name(), parsed.get_backend_name())
    driver = DRIVERS.get(backend)
    if driver is None:
        known = ", ".join(f"{name}://" for name in DRIVERS)
        raise ConfigError(
            f"LOOPWIRE_DATABASE_URL: unsupported database {backend!r} (use {known})"
        )
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


IDLE_TRANSACTION_MS = 15_000
"""PostgreSQL ends a transaction of ours left idle this long: loopwire never
pauses inside one, so only a frozen process (a long GC pause, SIGSTOP) does,
and its locks (a fence on a conversation's row) must not hold a take-over
up for longer."""

SQLITE_CONNECTIONS = 4
"""Connections to a SQLite file: one writer at a time, a few readers."""


def _run_row(run: RunRecord) -> dict[str, Any]:
    values = run.model_dump()
    values["usage"] = run.usage.model_dump()
    return values


def _in_memory(url: str) -> bool:
    database = make_url(url).database
    return database in (None, "", ":memory:")


def create_engine(url: str) -> AsyncEngine:
    """An engine for `url`; SQLite files (and their folder) are created here."""
    full = engine_url(url)
    if not full.startswith("sqlite"):
        settings = {"idle_in_transaction_session_timeout": str(IDLE_TRANSACTION_MS)}
        return create_async_engine(
            full, pool_pre_ping=True, connect_args={"server_settings": settings}
        )
    if _in_memory(full):
        engine = create_async_engine(
            full, poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
    else:
        database = make_url(full).database
        assert database is not None
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        # Every use ends its transaction, so the pool's reset on return (one
        # more trip to the database thread each time) buys nothing. Writes
        # take turns anyway; a few connections (each a thread and its own
        # page cache) serve the reads, and no more are opened under load.
        engine = create_async_engine(
            full,
            connect_args={"timeout": 30},
            pool_reset_on_return=None,
            pool_size=SQLITE_CONNECTIONS,
            max_overflow=0,
        )
    event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


class _Writes:
    """The statements a flush runs, built once (each is executed with a
    list of rows: one round trip for any number of conversations).

    Every insert is idempotent by its natural key (a conversation's id, a
    message's position, a frame's seq, a run's id), so a batch applied twice
    (its first COMMIT was lost on the way back) ends as if applied once."""

    def __init__(self, dialect_name: str) -> None:
        dialect = postgresql if dialect_name == "postgresql" else sqlite
        c, f, m, r = conversations.c, frames.c, messages.c, runs.c
        self.create = dialect.insert(conversations).on_conflict_do_nothing(
            index_elements=["id"]
        )
        self.fence = (
            update(conversations)
            .where(tuple_(c.id, c.epoch).in_(bindparam("owned", expanding=True)))
            .values(epoch=c.epoch)
            .returning(c.id)
        )
        """Lock the rows of the conversations still at the writers' epochs
        (and say which): a take-over's raise of the epoch waits for this
        transaction, or this finds the epoch moved."""
        self.held = select(c.epoch).where(c.id == bindparam("cid")).with_for_update()
        self.take = (
            update(conversations)
            .where(c.id == bindparam("cid"))
            .values(epoch=func.abs(c.epoch) + 1)
            .returning(*conversations.c)
        )
        self.release = (
            update(conversations)
            .where(c.id == bindparam("cid"), c.epoch == bindparam("held"))
            .values(epoch=-c.epoch)
        )
        """A clean let-go: the epoch's sign says the owner stored all it sent
        (a take-over then needs no gap in the seqs); its writes are fenced
        off from then on like any stale owner's."""
        self.frames = dialect.insert(frames).on_conflict_do_nothing(
            index_elements=["conversation_id", "seq"]
        )
        message_upsert = dialect.insert(messages)
        self.messages = message_upsert.on_conflict_do_update(
            index_elements=["conversation_id", "position"],
            set_={
                column.name: message_upsert.excluded[column.name]
                for column in messages.c
                if column.name not in ("conversation_id", "position")
            },
        )
        self.touch = (
            update(conversations)
            .where(c.id == bindparam("cid"))
            .values(
                updated_at=bindparam("at"),
                title=func.coalesce(bindparam("title"), c.title),
            )
        )
        owned = and_(c.id == bindparam("cid"), c.epoch == bindparam("held"))
        self.touch_fenced = self.touch.where(c.epoch == bindparam("held"))
        """A flush of one conversation: the touch is its fence too."""
        self.fence_one = update(conversations).where(owned).values(epoch=c.epoch)
        self.window = delete(frames).where(
            f.conversation_id == bindparam("cid"), f.seq < bindparam("below")
        )
        self.truncate = delete(messages).where(
            m.conversation_id == bindparam("cid"), m.position >= bindparam("at")
        )
        self.delete_run = delete(runs).where(
            r.conversation_id == bindparam("cid"), r.id == bindparam("rid")
        )
        upsert = dialect.insert(runs)
        kept = ("id", "started_at")
        self.save_run = upsert.on_conflict_do_update(
            index_elements=["id"],
            set_={
                column.name: upsert.excluded[column.name]
                for column in runs.c
                if column.name not in kept
            },
        )


MIGRATION_LOCK = 0x6C6F6F70  # "loop"
"""The PostgreSQL advisory lock held while the schema is migrated."""

QUOTA_LOCK = text("SELECT pg_advisory_xact_lock(1903521652, hashtext(:owner))")
"""The PostgreSQL advisory lock (`quot`, the owner's hash) an insert under
a quota holds until its transaction ends (the two-key space: no clash with
`MIGRATION_LOCK`; two owners that share a hash merely take turns)."""


class SqlStore:
    def __init__(self, url: str) -> None:
        self.url = url
        self._engine = create_engine(url)
        self._dialect = self._engine.dialect.name
        sqlite_db = self._dialect == "sqlite"
        self._one_connection = sqlite_db and _in_memory(engine_url(url))
        self._statements = _Writes(self._dialect)
        self._write_lock = asyncio.Lock() if sqlite_db else None
        """SQLite has one writer at a time: writers queue here instead of in
        its busy handler. An in-memory database is one shared connection, so
        reads queue too."""

    @contextlib.asynccontextmanager
    async def _begin(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a transaction (committed on success)."""
        async with contextlib.AsyncExitStack() as stack:
            if self._write_lock is not None:
                await stack.enter_async_context(self._write_lock)
            yield await stack.enter_async_context(self._engine.begin())

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[AsyncConnection]:
        async with contextlib.AsyncExitStack() as stack:
            if self._one_connection and self._write_lock is not None:
                await stack.enter_async_context(self._write_lock)
            yield await stack.enter_async_context(self._engine.connect())

    async def open(self) -> None:
        """Bring the schema up to date. On PostgreSQL, instances starting
        together take turns (a transaction-scoped advisory lock): the first
        migrates, the others find nothing left to do."""
        try:
            async with self._begin() as conn:
                if self._dialect == "postgresql":
                    await conn.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"),
                        {"key": MIGRATION_LOCK},
                    )
                await conn.run_sync(migrate.upgrade)
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot open the database: {exc}") from exc

    async def close(self) -> None:
        await self._engine.dispose()

    async def revision(self) -> str | None:
        async with self._connect() as conn:
            return await conn.run_sync(migrate.current)

    # ------------------------------------------------------------ conversations

    async def create_conversation(self, record: ConversationRecord) -> None:
        async with self._begin() as conn:
            await conn.execute(insert(conversations).values(**record.model_dump()))

    async def take(
        self, conversation_id: str, *, max_frame_bytes: int
    ) -> Loaded | None:
        try:
            async with self._begin() as conn:
                held = await conn.execute(
                    self._statements.held, {"cid": conversation_id}
                )
                before = held.scalar()
                taken = await conn.execute(
                    self._statements.take, {"cid": conversation_id}
                )
                row = taken.first()
                if row is None or before is None:
                    return None
                return Loaded(
                    record=_conversation(row),
                    epoch=int(row.epoch),
                    released=int(before) <= 0,
                    messages=await self._messages(conn, conversation_id),
                    frames=await self._frames(conn, conversation_id, max_frame_bytes),
                    last_seq=await self._last_seq(conn, conversation_id),
                    files=await self._files(conn, conversation_id),
                )
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(
                f"cannot load conversation {conversation_id}: {exc}"
            ) from exc

    async def conversation(self, conversation_id: str) -> ConversationRecord | None:
        query = select(conversations).where(conversations.c.id == conversation_id)
        async with self._connect() as conn:
            row = (await conn.execute(query)).first()
        return _conversation(row) if row is not None else None

    async def conversations(
        self, owner: str, *, limit: int, cursor: str | None = None
    ) -> Page:
        c = conversations.c
        query = select(conversations).where(c.owner == owner)
        if cursor is not None:
            updated_at, last_id = _decode_cursor(cursor)
            query = query.where(
                or_(
                    c.updated_at < updated_at,
                    and_(c.updated_at == updated_at, c.id < last_id),
                )
            )
        query = query.order_by(c.updated_at.desc(), c.id.desc()).limit(limit + 1)
        async with self._connect() as conn:
            rows = (await conn.execute(query)).all()
        items = [_conversation(row) for row in rows[:limit]]
        more = len(rows) > limit and items
        return Page(items=items, next=_encode_cursor(items[-1]) if more else None)

    async def rename_conversation(
        self, conversation_id: str, title: str, updated_at: float
    ) -> bool:
        query = (
            update(conversations)
            .where(conversations.c.id == conversation_id)
            .values(title=title, updated_at=updated_at)
        )
        async with self._begin() as conn:
            return _count(await conn.execute(query)) > 0

    async def delete_conversation(self, conversation_id: str) -> bool:
        query = delete(conversations).where(conversations.c.id == conversation_id)
        async with self._begin() as conn:
            return _count(await conn.execute(query)) > 0

    # ------------------------------------------------------------ contents

    async def messages(self, conversation_id: str) -> list[Message]:
        async with self._connect() as conn:
            return await self._messages(conn, conversation_id)

    async def _messages(
        self, conn: AsyncConnection, conversation_id: str
    ) -> list[Message]:
        query = (
            select(messages)
            .where(messages.c.conversation_id == conversation_id)
            .order_by(messages.c.position)
        )
        rows = (await conn.execute(query)).all()
        return [_message(row) for row in rows]

    async def runs(self, conversation_id: str) -> list[RunRecord]:
        query = (
            select(runs)
            .where(runs.c.conversation_id == conversation_id)
            .order_by(runs.c.started_at, runs.c.id)
        )
        async with self._connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_run(row) for row in rows]

    async def live_runs(
        self, conversation_id: str | None = None, *, parked: bool = True
    ) -> list[RunRecord]:
        query = select(runs).where(_live(parked))
        if conversation_id is not None:
            query = query.where(runs.c.conversation_id == conversation_id)
        query = query.order_by(runs.c.started_at, runs.c.id)
        async with self._connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_run(row) for row in rows]

    async def live_conversations(self, *, parked: bool = True) -> list[str]:
        query = select(runs.c.conversation_id).where(_live(parked)).distinct()
        async with self._connect() as conn:
            return [str(row[0]) for row in (await conn.execute(query)).all()]

    async def frames(self, conversation_id: str, *, max_bytes: int) -> list[Frame]:
        async with self._connect() as conn:
            return await self._frames(conn, conversation_id, max_bytes)

    async def _frames(
        self, conn: AsyncConnection, conversation_id: str, max_bytes: int
    ) -> list[Frame]:
        f = frames.c
        query = (
            select(f.seq, f.run_id, f.text)
            .where(f.conversation_id == conversation_id)
            .order_by(f.seq.desc())
        )
        kept: list[Frame] = []
        total = 0
        result = await conn.stream(query)
        async for seq, run_id, body in result:
            total += len(body.encode())
            if total > max_bytes:
                break
            kept.append(Frame(seq, run_id, body))
        await result.close()
        kept.reverse()
        return kept

    async def last_seq(self, conversation_id: str) -> int:
        async with self._connect() as conn:
            return await self._last_seq(conn, conversation_id)

    async def _last_seq(self, conn: AsyncConnection, conversation_id: str) -> int:
        query = select(func.max(frames.c.seq)).where(
            frames.c.conversation_id == conversation_id
        )
        value = (await conn.execute(query)).scalar()
        return int(value or 0)

    # ------------------------------------------------------------ writes

    async def write(self, batch: Batch) -> None:
        await self.write_all([batch])

    async def write_all(self, batches: Sequence[Batch]) -> None:
        if not batches:
            return
        try:
            async with self._begin() as conn:
                await self._write(conn, batches)
        except (SQLAlchemyError, OSError) as exc:
            names = ", ".join(b.conversation_id for b in batches[:3])
            more = f" and {len(batches) - 3} more" if len(batches) > 3 else ""
            raise StoreError(f"cannot save conversation {names}{more}: {exc}") from exc

    async def _write(self, conn: AsyncConnection, batches: Sequence[Batch]) -> None:
        """Each kind of change as one statement for all the batches (one
        round trip each, however many conversations the batches touch),
        after the fence: a batch whose epoch is not its conversation's any
        more fails the whole transaction (`Fenced`), before anything is
        written."""
        created = [
            {**b.create.model_dump(), "epoch": b.epoch}
            for b in batches
            if b.create is not None
        ]
        if created:
            await conn.execute(self._statements.create, created)
        if len(batches) > 1:
            touched = [_touch(b) for b in batches if _touches(b)]
            if touched:
                await conn.execute(self._statements.touch, touched)
        cuts = [
            {"cid": b.conversation_id, "at": b.truncate_history_at}
            for b in batches
            if b.truncate_history_at is not None
        ]
        if cuts:
            await conn.execute(self._statements.truncate, cuts)
        message_rows = [
            _message_row(b.conversation_id, pos, m)
            for b in batches
            for pos, m in b.messages
        ]
        if message_rows:
            await conn.execute(self._statements.messages, message_rows)
        frame_rows = [
            {
                "conversation_id": b.conversation_id,
                "seq": f.seq,
                "run_id": f.run_id,
                "text": f.text,
                "epoch": b.epoch,
            }
            for b in batches
            for f in b.frames
        ]
        if frame_rows:
            await conn.execute(self._statements.frames, frame_rows)
        windows = [
            {"cid": b.conversation_id, "below": b.keep_frames_from}
            for b in batches
            if b.keep_frames_from is not None
        ]
        if windows:
            await conn.execute(self._statements.window, windows)
        run_rows = [
            {**_run_row(run), "epoch": b.epoch} for b in batches for run in b.runs
        ]
        if run_rows:
            await conn.execute(self._statements.save_run, run_rows)
        removed = [
            {"cid": b.conversation_id, "rid": run_id}
            for b in batches
            for run_id in b.delete_runs
        ]
        if removed:
            await conn.execute(self._statements.delete_run, removed)
        if len(batches) == 1 and _touches(batches[0]):
            batch = batches[0]
            touch = {**_touch(batch), "held": batch.epoch}
            fenced = await conn.execute(self._statements.touch_fenced, touch)
            if _count(fenced) != 1:
                raise Fenced([batch.conversation_id])
            return
        await self._fence(conn, [(b.conversation_id, b.epoch) for b in batches])

    async def _fence(self, conn: AsyncConnection, owned: list[tuple[str, int]]) -> None:
        """The last statement before COMMIT: lock the conversations' rows if
        their epochs are still the writer's (a take-over's raise then waits
        for this COMMIT), else `Fenced` (the transaction rolls back). Last,
        so the lock is held for no more than the COMMIT."""
        if len(owned) == 1:
            ((cid, epoch),) = owned
            one = await conn.execute(
                self._statements.fence_one, {"cid": cid, "held": epoch}
            )
            if _count(one) != 1:
                raise Fenced([cid])
            return
        fence = await conn.execute(self._statements.fence, {"owned": owned})
        current = {str(row[0]) for row in fence}
        stale = [cid for cid, _epoch in owned if cid not in current]
        if stale:
            raise Fenced(stale)

    async def _effect_done(self, conn: AsyncConnection, key: str) -> str | None:
        query = select(tool_effects.c.result).where(tool_effects.c.key == key)
        value = (await conn.execute(query)).scalar()
        return None if value is None else str(value)

    async def _record_effect(
        self, conn: AsyncConnection, effect: EffectKey, result: str, at: float
    ) -> None:
        await conn.execute(
            insert(tool_effects).values(
                key=effect.key,
                conversation_id=effect.conversation_id,
                tool_name=effect.tool_name,
                result=result,
                created_at=at,
            )
        )

    async def release(self, held: Sequence[tuple[str, int]]) -> None:
        if not held:
            return
        rows = [{"cid": cid, "held": epoch} for cid, epoch in held]
        try:
            async with self._begin() as conn:
                await conn.execute(self._statements.release, rows)
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(
                f"cannot release {len(rows)} conversations: {exc}"
            ) from exc

    async def effect(self, key: str) -> str | None:
        try:
            async with self._connect() as conn:
                return await self._effect_done(conn, key)
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot read tool effect {key!r}: {exc}") from exc

    # ------------------------------------------------------------ files

    async def add_file(
        self,
        record: FileRecord,
        *,
        limit: int,
        quota: int | None = None,
        effect: EffectKey | None = None,
    ) -> FileRecord:
        try:
            async with self._begin() as conn:
                if effect is not None:
                    done = await self._file(conn, record.conversation_id, record.id)
                    if done is not None:  # made before under this key
                        return done
                await self._add_file(conn, record, limit, quota)
                if effect is not None:
                    made = record.model_dump_json()
                    await self._record_effect(conn, effect, made, record.created_at)
                    await self._fence(conn, [(effect.conversation_id, effect.epoch)])
                return record
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot keep file {record.name!r}: {exc}") from exc

    async def _add_file(
        self, conn: AsyncConnection, record: FileRecord, limit: int, quota: int | None
    ) -> None:
        f, c = files.c, conversations.c
        owner = (
            await conn.execute(select(c.owner).where(c.id == record.conversation_id))
        ).scalar()
        if owner is None:
            raise StoreError(f"no conversation {record.conversation_id!r}")
        if quota is not None and self._dialect == "postgresql":
            # every quota-checked insert of this owner's takes turns, on any
            # instance (SQLite writes one at a time anyway): the sum below,
            # read after the lock, counts the files the one before inserted
            await conn.execute(QUOTA_LOCK, {"owner": owner})
        # the conversation's row is locked (PostgreSQL), so two uploads
        # cannot both take its last place
        await conn.execute(
            select(c.id).where(c.id == record.conversation_id).with_for_update()
        )
        count = (
            await conn.execute(
                select(func.count()).where(f.conversation_id == record.conversation_id)
            )
        ).scalar_one()
        if count >= limit:
            raise files_full(limit)
        if quota is not None:
            used = await self._file_bytes(conn, owner)
            if used + record.size > quota:
                shown = f"{record.name!r} ({shown_bytes(record.size)})"
                raise QuotaExceeded(shown, used, quota)
        await conn.execute(insert(files).values(**record.model_dump()))

    async def file_bytes(self, owner: str) -> int:
        try:
            async with self._connect() as conn:
                return await self._file_bytes(conn, owner)
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot count the files of {owner!r}: {exc}") from exc

    async def _file_bytes(self, conn: AsyncConnection, owner: str) -> int:
        query = (
            select(func.coalesce(func.sum(files.c.size), 0))
            .select_from(files.join(conversations))
            .where(conversations.c.owner == owner)
        )
        return int((await conn.execute(query)).scalar_one())

    async def referenced_blobs(self, digests: Collection[str]) -> set[str]:
        """One pass over the files' digests (streamed, not held: the
        collector asks about nearly every blob on disk, which an `IN` list
        per chunk would answer with as many scans of the table)."""
        wanted = set(digests)
        found: set[str] = set()
        if not wanted:
            return found
        try:
            async with self._connect() as conn:
                result = await conn.stream(select(files.c.sha256).distinct())
                async for (sha256,) in result:
                    if sha256 in wanted:
                        found.add(sha256)
                await result.close()
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot list the files' contents: {exc}") from exc
        return found

    async def files(self, conversation_id: str) -> list[FileRecord]:
        async with self._connect() as conn:
            return await self._files(conn, conversation_id)

    async def _files(
        self, conn: AsyncConnection, conversation_id: str
    ) -> list[FileRecord]:
        query = (
            select(files)
            .where(files.c.conversation_id == conversation_id)
            .order_by(files.c.created_at, files.c.id)
        )
        rows = (await conn.execute(query)).mappings().all()
        return [FileRecord.model_validate(dict(row)) for row in rows]

    async def file(self, conversation_id: str, file_id: str) -> FileRecord | None:
        async with self._connect() as conn:
            return await self._file(conn, conversation_id, file_id)

    async def _file(
        self, conn: AsyncConnection, conversation_id: str, file_id: str
    ) -> FileRecord | None:
        f = files.c
        query = select(files).where(
            and_(f.conversation_id == conversation_id, f.id == file_id)
        )
        row = (await conn.execute(query)).mappings().first()
        return None if row is None else FileRecord.model_validate(dict(row))

    # ------------------------------------------------------------ notes

    async def add_note(
        self,
        owner: str,
        text: str,
        saved_at: float,
        *,
        limit: int,
        effect: EffectKey | None = None,
    ) -> NoteRecord:
        for _attempt in range(3):  # two writers may pick the same number or key
            try:
                async with self._begin() as conn:
                    if effect is not None:
                        done = await self._effect_done(conn, effect.key)
                        if done is not None:  # applied before: its result
                            return NoteRecord.model_validate_json(done)
                    note = await self._add_note(conn, owner, text, saved_at, limit)
                    if effect is not None:
                        await self._record_effect(
                            conn, effect, note.model_dump_json(), saved_at
                        )
                        await self._fence(
                            conn, [(effect.conversation_id, effect.epoch)]
                        )
                    return note
            except IntegrityError:
                continue
            except (SQLAlchemyError, OSError) as exc:
                raise StoreError(f"cannot save the note: {exc}") from exc
        raise StoreError("could not number the note; try again")

    async def _add_note(
        self, conn: AsyncConnection, owner: str, text: str, saved_at: float, limit: int
    ) -> NoteRecord:
        n = notes.c
        count, top = (
            await conn.execute(
                select(func.count(), func.max(n.number)).where(n.owner == owner)
            )
        ).one()
        if count >= limit:
            raise LimitReached(f"{limit} notes are saved already; delete some first")
        number = int(top or 0) + 1
        await conn.execute(
            insert(notes).values(
                owner=owner, number=number, text=text, saved_at=saved_at
            )
        )
        return NoteRecord(id=number, text=text, saved_at=saved_at)

    async def notes(self, owner: str) -> list[NoteRecord]:
        n = notes.c
        query = (
            select(n.number, n.text, n.saved_at)
            .where(n.owner == owner)
            .order_by(n.number)
        )
        async with self._connect() as conn:
            rows = (await conn.execute(query)).all()
        return [NoteRecord(id=r.number, text=r.text, saved_at=r.saved_at) for r in rows]

    async def delete_note(
        self, owner: str, note_id: int, *, effect: EffectKey | None = None
    ) -> NoteRecord | None:
        n = notes.c
        where = and_(n.owner == owner, n.number == note_id)
        try:
            async with self._begin() as conn:
                if effect is not None:
                    done = await self._effect_done(conn, effect.key)
                    if done is not None:  # applied before: its result
                        return NoteRecord.model_validate_json(done)
                row = (
                    await conn.execute(
                        select(n.number, n.text, n.saved_at).where(where)
                    )
                ).first()
                if row is None:
                    return None
                await conn.execute(delete(notes).where(where))
                note = NoteRecord(id=row.number, text=row.text, saved_at=row.saved_at)
                if effect is not None:
                    await self._record_effect(
                        conn, effect, note.model_dump_json(), note.saved_at
                    )
                    await self._fence(conn, [(effect.conversation_id, effect.epoch)])
                return note
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot delete the note: {exc}") from exc

    # ------------------------------------------------------------ sign-ins

    async def add_signin(self, record: SignInRecord, *, forget_before: float) -> None:
        async with self._failing("cannot keep the sign-in"), self._begin() as conn:
            await sql_identity.add_signin(conn, record, forget_before)

    async def signin(self, signin_id: str) -> SignInRecord | None:
        async with self._failing("cannot read a sign-in"), self._connect() as conn:
            return await sql_identity.signin(conn, signin_id)

    async def live_signins(
        self, now: float, *, user: str | None = None, limit: int = 1000
    ) -> list[SignInRecord]:
        async with self._failing("cannot list sign-ins"), self._connect() as conn:
            return await sql_identity.live_signins(conn, now, user, limit)

    async def revoke_signin(self, signin_id: str, at: float) -> SignInRecord | None:
        async with self._failing("cannot revoke a sign-in"), self._begin() as conn:
            done = await sql_identity.revoke(conn, at, signin_id=signin_id, user=None)
        return done[0] if done else None

    async def revoke_signins(self, user: str, at: float) -> list[str]:
        async with self._failing("cannot revoke sign-ins"), self._begin() as conn:
            done = await sql_identity.revoke(conn, at, signin_id=None, user=user)
        return [record.id for record in done]

    async def touch_signin(self, signin_id: str, at: float) -> None:
        async with self._failing("cannot note a sign-in's use"), self._begin() as conn:
            await sql_identity.touch(conn, signin_id, at)

    async def usage(self) -> list[UsageRecord]:
        async with self._failing("cannot count usage"), self._connect() as conn:
            return await sql_identity.usage(conn)

    @contextlib.asynccontextmanager
    async def _failing(self, what: str) -> AsyncIterator[None]:
        """A database failure as a `StoreError` saying `what` failed."""
        try:
            yield
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"{what}: {exc}") from exc

    # ------------------------------------------------------------ for tests

    async def run_sync(self, fn: Any) -> Any:
        """Run `fn(sync_connection)` in a transaction (migration tests)."""
        async with self._begin() as conn:
            return await conn.run_sync(fn)


# ---------------------------------------------------------------- rows


def _touches(batch: Batch) -> bool:
    """The batch changes what the conversation list shows (its time, title)."""
    return bool(
        batch.messages
        or batch.truncate_history_at is not None
        or batch.delete_runs
        or batch.title is not None
    )


def _touch(batch: Batch) -> dict[str, Any]:
    return {"cid": batch.conversation_id, "at": batch.updated_at, "title": batch.title}


def _count(result: CursorResult[Any]) -> int:
    return int(result.rowcount or 0)


def _conversation(row: Row[Any]) -> ConversationRecord:
    values = row._asdict()
    values.pop("epoch", None)
    return ConversationRecord.model_validate(values)


def _run(row: Row[Any]) -> RunRecord:
    values = row._asdict()
    values.pop("epoch", None)
    return RunRecord.model_validate(values)


def _message_row(conversation_id: str, position: int, m: Message) -> dict[str, Any]:
    calls = [c.model_dump() for c in m.tool_calls] if m.tool_calls else None
    return {
        "conversation_id": conversation_id,
        "position": position,
        "role": m.role,
        "content": m.content,
        "tool_calls": calls,
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "status": m.meta.status if m.meta else None,
        "error": m.meta.error if m.meta else None,
    }


def _message(row: Row[Any]) -> Message:
    calls: Sequence[dict[str, Any]] = row.tool_calls or ()
    meta = (
        ToolResultMeta(status=row.status, error=row.error)
        if row.status is not None
        else None
    )
    return Message(
        role=row.role,
        content=row.content,
        tool_calls=tuple(ToolCall(**c) for c in calls),
        tool_call_id=row.tool_call_id,
        name=row.name,
        meta=meta,
    )


def _encode_cursor(record: ConversationRecord) -> str:
    raw = json.dumps([record.updated_at, record.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


CURSOR_MAX_CHARS = 200
"""A cursor this server wrote is about 80 characters."""


def _live(parked: bool) -> ColumnElement[bool]:
    """Runs in a `LIVE_STATUSES` state; without `PARKED` ones (waiting, in a
    conversation let go cleanly: its epoch negative) unless `parked`."""
    live = runs.c.status.in_(LIVE_STATUSES)
    if parked:
        return live
    released = (
        select(conversations.c.id)
        .where(conversations.c.id == runs.c.conversation_id, conversations.c.epoch < 0)
        .exists()
    )
    return and_(live, or_(runs.c.status != "waiting", ~released))


def _decode_cursor(cursor: str) -> tuple[float, str]:
    """A page's cursor back to its key; `ValueError` for anything this server
    did not write (too long, not base64, not a `[number, id]` pair)."""
    try:
        if len(cursor) > CURSOR_MAX_CHARS or not cursor.isascii():
            raise ValueError("not a cursor of this server")
        padded = cursor + "=" * (-len(cursor) % 4)
        pair = load_json(base64.urlsafe_b64decode(padded))
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError("not a [time, id] pair")
        updated_at, last_id = pair
        if isinstance(updated_at, bool) or not isinstance(updated_at, int | float):
            raise ValueError("not a time")
        if not isinstance(last_id, str):
            raise ValueError("not an id")
        return float(updated_at), last_id
    except (ValueError, InvalidMessage) as exc:
        raise ValueError(f"invalid cursor {cursor[:40]!r}") from exc
