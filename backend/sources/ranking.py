"""Ranking: the passages that best match a query, best first.

BM25 over the FTS5 index (`best_by_bm25`: a passage's text and headings
weighted by `BM25_WEIGHTS`, a snippet around the matched words); with
embeddings, that ranking and the cosine one (`vectors.py`) are fused by
reciprocal rank (`rrf_fuse`, a pure function). The functions that take a
connection run on the index's thread (`schema.Database.run`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass


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


BM25_WEIGHTS = (1.0, 0.75)
"""Of a passage's text and of its headings (the document's title and path
count as headings)."""
CANDIDATES = 50
"""Passages each ranking offers to the fusion."""
RRF_K = 60
SNIPPET_TOKENS = 24


def rrf_fuse(*rankings: Sequence[int], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each id of `rankings` (each best first) with
    the sum of `1 / (k + rank)` over the rankings it is in, ranks from 1;
    best first, a tie to the smaller id."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking, start=1):
            fused[pid] = fused.get(pid, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def best_by_bm25(
    connection: sqlite3.Connection,
    match: str,
    sources: tuple[str, ...] | None,
    limit: int,
) -> list[tuple[int, Hit]]:
    """The best `limit` passages of `sources` (None: every source, so no
    join) by BM25, in two steps: the ranking alone (over every passage that
    matches), then snippets and details for those few."""
    ranked = connection.execute(
        _ranking_sql(sources), (match, *(sources or ()), limit)
    ).fetchall()
    if not ranked:
        return []
    marks = ", ".join("?" * len(ranked))
    rows = connection.execute(
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
    return [(pid, Hit(*details[pid], score=round(-bm25, 4))) for pid, bm25 in ranked]


def hits_by_id(connection: sqlite3.Connection, ids: list[int]) -> dict[int, Hit]:
    """The passages `ids` as hits (scored 0, the snippet their opening words)."""
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    rows = connection.execute(
        "SELECT p.id, d.source, d.path, d.title, p.location, p.body"
        " FROM passages p JOIN documents d ON d.id = p.document_id"
        f" WHERE p.id IN ({marks})",
        ids,
    )
    return {
        pid: Hit(source, path, title, where, body, _opening(body), 0.0)
        for pid, source, path, title, where, body in rows
    }


def _ranking_sql(sources: tuple[str, ...] | None) -> str:
    """The BM25 ranking's statement: over every passage that matches, or
    (not None) over those of `sources` only."""
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    score = f"bm25(passage_text, {weights})"
    if sources is None:  # the index holds no other source's passages
        return (
            f"SELECT rowid, {score} AS bm25 FROM passage_text"
            " WHERE passage_text MATCH ? ORDER BY bm25, rowid LIMIT ?"
        )
    marks = ", ".join("?" * len(sources))
    return (
        f"SELECT p.id, {score} AS bm25 FROM passage_text"
        " JOIN passages p ON p.id = passage_text.rowid"
        " JOIN documents d ON d.id = p.document_id"
        f" WHERE passage_text MATCH ? AND d.source IN ({marks})"
        " ORDER BY bm25, p.id LIMIT ?"
    )


def _opening(body: str) -> str:
    words = body.split()
    head = " ".join(words[:SNIPPET_TOKENS])
    return head + ("…" if len(words) > SNIPPET_TOKENS else "")
