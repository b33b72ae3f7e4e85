"""One MCP server connection, held open by a task of its own.

The SDK's context managers hold anyio task groups and cancel scopes that one
task must enter and exit, so each connection lives in its own task
(`Connection._hold`) and calls may come from any task. The transport's read
stream is watched so a server that goes away is noticed at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

from backend.errors import LoopwireError
from backend.tools.mcp_config import MCPServerConfig

log = logging.getLogger("backend.tools.mcp")

CLIENT_INFO = mcp_types.Implementation(name="loopwire", version="0.1.0")
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults


class StartFailed(LoopwireError):
    """A server could not be connected; the message says why."""


class Connection:
    """One SDK `Client`, held open by a task of its own.

    The SDK's context managers hold anyio task groups and cancel scopes, which
    one task must enter and exit; `_hold` does both and waits in between until
    `close()` or until the transport ends. Calls may come from any task.
    """

    def __init__(
        self, config: MCPServerConfig, elicitation: ElicitationFnT | None = None
    ) -> None:
        """`elicitation`: where the server's questions go (None: refused)."""
        self.config = config
        self._elicitation = elicitation
        self.client: Client | None = None
        self.tools: list[mcp_types.Tool] = []
        self.failure: BaseException | None = None
        self._ready = asyncio.Event()
        self._wake = asyncio.Event()  # close() was called, or the transport ended
        self._closing = False
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task[None] | None = None

    def end_reason(self) -> str:
        if self.failure is not None:
            return describe_failure(self.config, self.failure)
        if self.config.command is not None:
            return "the server process exited"
        return "the connection ended"

    async def open(self) -> None:
        """Connect and list the tools, or raise `StartFailed`."""
        timeout = self.config.startup_timeout_s
        self._task = asyncio.create_task(self._hold(), name=f"mcp:{self.config.name}")
        try:
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise StartFailed(f"no answer within {timeout:g}s") from None
        except asyncio.CancelledError:
            await self.close()
            raise
        if self.client is None:
            await self.close()
            raise StartFailed(describe_failure(self.config, self.failure))

    async def close(self) -> None:
        task = self._task
        if task is None:
            return
        self._closing = True
        self._wake.set()
        if not self._ready.is_set():  # still starting: abandon the attempt
            if self._scope is None:
                task.cancel()
            else:
                self._scope.cancel()
        await asyncio.wait({task})

    async def _hold(self) -> None:
        try:
            with anyio.CancelScope() as self._scope:
                async with AsyncExitStack() as stack:
                    await self._serve(stack)
        except Exception as exc:  # a failing server must not take the app down
            self.failure = exc
        finally:
            self._gone()

    async def _serve(self, stack: AsyncExitStack) -> None:
        transport = _watch(await _transport(self.config, stack), on_end=self._wake.set)
        client = Client(
            transport,
            mode=self.config.protocol,
            client_info=CLIENT_INFO,
            cache=None,
            elicitation_callback=self._elicitation,
        )
        await stack.enter_async_context(client)
        self.tools = await _list_tools(client)
        self.client = client
        self._ready.set()
        await self._wake.wait()
        self._gone()

    def _gone(self) -> None:
        """No more calls through this client; logged if we did not close it."""
        if self.client is not None and not self._closing:
            log.warning("MCP server %r: %s", self.config.name, self.end_reason())
        self.client = None
        self._ready.set()


Transport = AbstractAsyncContextManager[tuple[Any, Any]]


async def _transport(config: MCPServerConfig, stack: AsyncExitStack) -> Transport:
    if config.command is not None:
        params = StdioServerParameters(
            command=config.command,
            args=config.args,
            env=config.env or None,
            cwd=config.cwd,
        )
        return stdio_client(params)
    assert config.url is not None
    http = await stack.enter_async_context(
        httpx2.AsyncClient(headers=config.headers, timeout=_HTTP_TIMEOUT)
    )
    return streamable_http_client(config.url, http_client=http)


@asynccontextmanager
async def _watch(
    transport: Transport, *, on_end: Callable[[], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """`transport`, reporting the end of its read stream (the server went away)."""
    async with transport as (read_stream, write_stream):
        yield _WatchedStream(read_stream, on_end), write_stream


class _WatchedStream:
    """A transport's read stream (the SDK's `ReadStream` protocol) + an end hook."""

    def __init__(self, stream: Any, on_end: Callable[[], None]) -> None:
        self._stream = stream
        self._on_end = on_end

    @property
    def last_context(self) -> Any:  # the protocol's optional sender context
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except (
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
        ):
            self._on_end()
            raise

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _WatchedStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def _list_tools(client: Client, max_pages: int = 100) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def describe_failure(config: MCPServerConfig, exc: BaseException | None) -> str:
    """A failure as one human sentence."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None:
        return "the connection ended"
    if isinstance(exc, MCPError):
        if exc.code == mcp_types.CONNECTION_CLOSED and config.command is not None:
            return "the server process closed the connection (did it exit?)"
        return f"{exc.error.message} (MCP error {exc.code})"
    if isinstance(exc, httpx2.TransportError):
        return f"cannot reach {config.url}: {exc or type(exc).__name__}"
    if isinstance(exc, OSError) and config.command is not None:
        where = (
            f" ({exc.filename})" if exc.filename not in (None, config.command) else ""
        )
        return f"cannot run {config.command!r}: {exc.strerror or exc}{where}"
    return f"{type(exc).__name__}: {exc}"
