"""The index of the data sources: SQLite FTS5, BM25, optionally hybrid.

One SQLite file (`LOOPWIRE_SOURCES_INDEX`, or `:memory:`) whatever the main
database is. Tables: `documents` (source, relative path, kind, title, size,
mtime_ns, sha256, indexed_at), `passages` (a document's passages, with their
location), `passage_text` (an FTS5 index over the passages' text and
headings, kept in step by triggers), `vectors` (a passage's embedding, when
an `Embedder` is given) and `problems` (each source's refused files, as of
its last refresh). It is a cache of the folders: a file of another schema
version is rebuilt.

Every statement runs on one worker thread of the index's own (the event
loop never waits on SQLite); reading and parsing files run in other
threads meanwhile. `refresh(source)` is incremental: a file whose size and
mtime are as indexed is not read; one whose bytes hash as indexed is not
parsed again; removed and refused files leave the index. `search` quotes
the user's words (`query.py`) and ranks by BM25 — and, with embeddings,
fuses the BM25 and cosine rankings by reciprocal rank (`RRF_K`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import sqlite3
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from backend.errors import LLMError, LoopwireError
from backend.sources.documents import (
    DocumentRefused,
    Problem,
    parse_document,
    read_document,
)
from backend.sources.embeddings import Embedder, dot, normalised, pack, unpack
from backend.sources.folders import FileEntry, scan_folder
from backend.sources.passages import Passage, split_passages
from backend.sources.query import match_expression

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
BM25_WEIGHTS = (1.0, 0.75)
"""Of a passage's text and of its headings (the document's title and path
count as headings)."""
CANDIDATES = 50
"""Passages each ranking offers to the fusion."""
RRF_K = 60
WRITE_BATCH = 64
"""Documents written per transaction."""
SNIPPET_TOKENS = 24
EMBED_CHUNK = 256
"""Passages embedded (then stored) at a time during a refresh."""

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


class UnknownSource(LoopwireError):
    """A source name that is not configured."""

    def __init__(self, names: Sequence[str], available: Sequence[str]) -> None:
        listed = ", ".join(available) or "none"
        super().__init__(
            f"unknown data source(s): {', '.join(names)}; available: {listed}"
        )
        self.available = tuple(available)


@dataclass(frozen=True, slots=True)
class Limits:
    max_file_bytes: int = 10 * 1024 * 1024
    max_files: int = 10_000


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """What one `refresh` did to one source's part of the index."""

    source: str
    added: int = 0
    updated: int = 0
    """Files whose content changed: parsed and indexed again."""
    removed: int = 0
    """Documents taken out: their file is gone, or now refused."""
    unchanged: int = 0
    """Files indexed as they are (touched ones with the same bytes too)."""
    read: int = 0
    """Files read (or refused on reading); the others' size and mtime were as
    indexed, so they were not opened."""
    passages: int = 0
    """Passages written."""
    embedded: int = 0
    """Passages embedded (with an `Embedder`)."""
    refused: tuple[Problem, ...] = ()
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Hit:
    """A passage a search found."""

    source: str
    path: str
    title: str
    location: str
    text: str
    snippet: str
    """A few words around the matched ones, those in `**bold**`."""
    score: float
    """Higher is better: -BM25, or (hybrid) the reciprocal-rank fusion."""


@dataclass(frozen=True, slots=True)
class _Known:
    id: int
    size: int
    mtime_ns: int
    sha256: str


@dataclass(frozen=True, slots=True)
class _Parsed:
    entry: FileEntry
    sha256: str
    kind: str
    title: str
    passages: list[Passage]


@dataclass(frozen=True, slots=True)
class _Same:
    """A file read again whose bytes are as indexed (touched, not changed)."""

    entry: FileEntry


@dataclass
class _Pending:
    """Writes of one refresh not made yet."""

    parsed: list[tuple[_Parsed, int | None]] = field(default_factory=list)
    touched: list[tuple[int, FileEntry]] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.parsed) + len(self.touched) + len(self.removed)


