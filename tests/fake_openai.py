"""A scripted, in-process fake of an OpenAI-compatible chat completions server.

Tests queue replies with `FakeOpenAIServer.script(...)`; every request pops one
reply, in order. Once none is left, a `responder` set with `respond(...)`
makes the reply from the request's body, as a model would (one that obeys
what it reads, say). The server records every JSON body it receives and exposes
events so tests never need to sleep:

- `await server.wait_for_requests(n)` returns once `n` requests have arrived;
- `server.cancelled` is set when a `HangReply` request is dropped by the client.

`/v1/embeddings` answers every request at once, unscripted, with
deterministic vectors (`fake_embedding`: a hashed bag of words, where a few
words stand for their synonyms) unless an error is queued with
`fail_embeddings(...)`; its requests are kept apart, in
`embedding_requests`, so the chat request counts stay as they are.

Replies are served as plain JSON or as server-sent events, depending on the
request's `stream` flag, and mimic what real servers do when streaming:
content split into several chunks, tool-call arguments split into fragments
(id and name only in the first one), `delta.content` set to null in tool-call
chunks, and a usage-only final chunk with empty `choices` when
`stream_options.include_usage` was requested.

`count_prefix_cache()` makes the server count tokens and a prompt cache the
way OpenAI's works (`PrefixCache`): every reply then reports the request's
`prompt_tokens` and, in `prompt_tokens_details.cached_tokens`, the longest
prefix an earlier request had already sent (whole 1,024 tokens, then
128-token increments), streamed or not.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import re
import struct
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tests.live_server import LiveServer

__all__ = [
    "EMBEDDING_DIMENSIONS",
    "ErrorReply",
    "FakeOpenAIServer",
    "FakeUsage",
    "HangReply",
    "PrefixCache",
    "Reply",
    "Responder",
    "ScriptedReply",
    "fake_embedding",
    "running_fake_openai",
]

JSON = dict[str, Any]
Responder = Callable[[JSON], "ScriptedReply"]
"""Makes a reply from a request's JSON body."""


@dataclass(frozen=True)
class FakeUsage:
    """Token usage the fake reports for a reply."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    """Reported as OpenAI does, in `prompt_tokens_details`, when set."""
    reasoning_tokens: int | None = None
    """Reported in `completion_tokens_details`, when set."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_json(self) -> JSON:
        body: JSON = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cached_tokens is not None:
            body["prompt_tokens_details"] = {
                "cached_tokens": self.cached_tokens,
                "audio_tokens": 0,
            }
        if self.reasoning_tokens is not None:
            body["completion_tokens_details"] = {
                "reasoning_tokens": self.reasoning_tokens,
                "audio_tokens": 0,
            }
        return body


