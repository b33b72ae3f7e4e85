"""The index's SQLite file: its schema, its version, and opening it.

One SQLite file (`LOOPWIRE_SOURCES_INDEX`, or `:memory:`) whatever the main
database is. Tables: `documents` (source, relative path, kind, title, size,
mtime_ns, sha256, indexed_at), `passages` (a document's passages, with their
location), `passage_text` (an FTS5 index over the passages' text and
headings, kept in step by triggers), `vectors` (a passage's embedding, when
an `Embedder` is given) and `problems` (each source's refused files, as of
its last refresh). It is a cache of the folders: a file of another schema
version is rebuilt.

Every statement runs on one worker thread of the index's own
(`Database.run`): the event loop never waits on SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

SCHEMA_VERSION = 1

P = ParamSpec("P")
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    path TEXT NOT NULL,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    indexed_at REAL NOT NULL,
    UNIQUE (source, path)
);
CREATE TABLE passages (
    id INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    location TEXT NOT NULL,
    heading TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX passages_by_document ON passages (document_id);
CREATE VIRTUAL TABLE passage_text USING fts5 (
    body, heading, content = 'passages', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER passages_added AFTER INSERT ON passages BEGIN
    INSERT INTO passage_text (rowid, body, heading)
    VALUES (new.id, new.body, new.heading);
END;
CREATE TRIGGER passages_removed AFTER DELETE ON passages BEGIN
    INSERT INTO passage_text (passage_text, rowid, body, heading)
    VALUES ('delete', old.id, old.body, old.heading);
END;
CREATE TABLE vectors (
    passage_id INTEGER PRIMARY KEY REFERENCES passages (id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE TABLE problems (
    source TEXT NOT NULL,
    path TEXT NOT NULL,
    reason TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX problems_by_source ON problems (source);
"""
_TABLES = ("passage_text", "vectors", "passages", "documents", "problems", "meta")


class Database:
    """The index's connection, and the one thread its statements run on.
    Open with `await Database.open(...)`."""

    def __init__(
        self, connection: sqlite3.Connection, executor: ThreadPoolExecutor
    ) -> None:
        self._connection = connection
        self._executor = executor

    @classmethod
    async def open(cls, path: str, sources: list[str], model: str | None) -> Database:
        """The index in the SQLite file `path` (`:memory:`: in memory), built
        if need be; documents of other `sources`, and vectors of another
        `model` (or of none), are dropped."""
        executor = ThreadPoolExecutor(1, thread_name_prefix="sources-index")
        loop = asyncio.get_running_loop()
        try:
            connection = await loop.run_in_executor(
                executor, _connect, path, sources, model
            )
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(connection, executor)

    async def run(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """`fn(connection, *args)` on the index's thread. A cancelled caller
        stops waiting; the statement (a whole transaction) still completes."""
        loop = asyncio.get_running_loop()
        call = functools.partial(fn, self._connection, *args, **kwargs)
        return await loop.run_in_executor(self._executor, call)

    async def close(self) -> None:
        await self.run(sqlite3.Connection.close)
        self._executor.shutdown(wait=True)


def fetch(
    connection: sqlite3.Connection, sql: str, parameters: Sequence[Any]
) -> list[Any]:
    return connection.execute(sql, parameters).fetchall()


@contextlib.contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A transaction on an autocommit connection: committed, or rolled back."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _connect(path: str, sources: list[str], model: str | None) -> sqlite3.Connection:
    """Open (or build) the index; drop what no configured source or model owns."""
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        connection.execute("PRAGMA foreign_keys = ON")
        if path != ":memory:":
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
        _ensure_schema(connection)
        marks = ", ".join("?" * len(sources))
        with transaction(connection) as db:
            db.execute(f"DELETE FROM documents WHERE source NOT IN ({marks})", sources)
            db.execute(f"DELETE FROM problems WHERE source NOT IN ({marks})", sources)
            db.execute("DELETE FROM vectors WHERE model IS NOT ?", (model,))
    except BaseException:
        connection.close()
        raise
    return connection


def _ensure_schema(connection: sqlite3.Connection) -> None:
    try:
        row = connection.execute(
            "SELECT value FROM meta WHERE key = 'schema_version'"
        ).fetchone()
    except sqlite3.OperationalError:
        row = None
    if row is not None and row[0] == str(SCHEMA_VERSION):
        return
    with transaction(connection) as db:  # another version (or none): rebuilt
        for table in _TABLES:
            db.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in _statements(_SCHEMA):
            db.execute(statement)
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )


def _statements(script: str) -> list[str]:
    """The statements of `script` (a trigger's body holds `;` of its own)."""
    statements: list[str] = []
    current = ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements
