"""A fault-injecting fake of an OpenAI-compatible chat completions server.

It speaks HTTP/1.1 itself, over a real socket (asyncio streams, no
framework), so it can fail the way real servers and proxies do, which a
well-behaved ASGI server will not let an app do: each request to
`POST /v1/chat/completions` takes the next scripted reply —

- `Reply` / `ErrorReply` (from `tests.fake_openai`): a completion (JSON or
  SSE, as the request's `stream` asks) or an HTTP error with an OpenAI-style
  body and optional `Retry-After` / `retry-after-ms` headers;
- `Cut`: the response starts (200), then the connection closes before it
  ends — a stream after some content and before `[DONE]`, a JSON body
  halfway;
- `Stall`: the response headers (and, streaming, some content) are sent,
  then nothing, until the client gives up;
- `Malformed`: a 200 whose JSON is broken — the body, or one SSE chunk.

Every request's JSON body and arrival time are recorded;
`await wait_for_requests(n)` and the `dropped` event let tests wait without
sleeping. An unscripted request gets a 500 that says so (`x-should-retry:
false`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tests.fake_openai import (
    ChunkWriter,
    ErrorReply,
    Reply,
    completion_json,
    split,
    stream_chunks,
)

__all__ = [
    "Cut",
    "ErrorReply",
    "Fault",
    "FaultyOpenAIServer",
    "Malformed",
    "Reply",
    "Stall",
    "running_faulty_openai",
]

JSON = dict[str, Any]
PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Cut:
    """The connection closes mid-response.

    Streaming: `content` is streamed, then the connection closes before the
    final chunk and `[DONE]`. With `framing="chunked"` (the default) the
    HTTP body ends without its terminating chunk, as when a proxy loses its
    upstream; with `"close"` the body is delimited by the connection itself,
    so the HTTP layer sees a clean end and only the missing `[DONE]` tells.
    Not streaming: half the JSON body is sent, then the connection closes.
    """

    content: str = ""
    framing: Literal["chunked", "close"] = "chunked"


@dataclass(frozen=True)
class Stall:
    """200 and headers (and, streaming, `content`), then silence until the
    client leaves (`FaultyOpenAIServer.dropped` is set then)."""

    content: str = ""


@dataclass(frozen=True)
class Malformed:
    """A 200 with broken JSON: the body, or (streaming) the chunk after
    `content`, followed by `[DONE]` as if nothing were wrong."""

    content: str = ""


Fault = Reply | ErrorReply | Cut | Stall | Malformed

BROKEN_JSON = b'{"id": "chatcmpl-fake", "object": "chat.completion", "choices": [{'
UNSCRIPTED = ErrorReply(500, "faulty OpenAI server: no scripted reply left")


class FaultyOpenAIServer:
    """Serves scripted replies and faults on 127.0.0.1 until `stop()`."""

    def __init__(self) -> None:
        self.requests: list[JSON] = []
        """Every JSON body received, in arrival order."""
        self.arrivals: list[float] = []
        """`time.monotonic()` of each request's arrival."""
        self.dropped = asyncio.Event()
        """Set when a client leaves a `Stall`ed response."""
        self._replies: deque[Fault] = deque()
        self._arrived = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.StreamWriter, asyncio.Task[Any]] = {}

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the server is not started"
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    def script(self, *replies: Fault) -> None:
        """Queue replies; each request takes the next one."""
        self._replies.extend(replies)

    @property
    def pending_replies(self) -> int:
        return len(self._replies)

    async def wait_for_requests(self, count: int) -> None:
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)

    def gaps(self) -> list[float]:
        """Seconds between consecutive requests."""
        return [b - a for a, b in itertools.pairwise(self.arrivals)]

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        handlers = list(self._connections.values())
        for writer in list(self._connections):
            writer.close()  # each handler then sees the end of its stream
        await asyncio.gather(*handlers, return_exceptions=True)
        await self._server.wait_closed()

    # ------------------------------------------------------------ HTTP

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[writer] = task
        try:
            while await self._exchange(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away (between or in the middle of requests)
        finally:
            self._connections.pop(writer, None)
            writer.close()

    async def _exchange(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """One request and its response; False when the connection is done."""
        head = await reader.readuntil(b"\r\n\r\n")  # EOF here: IncompleteReadError
        method, path, headers = _parse_head(head)
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if (method, path) != ("POST", PATH):
            error = ErrorReply(404, f"no route {method} {path}", "not_found")
            await _send_json(writer, error.status, error.body())
            return True
        payload: JSON = json.loads(body)
        async with self._arrived:
            self.requests.append(payload)
            self.arrivals.append(time.monotonic())
            self._arrived.notify_all()
        reply = self._replies.popleft() if self._replies else UNSCRIPTED
        return await _Response(reader, writer, payload, self.dropped).send(reply)


@dataclass
class _Response:
    """One response to `payload`, faithful or faulty."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    payload: JSON
    dropped: asyncio.Event

    @property
    def streaming(self) -> bool:
        return bool(self.payload.get("stream"))

    def chunks(self) -> ChunkWriter:
        options = self.payload.get("stream_options") or {}
        return ChunkWriter(
            model=str(self.payload.get("model", "")),
            include_usage=bool(options.get("include_usage")),
        )

    def prelude(self, content: str) -> list[bytes]:
        """The first chunks of a stream: the role, then `content` in pieces."""
        writer = self.chunks()
        first = writer.chunk({"role": "assistant", "content": ""})
        return [first, *(writer.chunk({"content": p}) for p in split(content, 4))]

    async def send(self, reply: Fault) -> bool:
        """Send `reply`; True if the connection stays usable."""
        match reply:
            case ErrorReply():
                extra = {**reply.headers()}
                if reply is UNSCRIPTED:
                    extra["x-should-retry"] = "false"
                await _send_json(self.writer, reply.status, reply.body(), extra)
            case Reply() if self.streaming:
                await self.stream(stream_chunks(reply, self.chunks()))
            case Reply():
                body = completion_json(reply, str(self.payload.get("model", "")))
                await _send_json(self.writer, 200, body)
            case Cut():
                await self.cut(reply)
                return False
            case Stall():
                await self.stall(reply)
                return False
            case Malformed():
                await self.malformed(reply)
        return True

    async def stream(self, chunks: Iterable[bytes], *, end: bool = True) -> None:
        await _start(self.writer, 200, _SSE_HEADERS)
        for chunk in chunks:
            await _send_chunk(self.writer, chunk)
        if end:
            await _send_chunk(self.writer, b"")

    async def cut(self, reply: Cut) -> None:
        if not self.streaming:
            model = str(self.payload.get("model", ""))
            body = json.dumps(completion_json(Reply(content=reply.content), model))
            half = body.encode()[: len(body) // 2]
            await _start(self.writer, 200, _json_headers(len(body.encode())))
            self.writer.write(half)
        elif reply.framing == "chunked":
            await self.stream(self.prelude(reply.content), end=False)
        else:
            headers = {"content-type": "text/event-stream", "connection": "close"}
            await _start(self.writer, 200, headers)
            self.writer.write(b"".join(self.prelude(reply.content)))
        await self.writer.drain()
        self.writer.close()

    async def stall(self, reply: Stall) -> None:
        if self.streaming:
            await self.stream(self.prelude(reply.content), end=False)
        else:
            await _start(self.writer, 200, _json_headers(len(BROKEN_JSON)))
        while await self.reader.read(1024):  # until the client leaves
            pass
        self.dropped.set()

    async def malformed(self, reply: Malformed) -> None:
        if not self.streaming:
            await _start(self.writer, 200, _json_headers(len(BROKEN_JSON)))
            self.writer.write(BROKEN_JSON)
            await self.writer.drain()
            return
        broken = b"data: " + BROKEN_JSON + b"\n\n"
        await self.stream([*self.prelude(reply.content), broken, b"data: [DONE]\n\n"])


_SSE_HEADERS = {
    "content-type": "text/event-stream",
    "transfer-encoding": "chunked",
}


def _json_headers(length: int) -> dict[str, str]:
    return {"content-type": "application/json", "content-length": str(length)}


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return method, target.split("?", 1)[0], headers


_REASONS = {200: "OK", 404: "Not Found", 429: "Too Many Requests"}


async def _start(
    writer: asyncio.StreamWriter, status: int, headers: Mapping[str, str]
) -> None:
    reason = _REASONS.get(status, "Internal Server Error" if status >= 500 else "Error")
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    await writer.drain()


async def _send_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    """One chunk of a chunked body (`b""` ends the body)."""
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


async def _send_json(
    writer: asyncio.StreamWriter,
    status: int,
    body: JSON,
    headers: Mapping[str, str] | None = None,
) -> None:
    data = json.dumps(body).encode()
    await _start(writer, status, {**_json_headers(len(data)), **(headers or {})})
    writer.write(data)
    await writer.drain()


@contextlib.asynccontextmanager
async def running_faulty_openai() -> AsyncIterator[FaultyOpenAIServer]:
    server = FaultyOpenAIServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
