"""The schema's revision told without Alembic (`store/revision.py`): a
database already at the head opens with one query and no migration; a new
or older one still migrates through Alembic; on PostgreSQL, instances
starting together still migrate once."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import Connection

from backend.store import migrate, revision
from backend.store.sql import SqlStore


def test_head_is_the_newest_migration() -> None:
    """`HEAD` is Alembic's head of `migrations/versions`: a migration added
    without moving it fails here."""
    assert migrate.head() == revision.HEAD


def _to_0012(connection: Connection) -> None:
    migrate.upgrade(connection, "0012")


async def test_only_a_database_migrated_to_the_head_is_at_it(database_url: str) -> None:
    """A new database stores no revision and is not at the head, nor is one
    at `0012`; once opened it is at `HEAD`, as Alembic reads it too."""
    store = SqlStore(database_url)
    try:
        assert await store.run_sync(revision.stored) == []
        assert await store.run_sync(revision.at_head) is False
        await store.run_sync(_to_0012)
        assert await store.run_sync(revision.stored) == ["0012"]
        assert await store.run_sync(revision.at_head) is False
        await store.open()
        assert await store.run_sync(revision.stored) == [revision.HEAD]
        assert await store.run_sync(revision.at_head) is True
        assert await store.revision() == revision.HEAD
    finally:
        await store.close()


@pytest.fixture
def upgrades(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The revisions `migrate.upgrade` is asked for, in order (it still runs)."""
    asked: list[str] = []
    real = migrate.upgrade

    def counted(connection: Connection, target: str = "head") -> None:
        asked.append(target)
        real(connection, target)

    monkeypatch.setattr(migrate, "upgrade", counted)
    return asked


async def test_alembic_migrates_only_a_database_behind_the_head(
    database_url: str, upgrades: list[str]
) -> None:
    """A database at `0012` is brought to the head through Alembic; opened
    again, it is not handed to Alembic at all."""
    behind = SqlStore(database_url)
    await behind.run_sync(_to_0012)
    upgrades.clear()
    await behind.open()
    await behind.close()
    assert upgrades == ["head"]

    again = SqlStore(database_url)
    try:
        await again.open()
        assert await again.revision() == revision.HEAD
    finally:
        await again.close()
    assert upgrades == ["head"]


async def test_instances_starting_together_migrate_once(
    pg_database_url: str, upgrades: list[str]
) -> None:
    """Three instances opening a new PostgreSQL database at once take turns
    on the migration lock: the first migrates, the others find the head."""
    stores = [SqlStore(pg_database_url) for _ in range(3)]
    try:
        await asyncio.gather(*(store.open() for store in stores))
        assert upgrades == ["head"]
        for store in stores:
            assert await store.revision() == revision.HEAD
    finally:
        for store in stores:
            await store.close()
