"""Shared pytest fixtures."""

from __future__ import annotations

import atexit
import ipaddress
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from websockets.asyncio.client import connect

from backend.app import create_app
from backend.llm.base import LLMClient
from backend.settings import Settings
from backend.telemetry.signals import Telemetry
from backend.tools.base import ToolRegistry
from devcluster import nginx_server, redis_server
from devcluster.postgres_server import PostgresServer, unavailable_reason
from tests.databases import (  # noqa: F401  (fixtures)
    database_url,
    pg_database_url,
    store,
)
from tests.fake_openai import FakeOpenAIServer, running_fake_openai
from tests.fakes import SCRIPTED
from tests.live_server import LiveServer, serving
from tests.ws_client import Client

if TYPE_CHECKING:
    from tests.cluster_harness import ClusterHarness


@pytest.fixture(autouse=True)
def _scripts_used_up() -> Iterator[None]:
    """Every `ScriptedLLM` a test made answered all it was scripted to."""
    SCRIPTED.clear()
    yield
    made, SCRIPTED[:] = list(SCRIPTED), []
    for llm in made:
        llm.assert_complete()


@pytest.fixture(autouse=True)
def _no_real_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches a real LLM provider, nor anything past this machine:
    no key or base URL comes from the environment, and a connection to any
    address but a loopback one fails the test."""
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    connect = socket.socket.connect

    def local_only(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0]
            if not ipaddress.ip_address(host.split("%")[0]).is_loopback:
                raise AssertionError(f"a test tried to connect to {host}")
        connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)


PROVIDER_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "LOOPWIRE_LLM_API_KEY",
    "LOOPWIRE_LLM_BASE_URL",
    "LOOPWIRE_LLM_PROVIDER",
)


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAIServer]:
    """A started fake OpenAI-compatible server (see `tests/fake_openai.py`)."""
    async with running_fake_openai() as server:
        yield server


FILES_DIR = Path(tempfile.mkdtemp(prefix="loopwire-test-files-"))
"""Where the servers of this test session keep files (removed at exit)."""
atexit.register(shutil.rmtree, FILES_DIR, ignore_errors=True)


def make_settings(**overrides: Any) -> Settings:
    """Settings for tests: no `.env`, a fresh in-memory SQLite database (the
    real store), files in a temporary folder, the given overrides."""
    overrides.setdefault("database_url", "sqlite://")
    overrides.setdefault("files_dir", FILES_DIR)
    return Settings(_env_file=None, **overrides)  # type: ignore[call-arg]


class Harness:
    """A live loopwire server on 127.0.0.1 and clients connected to it."""

    def __init__(self, server: LiveServer, stack: AsyncExitStack) -> None:
        self.server = server
        self._stack = stack

    @property
    def service(self) -> Any:
        return self.server.app.state.chat

    async def connect(self, query: str = "", **headers: str) -> Client:
        url = self.server.url("/ws", scheme="ws") + (f"?{query}" if query else "")
        connection = await self._stack.enter_async_context(
            connect(url, additional_headers=headers or None, max_size=1 << 22)
        )
        return Client(connection)

    async def ready_client(
        self, query: str = "", **headers: str
    ) -> tuple[Client, dict[str, Any]]:
        client = await self.connect(query, **headers)
        ready = await client.recv()
        assert ready["type"] == "session_ready"
        return client, ready


StartServer = Callable[..., Awaitable[Harness]]


def server_starter(stack: AsyncExitStack) -> StartServer:
    """`await start(llm, registry=None, **settings)` → a Harness, stopped with `stack`."""

    async def start(
        llm: LLMClient | None = None,
        registry: ToolRegistry | None = None,
        telemetry: Telemetry | None = None,
        **settings: Any,
    ) -> Harness:
        config = make_settings(**settings)
        app = create_app(config, llm=llm, registry=registry, telemetry=telemetry)
        server = await stack.enter_async_context(serving(app, settings=config))
        return Harness(server, stack)

    return start


@pytest.fixture
async def start_server() -> AsyncIterator[StartServer]:
    """`await start_server(llm, registry=None, **settings)` → a running Harness."""
    async with AsyncExitStack() as stack:
        yield server_starter(stack)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """One PostgreSQL server for the whole test session (see devcluster/postgres_server.py).

    Skipped, with the reason, where PostgreSQL cannot run; under CI it must.
    """
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI installs PostgreSQL, yet: {reason}")
        pytest.skip(reason)
    with PostgresServer() as server:
        yield server.url


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """One Redis server for the whole test session (devcluster/redis_server.py),
    and nginx checked: what a cluster test needs besides PostgreSQL."""
    reason = redis_server.unavailable_reason() or nginx_server.unavailable_reason()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI installs Redis and nginx, yet: {reason}")
        pytest.skip(reason)
    with redis_server.RedisServer() as server:
        yield server.url


FAILED = pytest.StashKey[bool]()
"""Set on a test item whose call failed (for fixtures that explain failures)."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[FAILED] = True
    return report


@pytest.fixture
async def offline_cluster(
    request: pytest.FixtureRequest,
    pg_database_url: str,  # noqa: F811  (the fixture imported above)
    redis_url: str,
) -> AsyncIterator[ClusterHarness]:
    """Three instances on the offline model behind nginx (tests/cluster_harness.py);
    the end of their logs is shown with a failure."""
    from tests.cluster_harness import LEASE_S, running_cluster

    async with running_cluster(
        pg_database_url, redis_url, lease_ttl_s=LEASE_S
    ) as cluster:
        yield cluster
        if request.node.stash.get(FAILED, False):
            cluster.print_logs(80)
