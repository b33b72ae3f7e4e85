"""The schema's revision, read without Alembic.

Alembic (with Mako, which it loads) is only needed to change a schema. A
server starting on a database already at `HEAD` asks one plain query
(`at_head`) and never imports it; `migrate.py` runs the migrations
otherwise. `HEAD` is written here so that knowing it costs nothing: a test
keeps it equal to the head of `migrations/versions`.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect, text

HEAD = "0013"
"""The newest revision in `migrations/versions` (Alembic's head)."""

VERSION_TABLE = "alembic_version"
"""Where Alembic records the revision a database is at."""


def stored(connection: Connection) -> list[str]:
    """The revisions `VERSION_TABLE` holds (run with `run_sync`): none when
    the database was never migrated (no table, or an empty one)."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return []
    rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))
    return [str(version) for version in rows.scalars()]


def at_head(connection: Connection) -> bool:
    """Whether the database is at `HEAD`, with nothing to migrate."""
    return stored(connection) == [HEAD]
