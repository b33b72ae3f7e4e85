"""The index of the data sources: SQLite FTS5, BM25, optionally hybrid.

`SourceIndex` is the handle the rest of the server holds. It opens the
index's SQLite file (`schema.py`: the tables, their version, the one
thread every statement runs on), brings a source's part of it in step with
its folder (`refresh.py`: incremental, one source at a time), tells what a
source holds and refused, and searches: the user's words quoted
(`query.py`), ranked by BM25 and — with an `Embedder` (`vectors.py`) —
fused with the cosine ranking by reciprocal rank (`ranking.py`).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from backend.errors import LLMError, LoopwireError
from backend.sources.documents import Problem
from backend.sources.embeddings import Embedder
from backend.sources.query import match_expression
from backend.sources.ranking import CANDIDATES, Hit, best_by_bm25, hits_by_id, rrf_fuse
from backend.sources.refresh import Limits, Refresh, RefreshReport
from backend.sources.schema import Database, fetch
from backend.sources.vectors import Vectors

log = logging.getLogger(__name__)

DEFAULT_LIMITS = Limits()


class UnknownSource(LoopwireError):
    """A source name that is not configured."""

    def __init__(self, names: Sequence[str], available: Sequence[str]) -> None:
        listed = ", ".join(available) or "none"
        super().__init__(
            f"unknown data source(s): {', '.join(names)}; available: {listed}"
        )
        self.available = tuple(available)


class SourceIndex:
    """The index of named folders. Open with `await SourceIndex.open(...)`."""

    def __init__(
        self,
        folders: dict[str, Path],
        database: Database,
        *,
        limits: Limits,
        vectors: Vectors | None,
        clock: Callable[[], float],
    ) -> None:
        self.folders = dict(folders)
        self.limits = limits
        self._database = database
        self._vectors = vectors
        self._clock = clock
        self._refreshing = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: str | Path,
        folders: dict[str, Path],
        *,
        limits: Limits = DEFAULT_LIMITS,
        embedder: Embedder | None = None,
        clock: Callable[[], float] = time.time,
    ) -> SourceIndex:
        """The index in the SQLite file `path` (`:memory:`: in memory) for
        `folders` (name → folder); documents of other sources are dropped."""
        model = embedder.model if embedder is not None else None
        database = await Database.open(str(path), list(folders), model)
        vectors = Vectors(embedder) if embedder is not None else None
        return cls(folders, database, limits=limits, vectors=vectors, clock=clock)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.folders)

    @property
    def hybrid(self) -> bool:
        return self._vectors is not None

    async def aclose(self) -> None:
        """Close the embedder and the database (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._vectors is not None:
                await self._vectors.aclose()
        finally:
            await self._database.close()

    async def refresh(self, source: str) -> RefreshReport:
        """Bring `source`'s part of the index in step with its folder."""
        folder = self._folder(source)
        async with self._refreshing:
            started = time.perf_counter()
            report = await Refresh(
                self._database,
                source,
                limits=self.limits,
                clock=self._clock,
                vectors=self._vectors,
            ).run(folder)
            seconds = round(time.perf_counter() - started, 6)
            return replace(report, seconds=seconds)

    async def refresh_all(self) -> list[RefreshReport]:
        return [await self.refresh(name) for name in self.folders]

    async def problems(self, source: str) -> list[Problem]:
        """The files of `source` its last refresh refused, and why."""
        self._folder(source)
        rows = await self._database.run(
            fetch,
            "SELECT path, reason, message FROM problems"
            " WHERE source = ? ORDER BY rowid",
            (source,),
        )
        return [Problem(*row) for row in rows]

    async def documents(self, source: str) -> dict[str, int]:
        """The indexed documents of `source`: relative path → passage count."""
        self._folder(source)
        rows = await self._database.run(
            fetch,
            "SELECT d.path, COUNT(p.id) FROM documents d"
            " LEFT JOIN passages p ON p.document_id = d.id"
            " WHERE d.source = ? GROUP BY d.id ORDER BY d.path",
            (source,),
        )
        return {path: count for path, count in rows}

    async def document(self, source: str, path: str) -> Path | None:
        """The file of the indexed document `path` of `source` (None if it
        is not one, or no longer inside the source's folder)."""
        folder = self._folder(source)
        rows = await self._database.run(
            fetch,
            "SELECT 1 FROM documents WHERE source = ? AND path = ?",
            (source, path),
        )
        if not rows:
            return None
        file = (folder / path).resolve()
        if not file.is_relative_to(folder.resolve()) or not file.is_file():
            return None
        return file

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
        if self._vectors is not None:
            try:
                wanted = await self._vectors.embed_query(query)
            except LLMError as exc:
                log.warning("search without embeddings this time: %s", exc)
        return await self._database.run(self._search, match, chosen, limit, wanted)

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
        connection: sqlite3.Connection,
        match: str,
        sources: tuple[str, ...],
        limit: int,
        wanted: array[float] | None,
    ) -> list[Hit]:
        """BM25 alone, or fused with the cosine ranking (the index's thread)."""
        scope = None if sources == self.names else sources
        bm25 = best_by_bm25(
            connection, match, scope, limit if wanted is None else CANDIDATES
        )
        if wanted is None:
            return [hit for _, hit in bm25]
        assert self._vectors is not None
        near = self._vectors.nearest(connection, wanted, sources, CANDIDATES)
        best = rrf_fuse([pid for pid, _ in bm25], near)[:limit]
        found = dict(bm25)
        found.update(hits_by_id(connection, [p for p, _ in best if p not in found]))
        return [replace(found[pid], score=round(score, 6)) for pid, score in best]

    def _folder(self, source: str) -> Path:
        folder = self.folders.get(source)
        if folder is None:
            raise UnknownSource([source], self.names)
        return folder