class SourceIndex:
    """The index of named folders. Open with `await SourceIndex.open(...)`."""

    def __init__(
        self,
        folders: dict[str, Path],
        connection: sqlite3.Connection,
        executor: ThreadPoolExecutor,
        *,
        limits: Limits,
        embedder: Embedder | None,
        clock: Callable[[], float],
    ) -> None:
        self.folders = dict(folders)
        self.limits = limits
        self._connection = connection
        self._executor = executor
        self._embedder = embedder
        self._clock = clock
        self._refreshing = asyncio.Lock()
        self._closed = False
        self._vectors: dict[str, list[tuple[int, array[float]]]] = {}
        """Per source, its passages' vectors (read on the index's thread only)."""

    @classmethod
    async def open(
        cls,
        path: str | Path,
        folders: dict[str, Path],
        *,
        limits: Limits = Limits(),
        embedder: Embedder | None = None,
        clock: Callable[[], float] = time.time,
    ) -> SourceIndex:
        """The index in the SQLite file `path` (`:memory:`: in memory) for
        `folders` (name → folder); documents of other sources are dropped."""
        executor = ThreadPoolExecutor(1, thread_name_prefix="sources-index")
        loop = asyncio.get_running_loop()
        model = embedder.model if embedder is not None else None
        try:
            connection = await loop.run_in_executor(
                executor, _connect, str(path), list(folders), model
            )
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(
            folders,
            connection,
            executor,
            limits=limits,
            embedder=embedder,
            clock=clock,
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.folders)

    @property
    def hybrid(self) -> bool:
        return self._embedder is not None

    async def aclose(self) -> None:
        """Close the embedder and the database (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._embedder is not None:
                await self._embedder.aclose()
        finally:
            await self._run(self._connection.close)
            self._executor.shutdown(wait=True)

    # --- refresh ---------------------------------------------------------------

    async def refresh(self, source: str) -> RefreshReport:
        """Bring `source`'s part of the index in step with its folder."""
        folder = self._folder(source)
        async with self._refreshing:
            started = time.perf_counter()
            report = await self._refresh(source, folder)
            seconds = round(time.perf_counter() - started, 6)
            return replace(report, seconds=seconds)

    async def refresh_all(self) -> list[RefreshReport]:
        return [await self.refresh(name) for name in self.folders]

    async def _refresh(self, source: str, folder: Path) -> RefreshReport:
        limits = self.limits
        try:
            scan = await asyncio.to_thread(
                scan_folder,
                folder,
                max_files=limits.max_files,
                max_file_bytes=limits.max_file_bytes,
            )
        except DocumentRefused as exc:  # the folder itself: keep what is indexed
            problem = Problem(".", exc.reason, str(exc))
            await self._run(self._set_problems, source, [problem])
            return RefreshReport(source, refused=(problem,))
        known = await self._run(self._known, source)
        problems = list(scan.problems)
        pending = _Pending()
        counts = {"added": 0, "updated": 0, "unchanged": 0, "read": 0}
        passages = 0
        for entry in scan.files:
            old = known.pop(entry.relative, None)
            if old is not None and (old.size, old.mtime_ns) == (
                entry.size,
                entry.mtime_ns,
            ):
                counts["unchanged"] += 1
                continue
            counts["read"] += 1
            try:
                outcome = await asyncio.to_thread(
                    _prepare, scan.root, entry, old, limits.max_file_bytes
                )
            except DocumentRefused as exc:
                problems.append(Problem(entry.relative, exc.reason, str(exc)))
                if old is not None:
                    pending.removed.append(old.id)
                continue
            if isinstance(outcome, _Same):
                assert old is not None
                pending.touched.append((old.id, entry))
                counts["unchanged"] += 1
            else:
                pending.parsed.append((outcome, old.id if old else None))
                counts["updated" if old else "added"] += 1
            if len(pending) >= WRITE_BATCH:
                passages += await self._run(self._write, source, pending)
                pending = _Pending()
        pending.removed.extend(old.id for old in known.values())
        removed = len(pending.removed)
        passages += await self._run(self._write, source, pending)
        embedded, failure = await self._embed_missing(source)
        if failure is not None:
            problems.append(failure)
        await self._run(self._set_problems, source, problems)
        return RefreshReport(
            source,
            added=counts["added"],
            updated=counts["updated"],
            removed=removed,
            unchanged=counts["unchanged"],
            read=counts["read"],
            passages=passages,
            embedded=embedded,
            refused=tuple(problems),
        )

    def _write(self, source: str, pending: _Pending) -> int:
        """One transaction: documents in, out and touched (the index's thread);
        the passages written."""
        now = self._clock()
        written = 0
        with _transaction(self._connection) as db:
            db.executemany(
                "DELETE FROM documents WHERE id = ?",
                [(doc_id,) for doc_id in pending.removed],
            )
            db.executemany(
                "UPDATE documents SET size = ?, mtime_ns = ? WHERE id = ?",
                [(e.size, e.mtime_ns, doc_id) for doc_id, e in pending.touched],
            )
            for parsed, old_id in pending.parsed:
                if old_id is not None:
                    db.execute("DELETE FROM documents WHERE id = ?", (old_id,))
                written += _insert(db, source, parsed, now)
        self._vectors.pop(source, None)
        return written

    async def _embed_missing(self, source: str) -> tuple[int, Problem | None]:
        """Embed the source's passages that have no vector yet, `EMBED_CHUNK`
        at a time, each chunk stored as it comes (a failure is reported, and
        the next refresh goes on from there)."""
        if self._embedder is None:
            return 0, None
        missing = await self._run(self._unembedded, source)
        embedded = 0
        for start in range(0, len(missing), EMBED_CHUNK):
            chunk = missing[start : start + EMBED_CHUNK]
            try:
                vectors = await self._embedder.embed([text for _, text in chunk])
            except LLMError as exc:
                message = (
                    f"{len(missing) - embedded} passages could not be embedded "
                    f"({exc}); BM25 alone ranks them until a refresh embeds them"
                )
                return embedded, Problem(".", "embeddings", message)
            rows = [
                (pid, pack(vector))
                for (pid, _), vector in zip(chunk, vectors, strict=True)
            ]
            await self._run(self._store_vectors, source, rows)
            embedded += len(rows)
        return embedded, None

    def _unembedded(self, source: str) -> list[tuple[int, str]]:
        rows = self._connection.execute(
            "SELECT p.id, p.heading, p.body FROM passages p"
            " JOIN documents d ON d.id = p.document_id"
            " LEFT JOIN vectors v ON v.passage_id = p.id"
            " WHERE d.source = ? AND v.passage_id IS NULL ORDER BY p.id",
            (source,),
        ).fetchall()
        return [(pid, embedding_text(heading, body)) for pid, heading, body in rows]

    def _store_vectors(self, source: str, rows: list[tuple[int, bytes]]) -> None:
        assert self._embedder is not None
        model = self._embedder.model
        with _transaction(self._connection) as db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors (passage_id, model, vector)"
                " VALUES (?, ?, ?)",
                [(pid, model, blob) for pid, blob in rows],
            )
        self._vectors.pop(source, None)

    def _known(self, source: str) -> dict[str, _Known]:
        rows = self._connection.execute(
            "SELECT path, id, size, mtime_ns, sha256 FROM documents WHERE source = ?",
            (source,),
        )
        return {path: _Known(*rest) for path, *rest in rows}

    def _set_problems(self, source: str, problems: Iterable[Problem]) -> None:
        with _transaction(self._connection) as db:
            db.execute("DELETE FROM problems WHERE source = ?", (source,))
            db.executemany(
                "INSERT INTO problems (source, path, reason, message)"
                " VALUES (?, ?, ?, ?)",
                [(source, p.path, p.reason, p.message) for p in problems],
            )

    # --- reading -----------------------------------------------------------------

    async def problems(self, source: str) -> list[Problem]:
        """The files of `source` its last refresh refused, and why."""
        self._folder(source)
        rows = await self._run(
            _fetch,
            self._connection,
            "SELECT path, reason, message FROM problems"
            " WHERE source = ? ORDER BY rowid",
            (source,),
        )
        return [Problem(*row) for row in rows]

    async def documents(self, source: str) -> dict[str, int]:
        """The indexed documents of `source`: relative path → passage count."""
        self._folder(source)
        rows = await self._run(
            _fetch,
            self._connection,
            "SELECT d.path, COUNT(p.id) FROM documents d"
            " LEFT JOIN passages p ON p.document_id = d.id"
            " WHERE d.source = ? GROUP BY d.id ORDER BY d.path",
            (source,),
        )
        return {path: count for path, count in rows}

    async def search(
        self, query: str, sources: Sequence[str] | None = None, limit: int = 5
    ) -> list[Hit]:
        """The `limit` passages that best match `query` in `sources` (None:
        all), best first; none for a query without words."""
        chosen = self.choose(sources)
        match = match_expression(query)
        if match is None or not chosen or limit < 1:
            return []
        wanted: array[float] | None = None
        if self._embedder is not None:
            try:
                vector = (await self._embedder.embed([query.strip()]))[0]
                wanted = normalised(vector)
            except LLMError as exc:
                log.warning("search without embeddings this time: %s", exc)
        return await self._run(self._search, match, chosen, limit, wanted)

    def choose(self, sources: Sequence[str] | None) -> tuple[str, ...]:
        """`sources` checked (None: all), each once, in the configured order."""
        if sources is None:
            return self.names
        wanted = set(sources)
        unknown = [name for name in dict.fromkeys(sources) if name not in self.folders]
        if unknown:
            raise UnknownSource(unknown, self.names)
        return tuple(name for name in self.names if name in wanted)

    def _search(
        self,
        match: str,
        sources: tuple[str, ...],
        limit: int,
        wanted: array[float] | None,
    ) -> list[Hit]:
        bm25 = self._bm25(match, sources, limit if wanted is None else CANDIDATES)
        if wanted is None:
            return [hit for _, hit in bm25]
        near = self._nearest(wanted, sources)
        fused: dict[int, float] = {}
        for ranking in ([pid for pid, _ in bm25], near):
            for rank, pid in enumerate(ranking, start=1):
                fused[pid] = fused.get(pid, 0.0) + 1.0 / (RRF_K + rank)
        best = sorted(fused, key=lambda pid: (-fused[pid], pid))[:limit]
        found = dict(bm25)
        missing = [pid for pid in best if pid not in found]
        found.update(self._hits_by_id(missing))
        return [replace(found[pid], score=round(fused[pid], 6)) for pid in best]

    def _bm25(
        self, match: str, sources: tuple[str, ...], limit: int
    ) -> list[tuple[int, Hit]]:
        """The best `limit` passages by BM25, in two steps: the ranking alone
        (over every passage that matches: no join when every source is
        searched), then snippets and details for those few."""
        weights = ", ".join(str(w) for w in BM25_WEIGHTS)
        score = f"bm25(passage_text, {weights})"
        if sources == self.names:  # the index holds no other source's passages
            ranked = self._connection.execute(
                f"SELECT rowid, {score} AS bm25 FROM passage_text"
                " WHERE passage_text MATCH ? ORDER BY bm25, rowid LIMIT ?",
                (match, limit),
            ).fetchall()
        else:
            marks = ", ".join("?" * len(sources))
            ranked = self._connection.execute(
                f"SELECT p.id, {score} AS bm25 FROM passage_text"
                " JOIN passages p ON p.id = passage_text.rowid"
                " JOIN documents d ON d.id = p.document_id"
                f" WHERE passage_text MATCH ? AND d.source IN ({marks})"
                " ORDER BY bm25, p.id LIMIT ?",
                (match, *sources, limit),
            ).fetchall()
        if not ranked:
            return []
        marks = ", ".join("?" * len(ranked))
        rows = self._connection.execute(
            "SELECT p.id, d.source, d.path, d.title, p.location, p.body,"
            f" snippet(passage_text, 0, '**', '**', '…', {SNIPPET_TOKENS})"
            " FROM passage_text"
            " JOIN passages p ON p.id = passage_text.rowid"
            " JOIN documents d ON d.id = p.document_id"
            f" WHERE passage_text MATCH ? AND passage_text.rowid IN ({marks})",
            (match, *(pid for pid, _ in ranked)),
        )
        details = {
            pid: (source, path, title, where, body, snippet)
            for pid, source, path, title, where, body, snippet in rows
        }
        return [
            (pid, Hit(*details[pid], score=round(-bm25, 4))) for pid, bm25 in ranked
        ]

    def _nearest(self, wanted: array[float], sources: tuple[str, ...]) -> list[int]:
        scored: list[tuple[float, int]] = []
        for source in sources:
            for pid, vector in self._source_vectors(source):
                cosine = dot(wanted, vector)
                if cosine > 0:
                    scored.append((cosine, pid))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [pid for _, pid in scored[:CANDIDATES]]

    def _source_vectors(self, source: str) -> list[tuple[int, array[float]]]:
        cached = self._vectors.get(source)
        if cached is None:
            rows = self._connection.execute(
                "SELECT v.passage_id, v.vector FROM vectors v"
                " JOIN passages p ON p.id = v.passage_id"
                " JOIN documents d ON d.id = p.document_id"
                " WHERE d.source = ? ORDER BY v.passage_id",
                (source,),
            )
            cached = [(pid, unpack(blob)) for pid, blob in rows]
            self._vectors[source] = cached
        return cached

    def _hits_by_id(self, ids: list[int]) -> dict[int, Hit]:
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        rows = self._connection.execute(
            "SELECT p.id, d.source, d.path, d.title, p.location, p.body"
            " FROM passages p JOIN documents d ON d.id = p.document_id"
            f" WHERE p.id IN ({marks})",
            ids,
        )
        return {
            pid: Hit(source, path, title, where, body, _opening(body), 0.0)
            for pid, source, path, title, where, body in rows
        }

    # --- plumbing ------------------------------------------------------------------

    def _folder(self, source: str) -> Path:
        folder = self.folders.get(source)
        if folder is None:
            raise UnknownSource([source], self.names)
        return folder

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the index's thread. A cancelled caller stops
        waiting; the statement (a whole transaction) still completes."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))


