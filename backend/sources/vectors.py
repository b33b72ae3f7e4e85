"""Vectors: the passages embedded, and a query compared with them.

With an `Embedder` (`embeddings.py`), a refresh embeds the source's passages
that have no vector yet (`embedding_text`: their headings, then their
text), `EMBED_CHUNK` at a time, and stores each chunk as it comes (table
`vectors`: normalised float32, with the model's name). A search embeds the
query and ranks the searched sources' passages by cosine (`nearest`). A
source's vectors are read once, and kept until its passages change.
"""

from __future__ import annotations

import sqlite3
from array import array

from backend.errors import LLMError
from backend.sources.documents import Problem
from backend.sources.embeddings import Embedder, dot, normalised, pack, unpack
from backend.sources.schema import Database, transaction

EMBED_CHUNK = 256
"""Passages embedded (then stored) at a time during a refresh."""


def embedding_text(heading: str, body: str) -> str:
    """What is embedded of a passage: its headings (the document's title and
    path, the heading path), then its text."""
    return f"{heading}\n\n{body}"


class Vectors:
    """The passages' vectors through one `Embedder`, and those read so far."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._read: dict[str, list[tuple[int, array[float]]]] = {}
        """Per source, its passages' vectors (on the index's thread only)."""

    @property
    def model(self) -> str:
        return self._embedder.model

    async def aclose(self) -> None:
        await self._embedder.aclose()

    def forget(self, source: str) -> None:
        """`source`'s passages changed (on the index's thread)."""
        self._read.pop(source, None)

    async def embed_missing(
        self, database: Database, source: str
    ) -> tuple[int, Problem | None]:
        """Embed the source's passages that have no vector yet, `EMBED_CHUNK`
        at a time, each chunk stored as it comes (a failure is reported, and
        the next refresh goes on from there)."""
        missing = await database.run(_unembedded, source)
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
            await database.run(self._store, source, rows)
            embedded += len(rows)
        return embedded, None

    async def embed_query(self, query: str) -> array[float]:
        """`query`'s vector, normalised; an `LLMError` when that fails."""
        vector = (await self._embedder.embed([query.strip()]))[0]
        return normalised(vector)

    def nearest(
        self,
        connection: sqlite3.Connection,
        wanted: array[float],
        sources: tuple[str, ...],
        limit: int,
    ) -> list[int]:
        """The `limit` passages of `sources` nearest `wanted` (a positive
        cosine), nearest first (the index's thread)."""
        scored: list[tuple[float, int]] = []
        for source in sources:
            for pid, vector in self._source_vectors(connection, source):
                cosine = dot(wanted, vector)
                if cosine > 0:
                    scored.append((cosine, pid))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [pid for _, pid in scored[:limit]]

    def _source_vectors(
        self, connection: sqlite3.Connection, source: str
    ) -> list[tuple[int, array[float]]]:
        cached = self._read.get(source)
        if cached is None:
            rows = connection.execute(
                "SELECT v.passage_id, v.vector FROM vectors v"
                " JOIN passages p ON p.id = v.passage_id"
                " JOIN documents d ON d.id = p.document_id"
                " WHERE d.source = ? ORDER BY v.passage_id",
                (source,),
            )
            cached = [(pid, unpack(blob)) for pid, blob in rows]
            self._read[source] = cached
        return cached

    def _store(
        self,
        connection: sqlite3.Connection,
        source: str,
        rows: list[tuple[int, bytes]],
    ) -> None:
        model = self.model
        with transaction(connection) as db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors (passage_id, model, vector)"
                " VALUES (?, ?, ?)",
                [(pid, model, blob) for pid, blob in rows],
            )
        self.forget(source)


def _unembedded(connection: sqlite3.Connection, source: str) -> list[tuple[int, str]]:
    rows = connection.execute(
        "SELECT p.id, p.heading, p.body FROM passages p"
        " JOIN documents d ON d.id = p.document_id"
        " LEFT JOIN vectors v ON v.passage_id = p.id"
        " WHERE d.source = ? AND v.passage_id IS NULL ORDER BY p.id",
        (source,),
    ).fetchall()
    return [(pid, embedding_text(heading, body)) for pid, heading, body in rows]
