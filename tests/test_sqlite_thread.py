"""`SqliteThread` (store/sqlite_thread.py): a SQLite file's transactions,
each whole on a thread of its own, on a connection it keeps."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Connection

from backend.store.sqlite_thread import SqliteThread

NOTES = sa.table("notes", sa.column("body", sa.String))


def no_pragmas(_dbapi: Any, _record: Any) -> None:
    """The connect hook (the store's sets its pragmas)."""


@pytest.fixture
async def writer(tmp_path: Path) -> AsyncIterator[SqliteThread]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    thread = SqliteThread(url, no_pragmas, "test")
    await thread.transact(lambda c: c.execute(sa.text("CREATE TABLE notes (body)")))
    try:
        yield thread
    finally:
        thread.close()


def add(conn: Connection, body: str, fail: bool = False) -> tuple[str, object]:
    """Insert a note; fail after it when told; say where it ran (the thread,
    and the DB-API connection itself: held, its id cannot be reused)."""
    conn.execute(sa.insert(NOTES).values(body=body))
    if fail:
        raise ValueError("the work failed")
    return threading.current_thread().name, conn.connection.dbapi_connection


def bodies(conn: Connection) -> list[str]:
    return [str(b) for (b,) in conn.execute(sa.select(NOTES.c.body))]


async def test_each_transaction_is_whole_on_the_thread_and_its_connection(
    writer: SqliteThread,
) -> None:
    """Work that returns is committed, work that raises rolled back (its
    error raised here); every one runs on the thread, on one connection."""
    first = await writer.transact(add, "kept")
    with pytest.raises(ValueError, match="the work failed"):
        await writer.transact(add, "gone", fail=True)
    second = await writer.transact(add, "kept too")
    assert first[1] is second[1] and first[0] == second[0]
    assert first[0].startswith("loopwire-sqlite-test")
    assert await writer.transact(bodies) == ["kept", "kept too"]


async def test_a_connection_a_failure_invalidated_is_replaced(
    writer: SqliteThread,
) -> None:
    """After a failure that invalidates the connection (SQLAlchemy then
    reconnects the one kept), the next transaction runs on a new one."""
    _thread, before = await writer.transact(add, "a")

    def broken(conn: Connection) -> None:
        conn.invalidate()
        raise sa.exc.OperationalError("COMMIT", {}, Exception("disk I/O error"))

    with pytest.raises(sa.exc.OperationalError):
        await writer.transact(broken)
    _thread, after = await writer.transact(add, "b")
    assert after is not before
    assert await writer.transact(bodies) == ["a", "b"]