def embedding_text(heading: str, body: str) -> str:
    """What is embedded of a passage: its headings (the document's title and
    path, the heading path), then its text."""
    return f"{heading}\n\n{body}"


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
        with _transaction(connection) as db:
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
    with _transaction(connection) as db:  # another version (or none): rebuilt
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


def _insert(db: sqlite3.Connection, source: str, parsed: _Parsed, now: float) -> int:
    entry = parsed.entry
    cursor = db.execute(
        "INSERT INTO documents"
        " (source, path, kind, title, size, mtime_ns, sha256, indexed_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            source,
            entry.relative,
            parsed.kind,
            parsed.title,
            entry.size,
            entry.mtime_ns,
            parsed.sha256,
            now,
        ),
    )
    document_id = cursor.lastrowid
    db.executemany(
        "INSERT INTO passages (document_id, ordinal, location, heading, body)"
        " VALUES (?, ?, ?, ?, ?)",
        [
            (
                document_id,
                p.ordinal,
                p.location,
                "\n".join(dict.fromkeys([parsed.title, entry.relative, p.heading])),
                p.text,
            )
            for p in parsed.passages
        ],
    )
    return len(parsed.passages)


def _prepare(
    root: Path, entry: FileEntry, old: _Known | None, max_bytes: int
) -> _Parsed | _Same:
    """Read, hash and (when its bytes changed) parse one file (a thread)."""
    data = read_document(root, entry.relative, max_bytes)
    sha256 = hashlib.sha256(data).hexdigest()
    if old is not None and old.sha256 == sha256:
        return _Same(entry)
    document = parse_document(entry.kind, data, name=entry.relative)
    passages = split_passages(document)
    return _Parsed(entry, sha256, document.kind, document.title, passages)


def _fetch(
    connection: sqlite3.Connection, sql: str, parameters: Sequence[Any]
) -> list[Any]:
    return connection.execute(sql, parameters).fetchall()


def _opening(body: str) -> str:
    words = body.split()
    head = " ".join(words[:SNIPPET_TOKENS])
    return head + ("…" if len(words) > SNIPPET_TOKENS else "")


@contextlib.contextmanager
def _transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A transaction on an autocommit connection: committed, or rolled back."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
