"""MCP servers as loopwire tools, through the official `mcp` SDK (2.x).

The app lifespan owns one `MCPManager`::

    configs = load_mcp_config(path)
    async with MCPManager(configs, reserved_names=registry.names) as manager:
        for tool in manager.tools():
            registry.add(tool)
        ...  # serve

Entering connects to every enabled server concurrently (each bounded by its
`startup_timeout_s`), negotiates the protocol and lists the tools. A server
that fails to start is logged and described in `manager.problems`; the
others work. Exiting closes every session and stops every process.

Each MCP tool becomes a `Tool` named `<server>__<tool>` whose `parameters`
are the server's input schema; the server validates the arguments. Its
effect comes from the config (`MCPServerConfig.effect_for`): a tool the
config says nothing about asks the user for approval before each call.

- A server's question during a call (`elicitation/create`, a form or a
  link) is put to the person behind the run (`mcp_elicitation.py`).
- A result with `isError` raises `ToolError` with the server's text.
- Stop (the calling task cancelled, or the executor's timeout) propagates;
  the SDK tells the server on the way out: `notifications/cancelled` for the
  request id (over streamable HTTP at protocol 2026-07-28, it aborts the
  request's POST instead, which is that protocol's cancellation).
- A connection lost mid-call (process died, HTTP failed) fails the call at
  once with "MCP server '<name>' is not available: ..." and marks the server
  down; so does a server noticed to have gone while idle. The next call to
  one of its tools reconnects once; if that fails the server stays down and
  its tools fail fast until the app restarts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from types import TracebackType
from typing import Any, cast

import anyio
import httpx2
import mcp_types
from mcp import MCPError
from pydantic import BaseModel, ConfigDict, ValidationError

from backend.errors import ToolError
from backend.tools.base import AnyTool, Tool, ToolContext
from backend.tools.elicitation import Asker
from backend.tools.mcp_config import (
    MCPServerConfig,
    load_mcp_config,
    object_schema,
    result_value,
    tool_names,
)
from backend.tools.mcp_connection import Connection, StartFailed, describe_failure
from backend.tools.mcp_elicitation import Routes

__all__ = ["MCPArguments", "MCPManager", "MCPServerConfig", "load_mcp_config"]

log = logging.getLogger(__name__)

IDEMPOTENCY_META = "loopwire/idempotency_key"
"""The `_meta` key of a `tools/call` that carries the call's idempotency key
(`<run id>:<tool call id>`, the same however often the call is made): a
server that changes data can apply each key once."""

_TRANSPORT_ERRORS = (
    OSError,
    httpx2.TransportError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)


class MCPArguments(BaseModel):
    """Any JSON object: the MCP server validates its own arguments."""

    model_config = ConfigDict(extra="allow")

    def arguments(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class MCPManager:
    """Connections to the configured MCP servers, and their tools."""

    def __init__(
        self,
        configs: Sequence[MCPServerConfig],
        *,
        reserved_names: Collection[str] = (),
    ) -> None:
        self._configs = list(configs)
        self._reserved = frozenset(reserved_names)
        self._servers: list[_Server] = []
        self._failed: dict[str, str] = {}
        self._tools: list[AnyTool] = []

    async def __aenter__(self) -> MCPManager:
        for config in self._configs:
            if not config.enabled:
                log.info("MCP server %r is disabled", config.name)
        candidates = [_Server(c) for c in self._configs if c.enabled]
        try:
            outcomes = await asyncio.gather(*(_start(s) for s in candidates))
        except BaseException:
            await _close_all(candidates)
            raise
        started: list[tuple[_Server, list[mcp_types.Tool]]] = []
        for server, outcome in zip(candidates, outcomes, strict=True):
            if isinstance(outcome, str):
                self._failed[server.name] = outcome
            else:
                started.append((server, outcome))
        self._servers = [server for server, _ in started]
        self._tools = _build_tools(started, self._reserved)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        servers, self._servers = self._servers, []
        await _close_all(servers)

    def tools(self) -> list[AnyTool]:
        """Every tool of every started server, in config then server order."""
        return list(self._tools)

    @property
    def problems(self) -> list[str]:
        """Why servers failed to start, one human sentence each."""
        return [
            f"MCP server '{name}' failed to start: {reason}"
            for name, reason in self._failed.items()
        ]

    def status(self) -> dict[str, str]:
        """Per configured server: "up", "down: …", "failed: …" or "disabled"."""
        states = {s.name: s.state() for s in self._servers}
        states |= {name: f"failed: {why}" for name, why in self._failed.items()}
        return {
            c.name: states.get(c.name, "disabled" if not c.enabled else "closed")
            for c in self._configs
        }


async def _start(server: _Server) -> list[mcp_types.Tool] | str:
    """The server's tools, or why it did not start."""
    try:
        tools = await server.start()
    except StartFailed as exc:
        log.error("MCP server %r failed to start: %s", server.name, exc)
        return str(exc)
    log.info("MCP server %r: %d tool(s)", server.name, len(tools))
    return tools


async def _close_all(servers: Sequence[_Server]) -> None:
    await asyncio.gather(*(s.close() for s in servers))


