"""Serve an ASGI app with uvicorn on 127.0.0.1 inside the test's event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import uvicorn

from backend.server import WebSocketProtocol, uvicorn_config
from backend.settings import Settings


class _NotifyingServer(uvicorn.Server):
    """A uvicorn server that sets `ready` once it listens (no polling)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    async def startup(self, sockets: list[Any] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


class LiveServer:
    def __init__(
        self,
        app: Any,
        *,
        lifespan: Literal["on", "off"] = "on",
        settings: Settings | None = None,
    ) -> None:
        """`settings`: serve as `loopwire serve` would with them (compression,
        frame size); without, as a plain uvicorn app (the fake LLM servers)."""
        self.app = app
        if settings is not None:
            self._config = uvicorn_config(
                app,
                settings,
                host="127.0.0.1",
                port=0,
                log_level="warning",
                lifespan=lifespan,
            )
        else:
            self._config = uvicorn.Config(
                app,
                host="127.0.0.1",
                port=0,
                log_level="warning",
                lifespan=lifespan,
                ws=WebSocketProtocol,
                ws_max_size=1 << 20,
            )
        self._server: _NotifyingServer | None = None
        self._task: asyncio.Task[None] | None = None
        self.port: int | None = None

    def url(self, path: str = "/", scheme: str = "http") -> str:
        if self.port is None:
            raise RuntimeError("the server is not started")
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    async def start(self) -> None:
        """Bind a free port and serve until `stop()`."""
        server = _NotifyingServer(self._config)
        self._server = server
        self._task = asyncio.create_task(server.serve())
        ready = asyncio.create_task(server.ready.wait())
        await asyncio.wait({self._task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if not server.started:
            ready.cancel()
            await self._task  # surfaces the startup error, if any
            raise RuntimeError("the server exited during startup")
        self.port = server.servers[0].sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        await self._task
        self._server = None
        self._task = None


@asynccontextmanager
async def serving(
    app: Any,
    *,
    lifespan: Literal["on", "off"] = "on",
    settings: Settings | None = None,
) -> AsyncIterator[LiveServer]:
    server = LiveServer(app, lifespan=lifespan, settings=settings)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
