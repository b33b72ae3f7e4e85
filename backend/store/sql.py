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
from collections.abc import AsyncIterator, Sequence
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
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from backend.errors import ConfigError
from backend.llm.base import Message, ToolCall, ToolResultMeta
from backend.notifications import Frame
from backend.store import migrate
from backend.store.base import (
    LIVE_STATUSES,
    Batch,
    ConversationRecord,
    FileRecord,
    LimitReached,
    NoteRecord,
    Page,
    RunRecord,
    StoreError,
)
from backend.store.schema import (
    conversations,
    files,
    frames,
    messages,
    notes,
    runs,
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
        return create_async_engine(full, pool_pre_ping=True)
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
    list of rows: one round trip for any number of conversations)."""

    def __init__(self, dialect_name: str) -> None:
        dialect = postgresql if dialect_name == "postgresql" else sqlite
        c, f, m, r = conversations.c, frames.c, messages.c, runs.c
        self.create = dialect.insert(conversations).on_conflict_do_nothing(
            index_elements=["id"]
        )
        self.touch = (
            update(conversations)
            .where(c.id == bindparam("cid"))
            .values(
                updated_at=bindparam("at"),
                title=func.coalesce(bindparam("title"), c.title),
            )
        )
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
        query = (
            select(messages)
            .where(messages.c.conversation_id == conversation_id)
            .order_by(messages.c.position)
        )
        async with self._connect() as conn:
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

    async def live_runs(self, conversation_id: str | None = None) -> list[RunRecord]:
        query = select(runs).where(runs.c.status.in_(LIVE_STATUSES))
        if conversation_id is not None:
            query = query.where(runs.c.conversation_id == conversation_id)
        query = query.order_by(runs.c.started_at, runs.c.id)
        async with self._connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_run(row) for row in rows]

    async def live_conversations(self) -> list[str]:
        query = (
            select(runs.c.conversation_id)
            .where(runs.c.status.in_(LIVE_STATUSES))
            .distinct()
        )
        async with self._connect() as conn:
            return [str(row[0]) for row in (await conn.execute(query)).all()]

    async def frames(self, conversation_id: str, *, max_bytes: int) -> list[Frame]:
        f = frames.c
        query = (
            select(f.seq, f.run_id, f.text)
            .where(f.conversation_id == conversation_id)
            .order_by(f.seq.desc())
        )
        kept: list[Frame] = []
        total = 0
        async with self._connect() as conn:
            result = await conn.stream(query)
            async for seq, run_id, text in result:
                total += len(text.encode())
                if total > max_bytes:
                    break
                kept.append(Frame(seq, run_id, text))
            await result.close()
        kept.reverse()
        return kept

    async def last_seq(self, conversation_id: str) -> int:
        query = select(func.max(frames.c.seq)).where(
            frames.c.conversation_id == conversation_id
        )
        async with self._connect() as conn:
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
        except SQLAlchemyError as exc:
            names = ", ".join(b.conversation_id for b in batches[:3])
            more = f" and {len(batches) - 3} more" if len(batches) > 3 else ""
            raise StoreError(f"cannot save conversation {names}{more}: {exc}") from exc

    async def _write(self, conn: AsyncConnection, batches: Sequence[Batch]) -> None:
        """Each kind of change as one statement for all the batches (one
        round trip each, however many conversations the batches touch)."""
        created = [b.create.model_dump() for b in batches if b.create is not None]
        if created:
            await conn.execute(self._statements.create, created)
        touched = [
            {"cid": b.conversation_id, "at": b.updated_at, "title": b.title}
            for b in batches
            if b.messages
            or b.truncate_history_at is not None
            or b.delete_runs
            or b.title is not None
        ]
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
            await conn.execute(insert(messages), message_rows)
        frame_rows = [
            {
                "conversation_id": b.conversation_id,
                "seq": f.seq,
                "run_id": f.run_id,
                "text": f.text,
            }
            for b in batches
            for f in b.frames
        ]
        if frame_rows:
            await conn.execute(insert(frames), frame_rows)
        windows = [
            {"cid": b.conversation_id, "below": b.keep_frames_from}
            for b in batches
            if b.keep_frames_from is not None
        ]
        if windows:
            await conn.execute(self._statements.window, windows)
        run_rows = [_run_row(run) for b in batches for run in b.runs]
        if run_rows:
            await conn.execute(self._statements.save_run, run_rows)
        removed = [
            {"cid": b.conversation_id, "rid": run_id}
            for b in batches
            for run_id in b.delete_runs
        ]
        if removed:
            await conn.execute(self._statements.delete_run, removed)

    # ------------------------------------------------------------ files

    async def add_file(self, record: FileRecord, *, limit: int) -> None:
        f = files.c
        async with self._begin() as conn:
            # the conversation's row is locked (PostgreSQL; SQLite writes one
            # at a time anyway), so two uploads cannot both take the last place
            owner = (
                await conn.execute(
                    select(conversations.c.id)
                    .where(conversations.c.id == record.conversation_id)
                    .with_for_update()
                )
            ).first()
            if owner is None:
                raise StoreError(f"no conversation {record.conversation_id!r}")
            count = (
                await conn.execute(
                    select(func.count()).where(
                        f.conversation_id == record.conversation_id
                    )
                )
            ).scalar_one()
            if count >= limit:
                raise LimitReached(
                    f"this conversation has {limit} files already, the most it takes"
                )
            await conn.execute(insert(files).values(**record.model_dump()))

    async def files(self, conversation_id: str) -> list[FileRecord]:
        query = (
            select(files)
            .where(files.c.conversation_id == conversation_id)
            .order_by(files.c.created_at, files.c.id)
        )
        async with self._connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [FileRecord.model_validate(dict(row)) for row in rows]

    async def file(self, conversation_id: str, file_id: str) -> FileRecord | None:
        f = files.c
        query = select(files).where(
            and_(f.conversation_id == conversation_id, f.id == file_id)
        )
        async with self._connect() as conn:
            row = (await conn.execute(query)).mappings().first()
        return None if row is None else FileRecord.model_validate(dict(row))

    # ------------------------------------------------------------ notes

    async def add_note(
        self, owner: str, text: str, saved_at: float, *, limit: int
    ) -> NoteRecord:
        for _attempt in range(3):  # two writers may pick the same number
            try:
                async with self._begin() as conn:
                    return await self._add_note(conn, owner, text, saved_at, limit)
            except IntegrityError:
                continue
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

    async def delete_note(self, owner: str, note_id: int) -> NoteRecord | None:
        n = notes.c
        where = and_(n.owner == owner, n.number == note_id)
        async with self._begin() as conn:
            row = (
                await conn.execute(select(n.number, n.text, n.saved_at).where(where))
            ).first()
            if row is None:
                return None
            await conn.execute(delete(notes).where(where))
        return NoteRecord(id=row.number, text=row.text, saved_at=row.saved_at)

    # ------------------------------------------------------------ for tests

    async def run_sync(self, fn: Any) -> Any:
        """Run `fn(sync_connection)` in a transaction (migration tests)."""
        async with self._begin() as conn:
            return await conn.run_sync(fn)


# ---------------------------------------------------------------- rows


def _count(result: CursorResult[Any]) -> int:
    return int(result.rowcount or 0)


def _conversation(row: Row[Any]) -> ConversationRecord:
    return ConversationRecord.model_validate(row._asdict())


def _run(row: Row[Any]) -> RunRecord:
    return RunRecord.model_validate(row._asdict())


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


def _decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        updated_at, last_id = json.loads(base64.urlsafe_b64decode(padded))
        return float(updated_at), str(last_id)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"invalid cursor {cursor[:40]!r}") from exc
