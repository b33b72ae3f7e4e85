"""Refresh: one source's part of the index brought in step with its folder.

Incremental: a file whose size and mtime are as indexed is not read; one
whose bytes hash as indexed is not parsed again (only its size and mtime
are written); removed and refused files leave the index. Files are read
and parsed in other threads, and written `WRITE_BATCH` documents to a
transaction on the index's thread; then, with embeddings, the passages
without a vector are embedded (`vectors.py`). A folder that cannot be
walked at all keeps what is indexed of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from backend.sources.documents import DocumentRefused, Problem, read_document
from backend.sources.folders import FileEntry, scan_folder
from backend.sources.passages import Passage, split_passages
from backend.sources.readers import parse_document
from backend.sources.schema import Database, transaction
from backend.sources.vectors import Vectors

WRITE_BATCH = 64
"""Documents written per transaction."""


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


class Refresh:
    """One refresh of one source: what it has found so far, and the writes
    it has not made yet. `await Refresh(...).run(folder)`, once."""

    def __init__(
        self,
        database: Database,
        source: str,
        *,
        limits: Limits,
        clock: Callable[[], float],
        vectors: Vectors | None,
    ) -> None:
        self._database = database
        self._source = source
        self._limits = limits
        self._clock = clock
        self._vectors = vectors
        self._problems: list[Problem] = []
        self._pending = _Pending()
        self._counts = {"added": 0, "updated": 0, "unchanged": 0, "read": 0}
        self._passages = 0

    async def run(self, folder: Path) -> RefreshReport:
        source, limits = self._source, self._limits
        try:
            scan = await asyncio.to_thread(
                scan_folder,
                folder,
                max_files=limits.max_files,
                max_file_bytes=limits.max_file_bytes,
            )
        except DocumentRefused as exc:  # the folder itself: keep what is indexed
            problem = Problem(".", exc.reason, str(exc))
            await self._database.run(_set_problems, source, [problem])
            return RefreshReport(source, refused=(problem,))
        known = await self._database.run(_known, source)
        self._problems.extend(scan.problems)
        for entry in scan.files:
            await self._file(scan.root, entry, known.pop(entry.relative, None))
        self._pending.removed.extend(old.id for old in known.values())
        removed = len(self._pending.removed)
        await self._flush()
        embedded = await self._embed()
        await self._database.run(_set_problems, source, self._problems)
        counts = self._counts
        return RefreshReport(
            source,
            added=counts["added"],
            updated=counts["updated"],
            removed=removed,
            unchanged=counts["unchanged"],
            read=counts["read"],
            passages=self._passages,
            embedded=embedded,
            refused=tuple(self._problems),
        )

    async def _file(self, root: Path, entry: FileEntry, old: _Known | None) -> None:
        """One file of the folder: passed over when its size and mtime are as
        indexed, else read and (when its bytes changed) parsed."""
        if old is not None and (old.size, old.mtime_ns) == (
            entry.size,
            entry.mtime_ns,
        ):
            self._counts["unchanged"] += 1
            return
        self._counts["read"] += 1
        try:
            outcome = await asyncio.to_thread(
                _prepare, root, entry, old, self._limits.max_file_bytes
            )
        except DocumentRefused as exc:
            self._problems.append(Problem(entry.relative, exc.reason, str(exc)))
            if old is not None:
                self._pending.removed.append(old.id)
            return
        if isinstance(outcome, _Same):
            assert old is not None
            self._pending.touched.append((old.id, entry))
            self._counts["unchanged"] += 1
        else:
            self._pending.parsed.append((outcome, old.id if old else None))
            self._counts["updated" if old else "added"] += 1
        if len(self._pending) >= WRITE_BATCH:
            await self._flush()

    async def _flush(self) -> None:
        pending, self._pending = self._pending, _Pending()
        self._passages += await self._database.run(self._write, pending)

    def _write(self, connection: sqlite3.Connection, pending: _Pending) -> int:
        """One transaction: documents in, out and touched (the index's thread);
        the passages written."""
        now = self._clock()
        written = 0
        with transaction(connection) as db:
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
                written += _insert(db, self._source, parsed, now)
        if self._vectors is not None:
            self._vectors.forget(self._source)
        return written

    async def _embed(self) -> int:
        """Embed what has no vector yet; a failure is one more problem."""
        if self._vectors is None:
            return 0
        embedded, failure = await self._vectors.embed_missing(
            self._database, self._source
        )
        if failure is not None:
            self._problems.append(failure)
        return embedded


def _known(connection: sqlite3.Connection, source: str) -> dict[str, _Known]:
    rows = connection.execute(
        "SELECT path, id, size, mtime_ns, sha256 FROM documents WHERE source = ?",
        (source,),
    )
    return {path: _Known(*rest) for path, *rest in rows}


def _set_problems(
    connection: sqlite3.Connection, source: str, problems: Iterable[Problem]
) -> None:
    with transaction(connection) as db:
        db.execute("DELETE FROM problems WHERE source = ?", (source,))
        db.executemany(
            "INSERT INTO problems (source, path, reason, message) VALUES (?, ?, ?, ?)",
            [(source, p.path, p.reason, p.message) for p in problems],
        )


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