def _build_tools(
    started: Sequence[tuple[_Server, list[mcp_types.Tool]]],
    reserved: Collection[str],
) -> list[AnyTool]:
    pairs = [(server.name, spec.name) for server, specs in started for spec in specs]
    names = iter(tool_names(pairs, reserved))
    tools: list[AnyTool] = []
    for server, specs in started:
        unknown = set(server.config.effects.tools) - {spec.name for spec in specs}
        for name in sorted(unknown):
            log.warning(
                "MCP server %r lists no tool %r (see effects)", server.name, name
            )
        tools.extend(_as_tool(server, spec, next(names)) for spec in specs)
        _log_default_approvals(server.config, specs)
    return tools


def _log_default_approvals(
    config: MCPServerConfig, specs: Sequence[mcp_types.Tool]
) -> None:
    asking = [s.name for s in specs if config.asks_by_default(s.name, s.annotations)]
    if asking:
        log.info(
            "MCP server %r: calls of %s wait for the user's approval (its "
            "effects in the MCP config say nothing about them; see docs/tools.md)",
            config.name,
            ", ".join(asking),
        )


def _as_tool(server: _Server, spec: mcp_types.Tool, name: str) -> Tool[MCPArguments]:
    async def call(args: MCPArguments, ctx: ToolContext) -> Any:
        meta = {IDEMPOTENCY_META: ctx.idempotency_key} if ctx.idempotency_key else None
        found = await server.call(spec.name, args.arguments(), meta, ask=ctx.ask)
        return result_value(found)

    summary = spec.description or spec.title or f"The {spec.name!r} tool."
    return Tool(
        name=name,
        description=f"[{server.name}] {summary}",
        args_model=MCPArguments,
        fn=call,
        effect=server.config.effect_for(spec.name, spec.annotations),
        parameters=object_schema(spec.input_schema),
        origin=lambda _result: f"the MCP server {server.name}",
    )


class _Server:
    """One started server: its current connection and its health.

    A lost connection is replaced by the next call, once per outage; if that
    fails, the server stays down.
    """

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.name = config.name
        self.routes = Routes(config.name)
        self._conn: Connection | None = None
        self._lost: str | None = None
        self._gave_up: str | None = None
        self._stale: list[Connection] = []
        self._lock = asyncio.Lock()
        self._closed = False

    def state(self) -> str:
        conn = self._conn
        if conn is not None and conn.client is None:
            return f"down: {conn.end_reason()}"
        reason = self._gave_up or self._lost
        return "up" if reason is None else f"down: {reason}"

    async def start(self) -> list[mcp_types.Tool]:
        conn = Connection(self.config, self.routes.callback)
        await conn.open()
        self._conn = conn
        return conn.tools

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        meta: dict[str, Any] | None = None,
        *,
        ask: Asker | None = None,
    ) -> mcp_types.CallToolResult:
        """`ask`: how to put the server's questions during the call to the
        person behind it (`mcp_elicitation.py`)."""
        conn = await self._live()
        client = conn.client
        if client is None:
            raise self._lose(conn, conn.end_reason())
        try:
            request = cast(mcp_types.RequestParamsMeta, meta)
            work = client.call_tool(tool, arguments, meta=request)
            return await self.routes.call(ask, work)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                reason = f"the connection closed during the call ({exc.error.message})"
                raise self._lose(conn, reason) from exc
            message = (
                f"MCP server '{self.name}' answered with an error: {exc.error.message}"
            )
            raise ToolError(message) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._lose(conn, describe_failure(self.config, exc)) from exc
        except (RuntimeError, ValidationError) as exc:
            message = f"MCP server '{self.name}' sent an unusable result: {exc}"
            raise ToolError(message) from exc

    async def close(self) -> None:
        self._closed = True
        async with self._lock:  # a reconnect in progress finishes first
            conns = [c for c in (self._conn, *self._stale) if c is not None]
            self._conn, self._stale = None, []
            await asyncio.gather(*(c.close() for c in conns))

    async def _live(self) -> Connection:
        conn = self._conn
        if conn is not None and conn.client is not None:
            return conn
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.client is not None:
                return conn
            if conn is not None:  # it ended while idle
                self._lose(conn, conn.end_reason())
            if self._closed:
                raise self._unavailable("loopwire is shutting down")
            if self._gave_up is not None:
                raise self._unavailable(self._gave_up)
            return await self._reconnect()

    async def _reconnect(self) -> Connection:
        log.info("MCP server %r: reconnecting (%s)", self.name, self._lost)
        stale, self._stale = self._stale, []
        await asyncio.gather(*(c.close() for c in stale))
        conn = Connection(self.config, self.routes.callback)
        try:
            await conn.open()
        except StartFailed as exc:
            self._gave_up = f"{self._lost}; reconnecting failed: {exc}"
            log.error("MCP server %r stays down: %s", self.name, self._gave_up)
            raise self._unavailable(self._gave_up) from None
        log.info("MCP server %r: reconnected", self.name)
        self._conn, self._lost = conn, None
        return conn

    def _lose(self, conn: Connection, reason: str) -> ToolError:
        """Mark `conn` lost if it is the current one; the error to raise."""
        if self._conn is conn:
            self._conn, self._lost = None, reason
            self._stale.append(conn)
            log.warning("MCP server %r is down: %s", self.name, reason)
        return self._unavailable(reason)

    def _unavailable(self, reason: str) -> ToolError:
        return ToolError(f"MCP server '{self.name}' is not available: {reason}")
