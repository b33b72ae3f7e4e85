"""The databases store tests run on: SQLite in a file, and a real PostgreSQL.

`database_url` is parametrized over both. Each PostgreSQL test gets a fresh
database on the server the test session started (`postgres_url`, from
`devcluster/postgres_server.py`), dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

from backend.store.sql import SqlStore


def _admin_dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


@pytest.fixture(params=["sqlite", "postgresql"])
async def database_url(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'loopwire.db'}"
        return
    async for url in _fresh(request.getfixturevalue("postgres_url")):
        yield url


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[SqlStore]:
    """A `SqlStore` opened (migrated) on `database_url`, closed afterwards."""
    opened = SqlStore(database_url)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def pg_database_url(postgres_url: str) -> AsyncIterator[str]:
    """A fresh PostgreSQL database only (what several instances share)."""
    async for url in _fresh(postgres_url):
        yield url


async def _fresh(server: str) -> AsyncIterator[str]:
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(_admin_dsn(server))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield f"{server.rsplit('/', 1)[0]}/{name}"
    admin = await asyncpg.connect(_admin_dsn(server))
    try:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@asynccontextmanager
async def stored(url: str) -> AsyncIterator[SqlStore]:
    """The database at `url` opened from the test's side (what servers wrote
    there, read back), closed afterwards."""
    store = SqlStore(url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
