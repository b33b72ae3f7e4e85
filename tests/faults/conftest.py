"""Servers of the fault test's own, so that what it does to them (FLUSHALL,
CLIENT PAUSE, a restart) disturbs no other test, and a proxy to inject more.

- `own_redis` (`OwnRedis`): a Redis started for the test, with an asyncio
  client (`client`), `flushall()`, `pause(ms)` and `restart()`;
- `own_postgres` (`OwnPostgres`): a PostgreSQL started for the test
  (`url`: its `loopwire` database), `restart()`ed on the same port with its
  data, or `halt()`ed and `start_again()`ed;
- `pg_proxy`: a started `PgProxy` in front of `own_postgres`;
- `proxied_database_url`: `own_postgres.url` through `pg_proxy`.

Skipped, with the reason, where the servers cannot run; under CI they must.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest
import redis.asyncio as aioredis

from devcluster import postgres_server, redis_server
from devcluster.postgres_server import PostgresServer, ShutdownMode
from devcluster.redis_server import RedisServer
from tests.faults.pg_proxy import PgProxy


def _require(reason: str | None, what: str) -> None:
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI installs {what}, yet: {reason}")
        pytest.skip(reason)


def dsn(url: str) -> str:
    """asyncpg's form of a SQLAlchemy PostgreSQL URL."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


class OwnRedis:
    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.client: aioredis.Redis = aioredis.from_url(server.url)
        self.paused_until = 0.0
        """`time.monotonic()` when the last `pause()` ends."""

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port

    async def flushall(self) -> None:
        """Every key gone: leases, inboxes, all of it."""
        await self.client.flushall()

    async def pause(self, ms: int) -> None:
        """`CLIENT PAUSE ms ALL`: every client's commands wait `ms`
        milliseconds (this client's too). It cannot be cut short: Redis 7.0
        holds CLIENT UNPAUSE as well under ALL."""
        await self.client.client_pause(ms, all=True)
        self.paused_until = time.monotonic() + ms / 1000

    async def halt(self) -> None:
        """Redis gone (its port closed) until `start_again()`."""
        await asyncio.to_thread(self.server.halt)
        await self.client.connection_pool.disconnect()

    async def start_again(self) -> None:
        """The same port again, empty."""
        await asyncio.to_thread(self.server.start_again)

    async def restart(self) -> float:
        """`halt()` then `start_again()`; the seconds it took."""
        started = time.monotonic()
        await self.halt()
        await self.start_again()
        return time.monotonic() - started

    async def close(self) -> None:
        await self.client.aclose()
        await asyncio.to_thread(self.server.halt)  # quicker than stop() under root
        await asyncio.to_thread(self.server.stop)


class OwnPostgres:
    def __init__(self, server: PostgresServer) -> None:
        self.server = server

    @property
    def url(self) -> str:
        """`postgresql+asyncpg://…/loopwire` (what loopwire takes)."""
        return self.server.url

    @property
    def dsn(self) -> str:
        """The same for asyncpg."""
        return dsn(self.server.url)

    @property
    def port(self) -> int:
        return self.server.port

    async def connect(self) -> asyncpg.Connection:
        """A direct connection (not through a proxy); close it."""
        return await asyncpg.connect(self.dsn)

    async def halt(self, mode: ShutdownMode = "fast") -> None:
        """Stop the server, keeping its port and data (see `PostgresServer.halt`)."""
        await asyncio.to_thread(self.server.halt, mode)

    async def start_again(self) -> None:
        await asyncio.to_thread(self.server.start_again)

    async def restart(self, mode: ShutdownMode = "fast") -> float:
        """Stop (`mode`) and start again; the seconds it took."""
        started = time.monotonic()
        await asyncio.to_thread(self.server.restart, mode)
        return time.monotonic() - started


@pytest.fixture
async def own_redis() -> AsyncIterator[OwnRedis]:
    _require(redis_server.unavailable_reason(), "Redis")
    server = await asyncio.to_thread(RedisServer().start)
    own = OwnRedis(server)
    try:
        yield own
    finally:
        await own.close()


@pytest.fixture
async def own_postgres() -> AsyncIterator[OwnPostgres]:
    _require(postgres_server.unavailable_reason(), "PostgreSQL")
    server = await asyncio.to_thread(PostgresServer().start)
    try:
        yield OwnPostgres(server)
    finally:
        await asyncio.to_thread(server.stop)


@pytest.fixture
async def pg_proxy(own_postgres: OwnPostgres) -> AsyncIterator[PgProxy]:
    async with PgProxy("127.0.0.1", own_postgres.port) as proxy:
        yield proxy


@pytest.fixture
def proxied_database_url(own_postgres: OwnPostgres, pg_proxy: PgProxy) -> str:
    """`own_postgres.url` through `pg_proxy` (what a loopwire instance gets)."""
    return pg_proxy.url_for(own_postgres.url)
