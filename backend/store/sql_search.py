"""The statements behind `SqlStore.search` (what a query means: `search.py`).

SQLite: an FTS5 table, `search_index` (tokenizer `unicode61
remove_diacritics 2`), over `search_docs`, one row per indexed text: a
conversation's title (at position `TITLE`) and each user and assistant
message. Triggers (migration 0008) keep both in step with `messages` and
`conversations`, so every write, edit, reset, retitle and delete (the
cascade from a conversation too) updates the index in its own transaction.
Ranked by `bm25`.

PostgreSQL: GIN indexes on `to_tsvector('simple', …)` of the titles and
of the user and assistant messages, matched with a `to_tsquery` built from
the words; ranked by `ts_rank`.

Both: every word required, the last one as a prefix; the owner's
conversations only; each conversation once, at its best-ranked text (the
earlier one among equals, the title first); best first, then the most
recently active.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Row, text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.records import ConversationRecord
from backend.store.search import (
    SEARCHED_CHARS,
    TITLE,
    SearchHit,
    fts5_query,
    query_words,
    snippet,
    tsquery,
)

_SQLITE_HITS = """
SELECT d.conversation_id AS cid, d.position AS position, d.body AS body,
       bm25(search_index) AS score
FROM search_index
JOIN search_docs AS d ON d.id = search_index.rowid
JOIN conversations AS c ON c.id = d.conversation_id
WHERE search_index MATCH :query AND c.owner = :owner
"""

TITLE_VECTOR = "to_tsvector('simple', title)"
MESSAGE_VECTOR = f"to_tsvector('simple', left(content, {SEARCHED_CHARS}))"
"""The indexed expressions (migration 0008); a query must use them as they are."""
SEARCHED_ROLES = "role IN ('user', 'assistant')"

_POSTGRESQL_HITS = f"""
SELECT c.id AS cid, {TITLE} AS position, c.title AS body,
       -ts_rank({TITLE_VECTOR}, q.query, 1) AS score
FROM conversations AS c, (SELECT to_tsquery('simple', :query) AS query) AS q
WHERE c.owner = :owner AND {TITLE_VECTOR} @@ q.query
UNION ALL
SELECT m.conversation_id, m.position, left(m.content, {SEARCHED_CHARS}),
       -ts_rank({MESSAGE_VECTOR}, q.query, 1)
FROM messages AS m
JOIN conversations AS c ON c.id = m.conversation_id,
     (SELECT to_tsquery('simple', :query) AS query) AS q
WHERE c.owner = :owner AND {SEARCHED_ROLES} AND {MESSAGE_VECTOR} @@ q.query
"""

_BEST = """
WITH hits AS ({hits}),
best AS (
    SELECT cid, position, body, score,
           ROW_NUMBER() OVER (PARTITION BY cid ORDER BY score, position) AS n
    FROM hits
)
SELECT c.id, c.owner, c.title, c.created_at, c.updated_at, c.settings, c.origin,
       best.position AS hit_position, best.body AS hit_body
FROM best JOIN conversations AS c ON c.id = best.cid
WHERE best.n = 1
ORDER BY best.score, c.updated_at DESC, c.id
LIMIT :limit
"""

SQLITE_QUERY = _BEST.format(hits=_SQLITE_HITS)
POSTGRESQL_QUERY = _BEST.format(hits=_POSTGRESQL_HITS)
SQLITE = text(SQLITE_QUERY).columns(settings=JSON)
POSTGRESQL = text(POSTGRESQL_QUERY).columns(settings=JSON)
RECORD = tuple(ConversationRecord.model_fields)


async def search(
    conn: AsyncConnection, owner: str, query: str, limit: int, *, postgresql: bool
) -> list[SearchHit]:
    """`owner`'s conversations matching `query`, best first (at most `limit`)."""
    words = query_words(query)
    if not words:
        return []
    statement = POSTGRESQL if postgresql else SQLITE
    expression = tsquery(words) if postgresql else fts5_query(words)
    params = {"query": expression, "owner": owner, "limit": limit}
    rows = (await conn.execute(statement, params)).all()
    return [
        SearchHit(
            conversation=_record(row),
            position=None if row.hit_position == TITLE else int(row.hit_position),
            snippet=snippet(row.hit_body, words),
        )
        for row in rows
    ]


def _record(row: Row[Any]) -> ConversationRecord:
    return ConversationRecord.model_validate({k: row._mapping[k] for k in RECORD})
