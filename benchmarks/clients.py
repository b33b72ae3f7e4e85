"""The bench's WebSocket clients: loopwire sessions and echo sockets.

Both use the `websockets` asyncio client with its defaults (as a browser,
it offers permessage-deflate), no keepalive pings, and decode every frame
as JSON, so the client-side work is the same against both servers.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from websockets.asyncio.client import ClientConnection, connect

from benchmarks.checks import BenchError, Frame, kind

MAX_FRAME = 1 << 22
OPEN_PARALLEL = 64
"""Handshakes under way at once when opening many sockets."""

T = TypeVar("T")


async def _connect(url: str) -> ClientConnection:
    return await connect(
        url, max_size=MAX_FRAME, ping_interval=None, open_timeout=60, close_timeout=5
    )


@dataclass
class Run:
    """The frames of one run, their sizes in bytes, and when it ran."""

    frames: list[Frame] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0

    @property
    def seconds(self) -> float:
        return self.ended - self.started


class Session:
    """One loopwire session on its own socket."""

    def __init__(self, ws: ClientConnection, ready: Frame) -> None:
        self.ws = ws
        self.id = str(ready["session_id"])

    @classmethod
    async def open(cls, url: str) -> Session:
        ws = await _connect(url)
        ready = json.loads(await ws.recv())
        if ready.get("type") != "session_ready":
            await ws.close()
            raise BenchError(f"expected session_ready, got {ready!r}")
        return cls(ws, ready)

    async def send(self, frame: Frame) -> None:
        await self.ws.send(json.dumps(frame))

    async def read_until(
        self, done: Callable[[Frame], bool], run: Run | None = None
    ) -> Run:
        """Frames up to and including the first one `done` accepts."""
        run = run if run is not None else Run(started=time.perf_counter())
        while True:
            text = await self.ws.recv()
            frame = json.loads(text)
            run.frames.append(frame)
            run.sizes.append(len(text))
            if done(frame):
                run.ended = time.perf_counter()
                return run

    async def until_kind(self, wanted: str, run: Run | None = None) -> Run:
        return await self.read_until(lambda frame: kind(frame) == wanted, run)

    async def run(self, chat: Frame) -> Run:
        """Send a `chat` and read its frames to `response_complete`."""
        run = Run(started=time.perf_counter())
        await self.send(chat)
        return await self.until_kind("response_complete", run)

    async def stop(self) -> None:
        await self.send({"type": "agent_control", "action": "stop"})

    async def reset(self) -> None:
        """Forget the history, so the next round starts like the first."""
        await self.send({"type": "reset_session"})
        run = await self.until_kind("session_reset")
        if len(run.frames) != 1:
            raise BenchError(f"unexpected frames before session_reset: {run.frames}")

    async def close(self) -> None:
        await self.ws.close()


class EchoSocket:
    """One socket on the bare echo server."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    @classmethod
    async def open(cls, url: str) -> EchoSocket:
        return cls(await _connect(url))

    async def round_trip(self, delay_ms: float = 0.0) -> None:
        sent = {"delay_ms": delay_ms}
        await self.ws.send(json.dumps(sent))
        answer = json.loads(await self.ws.recv())
        if answer != sent:
            raise BenchError(f"the echo answered {answer!r} to {sent!r}")

    async def burst(self, frames: int, size: int) -> int:
        """Ask for `frames` frames of `size` bytes; the bytes received."""
        await self.ws.send(json.dumps({"burst": frames, "size": size}))
        received = 0
        for _ in range(frames):
            text = await self.ws.recv()
            if json.loads(text).get("type") != "token_stream":
                raise BenchError(f"the echo sent {text[:80]!r}")
            received += len(text)
        return received

    async def close(self) -> None:
        await self.ws.close()


async def open_many(
    count: int, opener: Callable[[], Awaitable[T]], parallel: int = OPEN_PARALLEL
) -> list[T]:
    """`count` connections, `parallel` handshakes at a time."""
    gate = asyncio.Semaphore(parallel)

    async def one() -> T:
        async with gate:
            return await opener()

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def run_all(sessions: Sequence[Session], chat: Frame) -> list[Run]:
    """Every session sends `chat` at once; their runs, each read to its end.
    Not timed: wrap it in a `Meter`."""
    return list(await asyncio.gather(*(s.run(chat) for s in sessions)))


async def reset_all(sessions: Sequence[Session]) -> None:
    """Each session's history cleared, so rounds stay alike."""
    await asyncio.gather(*(s.reset() for s in sessions))


async def close_all(sockets: Sequence[Session] | Sequence[EchoSocket]) -> None:
    await asyncio.gather(*(s.close() for s in sockets), return_exceptions=True)