@dataclass(frozen=True)
class Reply:
    """A successful completion: text and/or tool calls.

    `tool_calls` holds `(name, arguments)` pairs; arguments given as a dict are
    JSON-encoded, a string is sent verbatim. Tool call ids are `call_fake_<n>`
    (n from 1) unless `omit_tool_call_ids`. When streaming, content is sent in
    pieces of `chunk_chars` characters and each argument string in
    `argument_fragments` fragments; `omit_stream_index` drops `index` from the
    tool-call deltas, as some servers do. `reasoning` is a reasoning model's
    thinking, sent in the field `reasoning_field` names (`reasoning_content`
    as DeepSeek and vLLM do, `reasoning` as Ollama does) before the content,
    in pieces of `chunk_chars` when streaming.

    Shapes some servers give calls (all off by default): `interleave_calls`
    streams the fragments of several calls in turn, one of each by `index`;
    `arguments_as_object` sends `arguments` as a JSON object, not a string
    (whole, in the first fragment, when streaming); `repeat_tool_call_ids`
    gives every call of the reply the id `call_fake_1`.
    """

    content: str | None = None
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"
    tool_calls: Sequence[tuple[str, Mapping[str, Any] | str]] = ()
    usage: FakeUsage | None = None
    finish_reason: str | None = None
    omit_tool_call_ids: bool = False
    omit_stream_index: bool = False
    chunk_chars: int = 4
    argument_fragments: int = 3
    interleave_calls: bool = False
    arguments_as_object: bool = False
    repeat_tool_call_ids: bool = False

    def resolved_finish_reason(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    def tool_call_id(self, position: int) -> str | None:
        if self.omit_tool_call_ids:
            return None
        return (
            "call_fake_1" if self.repeat_tool_call_ids else f"call_fake_{position + 1}"
        )

    def arguments_text(self, position: int) -> str:
        arguments = self.tool_calls[position][1]
        return arguments if isinstance(arguments, str) else json.dumps(arguments)

    def arguments_value(self, position: int) -> Any:
        """The arguments as sent: a string, or an object (`arguments_as_object`)."""
        arguments = self.tool_calls[position][1]
        if self.arguments_as_object and not isinstance(arguments, str):
            return dict(arguments)
        return self.arguments_text(position)


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error with an OpenAI-style `{"error": {...}}` body.

    `retry_after_ms` sets the `retry-after-ms` header (OpenAI's own), so tests
    exercising retries need not wait for the default back-off; `retry_after`
    sets the standard `Retry-After` header verbatim (seconds or an HTTP date).
    """

    status: int
    message: str
    error_type: str = "invalid_request_error"
    retry_after_ms: int | None = None
    retry_after: str | None = None

    def headers(self) -> dict[str, str]:
        headers = {}
        if self.retry_after_ms is not None:
            headers["retry-after-ms"] = str(self.retry_after_ms)
        if self.retry_after is not None:
            headers["retry-after"] = self.retry_after
        return headers

    def body(self) -> JSON:
        return {
            "error": {"message": self.message, "type": self.error_type, "code": None}
        }


@dataclass(frozen=True)
class HangReply:
    """Never answers; sets `FakeOpenAIServer.cancelled` once the client leaves.

    For a streaming request, `partial_content` is streamed first (response
    headers and content chunks), then the server hangs mid-stream.
    """

    partial_content: str = ""


ScriptedReply = Reply | ErrorReply | HangReply

TOKEN_BYTES = 4
"""The fake's token: four bytes of the request's prompt text."""
CACHE_MIN_TOKENS = 1024
"""The shortest prefix read from the cache (OpenAI's)."""
CACHE_STEP_TOKENS = 128
"""Cached prefixes grow in steps of this many tokens past the first 1,024."""


def prompt_text(body: Mapping[str, Any]) -> bytes:
    """A request's prompt as the counting fake tokenises it: the canonical
    JSON (sorted keys, compact, UTF-8) of its tool list, then of each
    message in order, one per line. `tool_choice` and the sampling
    parameters are not prompt text. Order-preserving: requests that agree
    on their tools and first messages agree on a prefix of this text."""
    parts = [body.get("tools") or [], *(body.get("messages") or [])]
    return b"".join(
        json.dumps(
            part, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
        + b"\n"
        for part in parts
    )


@dataclass
class PrefixCache:
    """Counts prompt tokens, and the tokens a prefix cache like OpenAI's reads.

    A prompt is `prompt_text` cut into tokens of `TOKEN_BYTES` bytes (the last
    one may be shorter). Once a request has been seen, each of its prefixes
    of 1,024 + k·128 tokens is cached; a later request reads from the cache
    the longest such prefix that it begins with byte for byte (0 when its
    prompt is under 1,024 tokens or nothing matches).
    """

    seen: set[bytes] = field(default_factory=set)
    """Digests of the cached prefixes."""
    counts: list[tuple[int, int]] = field(default_factory=list)
    """Per request, in arrival order: (prompt tokens, cached tokens)."""

    def count(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """The request's prompt and cached tokens; its prefixes are cached."""
        text = prompt_text(body)
        tokens = -(-len(text) // TOKEN_BYTES)
        cached = 0
        digest = hashlib.sha256()
        done = 0
        whole = len(text) // TOKEN_BYTES
        for size in range(CACHE_MIN_TOKENS, whole + 1, CACHE_STEP_TOKENS):
            digest.update(text[done * TOKEN_BYTES : size * TOKEN_BYTES])
            done = size
            key = digest.copy().digest()
            if key in self.seen:  # a request cached it, and its shorter ones
                cached = size
            self.seen.add(key)
        self.counts.append((tokens, cached))
        return tokens, cached

    @property
    def prompt_tokens(self) -> int:
        return sum(prompt for prompt, _ in self.counts)

    @property
    def cached_tokens(self) -> int:
        return sum(cached for _, cached in self.counts)

    @property
    def hit_ratio(self) -> float:
        """The share of all prompt tokens read from the cache (0 before any)."""
        return self.cached_tokens / self.prompt_tokens if self.counts else 0.0


EMBEDDING_DIMENSIONS = 256
EMBEDDING_SYNONYMS = {
    "automobile": "car",
    "vehicle": "car",
    "motorcar": "car",
    "physician": "doctor",
    "medic": "doctor",
}
"""Words the fake embeds as another: its idea of meaning."""


def fake_embedding(text: str) -> list[float]:
    """A hashed bag of words (lowercased, synonyms folded), not normalised."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        word = EMBEDDING_SYNONYMS.get(word, word)
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % EMBEDDING_DIMENSIONS] += 1.0
    return vector


def split(text: str, size: int) -> list[str]:
    size = max(size, 1)
    return [text[i : i + size] for i in range(0, len(text), size)]


def split_in_parts(text: str, parts: int) -> list[str]:
    """Split `text` into at most `parts` non-empty pieces (one piece if empty)."""
    if not text:
        return [""]
    size = -(-len(text) // max(parts, 1))
    return split(text, size)


@dataclass
class ChunkWriter:
    """Builds `chat.completion.chunk` SSE lines that share one id and model."""

    model: str
    include_usage: bool
    completion_id: str = "chatcmpl-fake"
    created: int = field(default_factory=lambda: int(time.time()))

    def chunk(self, delta: JSON, finish_reason: str | None = None) -> bytes:
        body: JSON = self._envelope(
            [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
        )
        if self.include_usage:
            body["usage"] = None
        return _sse(body)

    def usage_chunk(self, usage: FakeUsage) -> bytes:
        body = self._envelope([])
        body["usage"] = usage.as_json()
        return _sse(body)

    def _envelope(self, choices: list[JSON]) -> JSON:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }


def _sse(body: JSON) -> bytes:
    return f"data: {json.dumps(body)}\n\n".encode()


def _tool_call_deltas(reply: Reply, position: int) -> Iterator[JSON]:
    """The fragments of one streamed tool call: id/name only in the first."""
    name = reply.tool_calls[position][0]
    value = reply.arguments_value(position)
    fragments: list[Any] = (
        split_in_parts(value, reply.argument_fragments)
        if isinstance(value, str)
        else [value]
    )
    for number, fragment in enumerate(fragments):
        delta: JSON = {"function": {"arguments": fragment}}
        if not reply.omit_stream_index:
            delta["index"] = position
        if number == 0:
            delta["type"] = "function"
            delta["function"]["name"] = name
            call_id = reply.tool_call_id(position)
            if call_id is not None:
                delta["id"] = call_id
        yield delta


def _all_tool_call_deltas(reply: Reply) -> Iterator[JSON]:
    """Every call's fragments: call after call, or in turn (`interleave_calls`)."""
    per_call = [
        list(_tool_call_deltas(reply, position))
        for position in range(len(reply.tool_calls))
    ]
    if not reply.interleave_calls:
        for deltas in per_call:
            yield from deltas
        return
    for number in range(max((len(d) for d in per_call), default=0)):
        for deltas in per_call:
            if number < len(deltas):
                yield deltas[number]


def stream_chunks(reply: Reply, writer: ChunkWriter) -> Iterator[bytes]:
    yield writer.chunk({"role": "assistant", "content": ""})
    for piece in split(reply.reasoning or "", reply.chunk_chars):
        yield writer.chunk({"content": None, reply.reasoning_field: piece})
    for piece in split(reply.content or "", reply.chunk_chars):
        yield writer.chunk({"content": piece})
    for tool_delta in _all_tool_call_deltas(reply):
        yield writer.chunk({"content": None, "tool_calls": [tool_delta]})
    yield writer.chunk({}, finish_reason=reply.resolved_finish_reason())
    if writer.include_usage and reply.usage is not None:
        yield writer.usage_chunk(reply.usage)
    yield b"data: [DONE]\n\n"


def completion_json(reply: Reply, model: str) -> JSON:
    message: JSON = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message[reply.reasoning_field] = reply.reasoning
    if reply.tool_calls:
        calls: list[JSON] = []
        for position, (name, _) in enumerate(reply.tool_calls):
            call: JSON = {
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": reply.arguments_value(position),
                },
            }
            call_id = reply.tool_call_id(position)
            if call_id is not None:
                call["id"] = call_id
            calls.append(call)
        message["tool_calls"] = calls
    body: JSON = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.resolved_finish_reason(),
            }
        ],
    }
    if reply.usage is not None:
        body["usage"] = reply.usage.as_json()
    return body


def _error_response(reply: ErrorReply) -> JSONResponse:
    return JSONResponse(reply.body(), status_code=reply.status, headers=reply.headers())


class _HangResponse(Response):
    """Optionally starts an SSE stream, then waits for the client to go away."""

    def __init__(self, prelude: Sequence[bytes], on_disconnect: asyncio.Event) -> None:
        super().__init__()
        self._prelude = prelude
        self._on_disconnect = on_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._prelude:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            for chunk in self._prelude:
                await send(
                    {"type": "http.response.body", "body": chunk, "more_body": True}
                )
        # The request body has been read, so the next message is the disconnect.
        while (await receive())["type"] != "http.disconnect":
            pass
        self._on_disconnect.set()


class FakeOpenAIServer:
    """OpenAI-compatible `/v1/chat/completions` and `/v1/embeddings` endpoints
    served by uvicorn.

    Use `running_fake_openai()` (or the `fake_openai` fixture) to get a started
    instance; `start()` / `stop()` must run inside the test's event loop.
    """

    def __init__(self) -> None:
        self.requests: list[JSON] = []
        """Every JSON body received, in arrival order."""
        self.cancelled = asyncio.Event()
        """Set when a client drops a request answered with `HangReply`."""
        self.embedding_requests: list[JSON] = []
        """Every `/v1/embeddings` JSON body received, in arrival order."""
        self._replies: deque[ScriptedReply] = deque()
        self._responder: Responder | None = None
        self._embedding_errors: deque[ErrorReply] = deque()
        self._arrived = asyncio.Condition()
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            ]
        )
        self._live = LiveServer(self.app, lifespan="off")
        self.prefix_cache: PrefixCache | None = None
        """Set by `count_prefix_cache()`."""

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, e.g. `http://127.0.0.1:54321/v1`."""
        return self._live.url("/v1")

    def script(self, *replies: ScriptedReply) -> None:
        """Queue replies; each incoming request consumes the next one."""
        self._replies.extend(replies)

    def respond(self, responder: Responder) -> None:
        """Answer each request that finds no scripted reply left with
        `responder(body)`."""
        self._responder = responder

    def count_prefix_cache(self) -> PrefixCache:
        """Count every chat request's prompt and cached tokens from now on
        (`PrefixCache`), reported as each reply's usage in place of the
        scripted one (its completion and reasoning tokens are kept; without
        one, the reply's text counts a token per four characters)."""
        self.prefix_cache = PrefixCache()
        return self.prefix_cache

    def fail_embeddings(self, *errors: ErrorReply) -> None:
        """Queue errors; each `/v1/embeddings` request answers the next one
        (then vectors again)."""
        self._embedding_errors.extend(errors)

    @property
    def pending_replies(self) -> int:
        """How many scripted replies have not been used yet."""
        return len(self._replies)

    async def wait_for_requests(self, count: int) -> None:
        """Return once at least `count` requests have been received."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)

    async def start(self) -> None:
        """Bind a free port on 127.0.0.1 and serve until `stop()`."""
        await self._live.start()

    async def stop(self) -> None:
        await self._live.stop()

    async def _chat(self, request: Request) -> Response:
        body: JSON = await request.json()
        async with self._arrived:
            self.requests.append(body)
            self._arrived.notify_all()
        if not self._replies and self._responder is not None:
            return self._respond(self._responder(body), body)
        if not self._replies:
            message = (
                f"fake OpenAI server: no scripted reply left for request "
                f"#{len(self.requests)}; call script() with more replies"
            )
            return JSONResponse(
                {"error": {"message": message, "type": "fake_server_error"}},
                status_code=500,
                headers={"x-should-retry": "false"},
            )
        return self._respond(self._replies.popleft(), body)

    async def _embeddings(self, request: Request) -> Response:
        body: JSON = await request.json()
        self.embedding_requests.append(body)
        if self._embedding_errors:
            return _error_response(self._embedding_errors.popleft())
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        as_base64 = body.get("encoding_format") == "base64"
        data: list[JSON] = []
        for index, text in enumerate(texts):
            vector = fake_embedding(str(text))
            embedding: list[float] | str = vector
            if as_base64:
                packed = struct.pack(f"<{len(vector)}f", *vector)
                embedding = base64.b64encode(packed).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(len(str(text).split()) for text in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": str(body.get("model", "")),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def _respond(self, reply: ScriptedReply, body: JSON) -> Response:
        if self.prefix_cache is not None and isinstance(reply, Reply):
            reply = replace(reply, usage=_counted(reply, self.prefix_cache, body))
        streaming = bool(body.get("stream"))
        writer = ChunkWriter(
            model=str(body.get("model", "")),
            include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        )
        if isinstance(reply, ErrorReply):
            return _error_response(reply)
        if isinstance(reply, HangReply):
            prelude: list[bytes] = []
            if streaming and reply.partial_content:
                prelude.append(writer.chunk({"role": "assistant", "content": ""}))
                prelude.extend(
                    writer.chunk({"content": piece})
                    for piece in split(reply.partial_content, 4)
                )
            return _HangResponse(prelude, self.cancelled)
        if streaming:
            return StreamingResponse(
                _iterate(stream_chunks(reply, writer)), media_type="text/event-stream"
            )
        return JSONResponse(completion_json(reply, writer.model))


def _counted(reply: Reply, cache: PrefixCache, body: JSON) -> FakeUsage:
    """The usage of `reply` to `body`, its prompt counted by `cache`."""
    prompt, cached = cache.count(body)
    if reply.usage is not None:
        return replace(reply.usage, prompt_tokens=prompt, cached_tokens=cached)
    written = (reply.content or "") + "".join(
        reply.arguments_text(position) for position in range(len(reply.tool_calls))
    )
    return FakeUsage(prompt, -(-len(written) // TOKEN_BYTES), cached)


async def _iterate(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


@contextlib.asynccontextmanager
async def running_fake_openai() -> AsyncIterator[FakeOpenAIServer]:
    """A started `FakeOpenAIServer`, stopped on exit."""
    server = FakeOpenAIServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
