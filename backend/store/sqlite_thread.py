"""A SQLite file's connection on a thread of its own: a transaction, or a
read on the run path, in one trip.

Through aiosqlite every statement is several trips from the event loop to
the connection's thread and back (a cursor, the statement, its close), and
the COMMIT one more: a run's outcome, five to eight statements, was some
twenty trips and about 3 ms, which a stopped run's `response_complete`
waited for; a read at each run's start (its custom instructions) cost
0.8 ms of CPU. `SqliteThread` runs a whole transaction, every statement
and the COMMIT, or a read, as one call on a thread of its own that holds
a plain `sqlite3` connection through SQLAlchemy's synchronous engine: one
trip. The database has two: its writer, and a reader for the run path's
reads (WAL: a reader never waits for the writer).

The statements are the same SQLAlchemy Core ones, on the same `sqlite3`
module aiosqlite wraps; writers still take turns on the database's write
lock (`Database.transact`), so this connection never waits on another
writer of ours. Only a file has a writer: an in-memory database is the one
connection the async engine keeps.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

P = ParamSpec("P")
T = TypeVar("T")


class SqliteThread:
    """One connection to the SQLite file at `url` (an aiosqlite URL), used
    by one thread (named `name`), for whole transactions."""

    def __init__(
        self, url: str, on_connect: Callable[[Any, Any], None], name: str
    ) -> None:
        sync_url = make_url(url).set(drivername="sqlite")
        self._engine = create_engine(
            sync_url,
            poolclass=StaticPool,  # one connection, only ever used by the thread
            connect_args={"timeout": 30, "check_same_thread": False},
        )
        event.listen(self._engine, "connect", on_connect)
        self._conn: Connection | None = None
        """Opened by the thread at its first transaction, and kept (checking
        a connection out of a pool and back each time cost more than most
        statements)."""
        self._thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"loopwire-sqlite-{name}"
        )

    async def transact(
        self,
        work: Callable[Concatenate[Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """`work(connection, ...)` in one transaction on the thread,
        committed if it returns, rolled back if it raises (its exception is
        raised here). Callers run it to its end (the store's
        methods are `aio.finished`): a cancelled wait would not stop it."""
        loop = asyncio.get_running_loop()
        call = functools.partial(self._in_thread, work, *args, **kwargs)
        return await loop.run_in_executor(self._thread, call)

    def _in_thread(
        self,
        work: Callable[Concatenate[Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        conn = self._conn
        if conn is None or conn.closed:  # (one a failure invalidated reconnects)
            conn = self._conn = self._engine.connect()
        with conn.begin():
            return work(conn, *args, **kwargs)

    def close(self) -> None:
        """Finish what was handed over, then close the connection."""
        self._thread.shutdown(wait=True)
        if self._conn is not None:
            self._conn.close()
        self._engine.dispose()
