"""Schema migrations with Alembic, run on a connection loopwire already holds.

`SqlStore.open` calls `upgrade` at start-up, so a database made by an older
loopwire is brought up to date in place; `loopwire db upgrade` does the same
from the command line, and `loopwire db current` tells the revision.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Apply every migration up to `revision` (run with `run_sync`)."""
    command.upgrade(_config(connection), revision)


def current(connection: Connection) -> str | None:
    """The revision the database is at (None: never migrated)."""
    return MigrationContext.configure(connection).get_current_revision()


def head() -> str:
    """The newest revision this loopwire knows."""
    script = ScriptDirectory.from_config(_config_without_connection())
    revision = script.get_current_head()
    assert revision is not None
    return revision


def _config_without_connection() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config
