"""Schema migrations with Alembic, run on a connection loopwire already holds.

`SqlStore.open` calls `upgrade` at start-up, so a database made by an older
loopwire is brought up to date in place; `loopwire db upgrade` does the same
from the command line, and `loopwire db current` tells the revision. A
database already at the head is told without this module (`revision.py`):
Alembic is imported only when there is something to migrate.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_ALEMBIC = logging.getLogger("alembic")

log = logging.getLogger(__name__)


def _config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Apply every migration up to `revision` (run with `run_sync`): one
    line of log when the schema changed, none when it was up to date (what
    Alembic says of each step is for `loopwire db upgrade`, at DEBUG)."""
    before = current(connection)
    with _quiet(_ALEMBIC):
        command.upgrade(_config(connection), revision)
    after = current(connection)
    if after != before:
        if before is None:
            log.info("database schema created (revision %s)", after)
        else:
            log.info("database schema upgraded from %s to %s", before, after)


def current(connection: Connection) -> str | None:
    """The revision the database is at (None: never migrated)."""
    with _quiet(_ALEMBIC):
        return MigrationContext.configure(connection).get_current_revision()


def head() -> str:
    """The newest revision this loopwire knows."""
    script = ScriptDirectory.from_config(_config_without_connection())
    revision = script.get_current_head()
    assert revision is not None
    return revision


@contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """`logger` at WARNING meanwhile, unless it was asked for more (DEBUG)."""
    level = logger.level
    if logger.getEffectiveLevel() > logging.DEBUG:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _config_without_connection() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config
