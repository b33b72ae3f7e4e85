"""Search: full-text indexes over conversations' titles and messages.

SQLite: `search_docs` (one row per title and per user or assistant
message), the FTS5 table `search_index` over it, and triggers that keep
both in step with `conversations` and `messages`; the rows already there
are indexed here. PostgreSQL: GIN expression indexes (`store/sql_search.py`
queries them with the same expressions). Neither is in `schema.metadata`:
they are one engine's, named `search_*` (`schema.ENGINE_ONLY`).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

SEARCHED_CHARS = 100_000
"""As `backend.store.search.SEARCHED_CHARS` (a migration is frozen in time)."""
SEARCHED = "role IN ('user', 'assistant')"
TITLE = -1

_SQLITE_TABLES = [
    """CREATE TABLE search_docs (
        id INTEGER PRIMARY KEY,
        conversation_id VARCHAR(64) NOT NULL,
        position INTEGER NOT NULL,
        body TEXT NOT NULL,
        CONSTRAINT search_docs_at UNIQUE (conversation_id, position)
    )""",
    """CREATE VIRTUAL TABLE search_index USING fts5(
        body, content='search_docs', content_rowid='id',
        tokenize='unicode61 remove_diacritics 2'
    )""",
]

_MESSAGE_DOC = f"""INSERT INTO search_docs (conversation_id, position, body)
    SELECT new.conversation_id, new.position, substr(new.content, 1, {SEARCHED_CHARS})
    WHERE new.{SEARCHED} AND new.content <> '';"""
_MESSAGE_GONE = """DELETE FROM search_docs
    WHERE conversation_id = old.conversation_id AND position = old.position;"""
_TITLE_DOC = f"""INSERT INTO search_docs (conversation_id, position, body)
    SELECT new.id, {TITLE}, new.title WHERE new.title <> '';"""
_TITLE_GONE = f"""DELETE FROM search_docs
    WHERE conversation_id = old.id AND position = {TITLE};"""

_SQLITE_TRIGGERS = {
    # the FTS5 index follows its documents (an external-content table)
    "search_docs_added": "AFTER INSERT ON search_docs BEGIN "
    "INSERT INTO search_index (rowid, body) VALUES (new.id, new.body); END",
    "search_docs_removed": "AFTER DELETE ON search_docs BEGIN "
    "INSERT INTO search_index (search_index, rowid, body) "
    "VALUES ('delete', old.id, old.body); END",
    # messages: added, rewritten in place (an upsert), deleted (an edit or a
    # reset cuts the history; a deleted conversation's cascade)
    "search_message_added": f"AFTER INSERT ON messages BEGIN {_MESSAGE_DOC} END",
    "search_message_changed": "AFTER UPDATE OF role, content ON messages "
    "WHEN old.role IS NOT new.role OR old.content IS NOT new.content "
    f"BEGIN {_MESSAGE_GONE} {_MESSAGE_DOC} END",
    "search_message_removed": f"AFTER DELETE ON messages BEGIN {_MESSAGE_GONE} END",
    # titles
    "search_title_added": f"AFTER INSERT ON conversations BEGIN {_TITLE_DOC} END",
    "search_title_changed": "AFTER UPDATE OF title ON conversations "
    f"WHEN old.title IS NOT new.title BEGIN {_TITLE_GONE} {_TITLE_DOC} END",
    "search_conversation_removed": "AFTER DELETE ON conversations BEGIN "
    "DELETE FROM search_docs WHERE conversation_id = old.id; END",
}

_SQLITE_EXISTING = [
    f"""INSERT INTO search_docs (conversation_id, position, body)
        SELECT id, {TITLE}, title FROM conversations WHERE title <> ''""",
    f"""INSERT INTO search_docs (conversation_id, position, body)
        SELECT conversation_id, position, substr(content, 1, {SEARCHED_CHARS})
        FROM messages WHERE {SEARCHED} AND content <> ''""",
]

_POSTGRESQL_INDEXES = {
    "search_titles": "ON conversations USING gin (to_tsvector('simple', title))",
    "search_messages": "ON messages USING gin "
    f"(to_tsvector('simple', left(content, {SEARCHED_CHARS}))) WHERE {SEARCHED}",
}


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name, definition in _POSTGRESQL_INDEXES.items():
            op.execute(f"CREATE INDEX {name} {definition}")
        return
    for statement in _SQLITE_TABLES:
        op.execute(statement)
    for name, definition in _SQLITE_TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {definition}")
    for statement in _SQLITE_EXISTING:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in _POSTGRESQL_INDEXES:
            op.execute(f"DROP INDEX {name}")
        return
    for name in _SQLITE_TRIGGERS:
        op.execute(f"DROP TRIGGER {name}")
    op.execute("DROP TABLE search_index")
    op.execute("DROP TABLE search_docs")
