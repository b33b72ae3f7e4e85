"""A real loopwire server process (`python -m backend serve`), for restarts.

`start()` returns once uvicorn says it listens (read from its
log, no polling); the rest of the output is kept in `lines`. `terminate()`
sends SIGTERM (the graceful shutdown), `kill()` SIGKILL (a crash);
`freeze()` / `thaw()` stop and continue it (SIGSTOP / SIGCONT), and a frozen
one is thawed when it is terminated.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from tests.conftest import FILES_DIR
from tests.ws_client import Client

ROOT = Path(__file__).resolve().parent.parent
STARTED = "Uvicorn running on"
START_LIMIT_S = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServerProcess:
    def __init__(
        self, database_url: str, *, port: int | None = None, **settings: str
    ) -> None:
        self.port = port or free_port()
        """`port`: a restarted server takes its predecessor's, as a real one would."""
        self.env = {
            **os.environ,
            "LOOPWIRE_DATABASE_URL": database_url,
            "LOOPWIRE_FILES_DIR": str(FILES_DIR),
            "LOOPWIRE_PORT": str(self.port),
            "LOOPWIRE_LOG_LEVEL": "info",
            "PYTHONUNBUFFERED": "1",
        }
        self.env.pop("OPENAI_API_KEY", None)
        self.env.update({f"LOOPWIRE_{k.upper()}": v for k, v in settings.items()})
        self.lines: list[str] = []
        self._new_line = asyncio.Condition()
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self.frozen = False
        """`freeze()`d and not thawed since."""

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    @property
    def pid(self) -> int:
        assert self._process is not None, "the server is not started"
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> ServerProcess:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "backend",
            "serve",
            cwd=ROOT,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        started = asyncio.Event()
        self._reader = asyncio.create_task(self._read(started))
        async with asyncio.timeout(START_LIMIT_S):
            done = asyncio.create_task(self._process.wait())
            ready = asyncio.create_task(started.wait())
            await asyncio.wait({done, ready}, return_when=asyncio.FIRST_COMPLETED)
            for task in (done, ready):
                task.cancel()
        if not started.is_set():
            await self._finish()
            raise RuntimeError("the server did not start:\n" + "\n".join(self.lines))
        return self

    async def _read(self, started: asyncio.Event) -> None:
        assert self._process is not None and self._process.stdout is not None
        async for raw in self._process.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.lines.append(line)
            if STARTED in line:
                started.set()
            async with self._new_line:
                self._new_line.notify_all()

    async def logged(self, text: str) -> str:
        """The first line of its output containing `text` (waits for it)."""
        async with self._new_line:
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                await self._new_line.wait()

    async def terminate(self) -> int:
        """SIGTERM, then the exit status once the process is gone."""
        return await self._signal(signal.SIGTERM)

    async def kill(self) -> int:
        return await self._signal(signal.SIGKILL)

    async def _signal(self, sig: signal.Signals) -> int:
        assert self._process is not None
        if self.frozen and sig != signal.SIGKILL:
            self.thaw()  # a stopped process acts on SIGTERM only once continued
        with contextlib.suppress(ProcessLookupError):
            self._process.send_signal(sig)
        self.frozen = False  # SIGKILL ends a stopped process as it is
        return await self._finish()

    def freeze(self) -> None:
        """SIGSTOP: the process stops where it is (a long GC pause, a stalled
        VM). Its sockets stay open and nothing is answered; its leases are
        not renewed. `thaw()` continues it."""
        process = self._process
        assert process is not None and process.returncode is None, "not running"
        process.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        """SIGCONT: a `freeze()`d process goes on from where it stopped."""
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGCONT)
        self.frozen = False

    async def _finish(self) -> int:
        assert self._process is not None
        async with asyncio.timeout(START_LIMIT_S):
            code = await self._process.wait()
            if self._reader is not None:
                await self._reader
        return code

    async def stop_quietly(self) -> None:
        """SIGTERM if it still runs (SIGKILL if that does not end it); a
        frozen process is thawed first."""
        if self._process is None or self._process.returncode is not None:
            return
        try:
            await self.terminate()
        except TimeoutError:
            await self.kill()

    async def client(self, stack: AsyncExitStack, query: str = "") -> Client:
        url = self.ws_url + (f"?{query}" if query else "")
        connection = await stack.enter_async_context(connect(url, max_size=1 << 22))
        return Client(connection)


@asynccontextmanager
async def server_process(
    database_url: str, *, port: int | None = None, **settings: Any
) -> AsyncIterator[ServerProcess]:
    server = ServerProcess(
        database_url, port=port, **{k: str(v) for k, v in settings.items()}
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop_quietly()
