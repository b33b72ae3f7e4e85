"""A WebSocket server that plays one script per connection, for client tests
that need what no real server does on cue: a `moved` refusal, a close (1012)
at a chosen frame, a replay after a take-over whose seqs skip ahead.

```python
async def first(played: Played) -> None:
    await played.ready(last_seq=0, resumed=False)
    await played.recv()  # the client's chat
    ...

async with scripted_server(first, second) as server:
    async with AgentClient(server.url) as client:
        ...
assert server.played[1].received == [...]
```

Each new connection plays the next script; when its script returns, what
the client still sends on it is recorded until the client closes it. The
first failure inside a script is raised when the server's block ends.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from backend.notifications import stamp
from backend.protocol import Limits, ServerPayload, SessionReady

SESSION = "5e55" * 8
"""The session every scripted connection serves."""
RUN = "7a11" * 8
"""The run the scripted frames belong to."""

MOVED_DECISION = (
    "this server no longer holds the conversation, so your decision was not "
    "taken; reconnect and send it again"
)
"""The `moved` error's message, as the server words it."""
MOVED_CLOSE = "this conversation moved to another server; reconnect to continue"
"""The reason of the close (1012) of a conversation's sockets let go."""
SEQ_GAP = 1_000_000
"""How far seqs jump when an instance takes a conversation over from one
that did not let it go cleanly (it may have sent frames never stored)."""

Script = Callable[["Played"], Awaitable[None]]


class Played:
    """One connection of the scripted server."""

    def __init__(self, socket: ServerConnection) -> None:
        self.socket = socket
        assert socket.request is not None
        query = parse_qs(urlsplit(socket.request.path).query)
        self.query = {name: values[0] for name, values in query.items()}
        """The client's query parameters (`session_id`, `last_seq`)."""
        self.received: list[dict[str, Any]] = []
        """Every frame the client sent on this connection, in order."""

    async def ready(self, *, last_seq: int, resumed: bool = True) -> None:
        """The handshake: `session_ready` for `SESSION`, at `last_seq`."""
        payload = SessionReady(
            resumed=resumed,
            last_seq=last_seq,
            oldest_seq=1 if last_seq else 0,
            limits=Limits(
                max_steps_cap=10, default_max_steps=5, max_message_bytes=1 << 16
            ),
            model="scripted",
            models=["scripted"],
            provider="scripted",
            tools=[],
            strategies=["react"],
        )
        await self.send(payload, seq=0, run_id=None)

    async def send(
        self, payload: ServerPayload, *, seq: int, run_id: str | None = RUN
    ) -> None:
        text = stamp(
            payload, seq=seq, session_id=SESSION, run_id=run_id, ts=time.time()
        )
        await self.socket.send(text)

    async def recv(self) -> dict[str, Any]:
        """The client's next frame (recorded)."""
        frame: dict[str, Any] = json.loads(await self.socket.recv())
        self.received.append(frame)
        return frame

    async def close(self, code: int, reason: str) -> None:
        await self.socket.close(code, reason)

    async def drain(self) -> None:
        """Record what the client sends until it closes the connection."""
        with contextlib.suppress(ConnectionClosed):
            while True:
                await self.recv()


class ScriptedServer:
    def __init__(self, scripts: tuple[Script, ...]) -> None:
        self.scripts = list(scripts)
        self.played: list[Played] = []
        self.failures: list[BaseException] = []
        self.url = ""

    async def handle(self, socket: ServerConnection) -> None:
        played = Played(socket)
        self.played.append(played)
        if not self.scripts:
            self.failures.append(
                AssertionError(f"unexpected connection {played.query}")
            )
            await socket.close(1011, "no script left")
            return
        script = self.scripts.pop(0)
        try:
            await script(played)
            await played.drain()
        except Exception as exc:  # raised by `scripted_server` at its end
            self.failures.append(exc)
            await socket.close(1011, "the script failed")


@asynccontextmanager
async def scripted_server(*scripts: Script) -> AsyncIterator[ScriptedServer]:
    """A server on 127.0.0.1 whose n-th connection plays `scripts[n]`."""
    server = ScriptedServer(scripts)
    async with serve(server.handle, "127.0.0.1", 0) as listening:
        port = next(iter(listening.sockets)).getsockname()[1]
        server.url = f"ws://127.0.0.1:{port}/ws"
        yield server
    if server.failures:
        raise server.failures[0]
    assert server.scripts == [], f"{len(server.scripts)} script(s) never played"
