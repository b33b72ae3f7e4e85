"""The throwaway PostgreSQL server the tests start (devcluster/postgres_server.py).

Each test asks for `postgres_url`, so all of them are skipped (or, under CI,
fail) the same way where PostgreSQL cannot run.
"""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import asyncpg
import pytest

from devcluster import postgres_server as pg_server
from devcluster.postgres_server import PostgresServer


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def _accepts_connections(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def test_session_server_answers_on_loopback_only(postgres_url: str) -> None:
    """The session PostgreSQL server listens only on 127.0.0.1, off the default port."""
    assert postgres_url.startswith("postgresql+asyncpg://loopwire@127.0.0.1:")
    assert postgres_url.endswith("/loopwire")
    assert not postgres_url.endswith(":5432/loopwire")
    connection = await asyncpg.connect(_dsn(postgres_url))
    try:
        assert await connection.fetchval("select 1") == 1
        assert await connection.fetchval("show listen_addresses") == "127.0.0.1"
        assert await connection.fetchval("select current_database()") == "loopwire"
        assert await connection.fetchval("select current_user") == "loopwire"
    finally:
        await connection.close()


def test_a_second_server_stops_cleanly(postgres_url: str) -> None:
    """A second server stops, freeing its port and folder; a second stop is harmless."""
    server = PostgresServer()
    with server:
        directory = server._dir
        assert directory is not None and directory.is_dir()
        assert server.url != postgres_url
        assert server.url.endswith(f"127.0.0.1:{server.port}/loopwire")
        assert _accepts_connections(server.port)
    assert not directory.exists()
    assert not _accepts_connections(server.port)
    server.stop()  # a second stop does nothing


def test_a_failed_start_cleans_up(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start that fails on a busy port shows the server log and removes its folder."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    taken = int(busy.getsockname()[1])
    monkeypatch.setattr(pg_server, "_free_port", lambda: taken)
    made: list[Path] = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(prefix: str) -> str:
        made.append(Path(real_mkdtemp(prefix=prefix)))
        return str(made[-1])

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    server = PostgresServer()
    try:
        with pytest.raises(RuntimeError, match="pg_ctl failed") as failure:
            server.start()
    finally:
        busy.close()
    assert "server log:" in str(failure.value)
    assert len(made) == 1 and not made[0].exists()
    server.stop()
