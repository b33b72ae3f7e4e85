"""The database under `SqlStore`: URL → engine, and the policy of using it.

SQLite (through aiosqlite) is the embedded default: a file created on first
use, in WAL mode so readers never wait for the writer. PostgreSQL (through
asyncpg) is chosen by URL. `Database.begin` and `Database.connect` are the
only ways in; `failing` maps a database failure to a `StoreError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from backend.errors import ConfigError
from backend.store.base import StoreError
from backend.store.revision import at_head
from backend.store.sqlite_thread import SqliteThread

DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
ALIASES = {"postgres": "postgresql"}

IDLE_TRANSACTION_MS = 15_000
"""PostgreSQL ends a transaction of ours left idle this long: loopwire never
pauses inside one, so only a frozen process (a long GC pause, SIGSTOP) does,
and its locks (a fence on a conversation's row) must not hold a take-over
up for longer."""

SQLITE_CONNECTIONS = 4
"""Connections to a SQLite file: one writer at a time, a few readers."""

P = ParamSpec("P")
T = TypeVar("T")

MIGRATION_LOCK = 0x6C6F6F70  # "loop"
"""The PostgreSQL advisory lock held while the schema is migrated."""


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


def in_memory(url: str) -> bool:
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
    if in_memory(full):
        name = f"file:loopwire-{uuid.uuid4().hex}?mode=memory&cache=shared"
        engine = create_async_engine(
            f"sqlite+aiosqlite:///{name}&uri=true",
            poolclass=StaticPool,
            connect_args={"check_same_thread": False},
        )
        # A connection cancelled mid-statement is thrown away; a named
        # in-memory database lives while any connection to it is open, so
        # this one keeps it (and its tables) for the engine's replacement.
        anchor = sqlite3.connect(name, uri=True, check_same_thread=False)
        event.listen(engine.sync_engine, "engine_disposed", lambda _: anchor.close())
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


@contextlib.asynccontextmanager
async def failing(what: str) -> AsyncIterator[None]:
    """A database failure as a `StoreError` saying `what` failed."""
    try:
        yield
    except (SQLAlchemyError, OSError) as exc:
        raise StoreError(f"{what}: {exc}") from exc


class Database:
    """An engine for `url` and the turns taken on it."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        self.dialect = self.engine.dialect.name
        sqlite_db = self.dialect == "sqlite"
        self._one_connection = sqlite_db and in_memory(engine_url(url))
        self._write_lock = asyncio.Lock() if sqlite_db else None
        """SQLite has one writer at a time: writers queue here instead of in
        its busy handler. An in-memory database is one shared connection, so
        reads queue too."""
        threads = sqlite_db and not self._one_connection
        full = engine_url(url)
        self._writer = (
            SqliteThread(full, _sqlite_pragmas, "writer") if threads else None
        )
        """A SQLite file's transactions of many statements, in one trip."""
        self._reader = (
            SqliteThread(full, _sqlite_pragmas, "reader") if threads else None
        )
        """A SQLite file's reads on the run path, in one trip."""

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a transaction (committed on success)."""
        async with contextlib.AsyncExitStack() as stack:
            if self._write_lock is not None:
                await stack.enter_async_context(self._write_lock)
            yield await stack.enter_async_context(self.engine.begin())

    async def transact(
        self,
        work: Callable[Concatenate[Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """`work(connection, ...)`, synchronous, in one transaction
        (committed if it returns): on a SQLite file in one trip to its
        writer's thread, elsewhere statement by statement (`run_sync`)."""
        if self._writer is not None and self._write_lock is not None:
            async with self._write_lock:
                return await self._writer.transact(work, *args, **kwargs)
        async with self.begin() as conn:
            return await conn.run_sync(work, *args, **kwargs)

    async def read(
        self,
        work: Callable[Concatenate[Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """`work(connection, ...)`, synchronous, reading: on a SQLite file
        in one trip to its reader's thread, elsewhere as `connect` does."""
        if self._reader is not None:
            return await self._reader.transact(work, *args, **kwargs)
        async with self.connect() as conn:
            return await conn.run_sync(work, *args, **kwargs)

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[AsyncConnection]:
        async with contextlib.AsyncExitStack() as stack:
            if self._one_connection and self._write_lock is not None:
                await stack.enter_async_context(self._write_lock)
            yield await stack.enter_async_context(self.engine.connect())

    async def upgrade(self) -> None:
        """Bring the schema up to date. On PostgreSQL, instances starting
        together take turns (a transaction-scoped advisory lock): the first
        migrates, the others find nothing left to do. A database already at
        the head revision is told by one query, without loading Alembic."""
        async with self.begin() as conn:
            if self.dialect == "postgresql":
                await conn.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"),
                    {"key": MIGRATION_LOCK},
                )
            if await conn.run_sync(at_head):
                return
            from backend.store import migrate  # Alembic: only to migrate

            await conn.run_sync(migrate.upgrade)

    async def revision(self) -> str | None:
        from backend.store import migrate

        async with self.connect() as conn:
            return await conn.run_sync(migrate.current)

    async def dispose(self) -> None:
        for thread in (self._writer, self._reader):
            if thread is not None:
                thread.close()
        await self.engine.dispose()
