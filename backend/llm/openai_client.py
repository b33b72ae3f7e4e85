"""The `openai` provider: any OpenAI-compatible chat completions server.

This is the only module that imports the `openai` SDK. It translates the
provider-neutral types of `backend.llm.base` to the chat completions wire
format and back, and every failure into an `LLMError` with a message a
person can act on. Works with OpenAI itself and with compatible servers
(Ollama, vLLM, LM Studio, llama.cpp), tolerating their streaming quirks.

Faults: the SDK's own retries are off; this client retries, through
`backend.llm.retries`, what can succeed a second time — timeouts, failed or
broken connections, 408/409/429/5xx answers (honouring `Retry-After`, capped),
a stream that ended early — and nothing else (malformed JSON, other 4xx). A
stream is retried only while no text of it has reached the caller. The
messages name no URL, key or exception; the server log has the details.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import httpx2
import openai

from backend.llm.base import (
    Completion,
    LLMRequest,
    Message,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from backend.llm.redaction import bare_urls, redact
from backend.llm.retries import Failure, Retrier, RetryPolicy, Sleep, retry_after_s
from backend.llm.sse import EventTooLarge, SSEReader

__all__ = ["OpenAIClient"]

_PLACEHOLDER_API_KEY = "not-needed"
"""Sent when no key is configured: local servers ignore it, the SDK needs one."""

_MAX_ERROR_DETAIL = 500


class OpenAIClient:
    """`LLMClient` over `openai.AsyncOpenAI` (chat completions).

    `api_key=None` falls back to `OPENAI_API_KEY`, then to a placeholder so
    keyless local servers work. `timeout_s` bounds each network phase of an
    attempt: connecting, and every read — so a server that goes silent, before
    its answer or between two chunks of a stream, fails the attempt after
    `timeout_s`. A call makes at most `1 + max_retries` attempts (see the
    module docstring); `sleep` is how it waits between them. At most
    `max_connections` requests are open at once (and kept open for reuse);
    more wait for one to come free.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        retry_backoff_s: float = 0.5,
        retry_max_wait_s: float = 30.0,
        max_connections: int = 1000,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._model = model
        self._timeout_s = timeout_s
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or ""
        # aiohttp under the SDK: its pool finds a free connection in constant
        # time, where httpx's scans them all at every request's start and end
        pool = httpx2.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
        )
        http_client = openai.DefaultAioHttpClient(limits=pool, timeout=timeout_s)
        self._sdk = openai.AsyncOpenAI(
            api_key=self._api_key or _PLACEHOLDER_API_KEY,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,  # retried here, once, not by the SDK as well
            http_client=http_client,
        )
        self._retry = RetryPolicy(max_retries, retry_backoff_s, retry_max_wait_s)
        self._sleep = sleep
        self._base_url = bare_urls(str(self._sdk.base_url).rstrip("/"))
        self._stream_usage_supported = True
        self._call_ids = itertools.count(1)

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return "openai"

    @property
    def base_url(self) -> str:
        """The server's base URL as the SDK resolved it (no trailing slash),
        without credentials or query."""
        return self._base_url

    async def aclose(self) -> None:
        await self._sdk.close()

    async def complete(self, request: LLMRequest) -> Completion:
        """One non-streaming chat completion."""
        payload = _payload(request, default_model=self._model)
        retrier = Retrier(self._retry, self._sleep)
        while True:
            try:
                response = await self._post(_encode(payload), stream=False)
                return self._completion_from_data(_json_object(response.content))
            except _FAULTS as exc:
                await retrier.after(self._failure(exc))

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        """Yield a `TextDelta` per content piece, then one final `Completion`.

        A failed attempt is retried only if none of its text was yielded.
        Leaving early (break, cancellation) closes the upstream HTTP response.
        """
        payload = _payload(request, default_model=self._model)
        payload["stream"] = True
        retrier = Retrier(self._retry, self._sleep)
        while True:
            assembler = _StreamAssembler(new_call_id=self._new_call_id)
            try:
                response = await self._open_stream(payload)
                try:
                    async for data in _chunks(response):
                        text = assembler.feed(data)
                        if text:
                            yield TextDelta(text=text)
                finally:
                    await response.aclose()
                completion = assembler.completion()
            except _FAULTS as exc:
                failure = self._failure(exc)
                if assembler.text:  # the caller has shown it: never twice
                    failure = replace(failure, retryable=False)
                await retrier.after(failure)
                continue
            yield completion
            return

    async def _open_stream(self, payload: dict[str, Any]) -> httpx2.Response:
        """Start a streaming request, asking for usage when the server allows it.

        A server that rejects `stream_options` with a 400 is asked again without
        it, and never asked for it again by this client.
        """
        if self._stream_usage_supported:
            try:
                with_usage = {**payload, "stream_options": {"include_usage": True}}
                return await self._post(_encode(with_usage), stream=True)
            except openai.BadRequestError as exc:
                if "stream_options" not in _status_detail(exc):
                    raise
                self._stream_usage_supported = False
        return await self._post(_encode(payload), stream=True)

    async def _post(self, body: bytes, *, stream: bool) -> httpx2.Response:
        """POST a chat completions request through the SDK, which adds the
        headers and turns a failed request into its exception; the reply comes
        back as the raw HTTP response, read here without the SDK's models (with
        `stream`, unread: the caller closes it)."""
        return await self._sdk.post(
            "/chat/completions",
            cast_to=httpx2.Response,
            content=body,
            options={"headers": {"Content-Type": "application/json"}},
            stream=stream,
        )

    def _new_call_id(self) -> str:
        """An id for a tool call the server sent without one (unique per client)."""
        return f"call_{next(self._call_ids)}"

    def _completion_from_data(self, data: dict[str, Any]) -> Completion:
        choices = data.get("choices")
        if not choices or not isinstance(choices, list):
            raise _BadReply("the LLM server answered without any choices")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise _BadReply("the LLM server answered without a message")
        calls = message.get("tool_calls")
        tool_calls = tuple(
            ToolCall(
                id=_text(call.get("id")) or self._new_call_id(),
                name=name,
                arguments=_text(function.get("arguments")) or "{}",
            )
            for call in (calls if isinstance(calls, list) else ())
            # Only function calls with a name can be executed.
            if isinstance(call, dict)
            and isinstance(function := call.get("function"), dict)
            and (name := _text(function.get("name")))
        )
        return Completion(
            content=_text(message.get("content")),
            tool_calls=tool_calls,
            usage=_usage(data.get("usage")),
            finish_reason=_text(choice.get("finish_reason")) or None,
        )

    def _failure(self, exc: Exception) -> Failure:
        """What one failed attempt means: its message, and whether to retry."""
        message, retryable, after = _meaning(exc, self._timeout_s)
        detail = f"{self._base_url}: {message}"
        if not isinstance(exc, openai.APIStatusError):
            cause = exc.__cause__
            detail += f" [{type(exc).__name__}: {exc}]"
            if cause is not None:
                detail += f" [{type(cause).__name__}: {cause}]"
        return Failure(self._scrub(message), retryable, after, self._scrub(detail))

    def _scrub(self, text: str) -> str:
        return redact(text, self._api_key)


class _BadReply(Exception):
    """A reply that parsed but cannot be used (not retried)."""


class _CutShort(Exception):
    """A stream that ended without a finish reason: it was cut off."""


_FAULTS = (openai.OpenAIError, json.JSONDecodeError, _BadReply, _CutShort)
"""What a failed attempt raises; anything else is a bug, not a fault."""

_RETRIED_STATUSES = frozenset({408, 409, 429})


def _meaning(exc: Exception, timeout_s: float) -> tuple[str, bool, float | None]:
    """The user's message for `exc`, whether it is worth retrying, and the
    server's `Retry-After`."""
    if isinstance(exc, openai.APITimeoutError) and _timed_out(exc):
        return f"the LLM request timed out after {timeout_s:g}s", True, None
    if isinstance(exc, openai.APIConnectionError):
        return _connection_message(exc), True, None
    if isinstance(exc, openai.APIStatusError):
        return _status_meaning(exc)
    if isinstance(exc, json.JSONDecodeError):
        return "the LLM server sent a malformed reply (invalid JSON)", False, None
    if isinstance(exc, _BadReply):
        return str(exc), False, None
    if isinstance(exc, _CutShort):
        message = "the LLM server's reply stopped before it was complete"
        return message, True, None
    if isinstance(exc, openai.APIResponseValidationError):
        return "the LLM server sent a reply of an unexpected shape", False, None
    if isinstance(exc, openai.APIError):
        return f"the LLM server reported an error: {exc.message}", False, None
    return "the LLM request failed", False, None


def _timed_out(exc: BaseException) -> bool:
    """Whether a timeout error was one: the aiohttp transport under the SDK
    also reports a refused or dropped connection as a connect timeout, but
    only a real one has a `TimeoutError` among its causes."""
    causes = list(_chain(exc))[1:]
    # no cause at all: take it at its word
    return not causes or any(isinstance(c, TimeoutError) for c in causes)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what caused it, and so on (each once)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        yield cause
        cause = cause.__cause__ or cause.__context__


def _status_meaning(exc: openai.APIStatusError) -> tuple[str, bool, float | None]:
    status = exc.status_code
    message = f"the LLM server answered {status}: {_status_detail(exc)}"
    headers = exc.response.headers
    should = headers.get("x-should-retry")
    if should in ("true", "false"):
        retryable = should == "true"
    else:
        retryable = status in _RETRIED_STATUSES or status >= 500
    return message, retryable, retry_after_s(headers, time.time())


# -- request mapping ---------------------------------------------------------


def _payload(request: LLMRequest, *, default_model: str) -> dict[str, Any]:
    """The chat completions request body (without `stream`)."""
    payload: dict[str, Any] = {
        "model": request.model or default_model,
        "messages": [_message_param(message) for message in request.messages],
    }
    if request.tools:
        payload["tools"] = [_tool_param(spec) for spec in request.tools]
        # Without tools there is nothing to choose from: send neither.
        if request.tool_choice is not None:
            payload["tool_choice"] = request.tool_choice
    if request.temperature is not None:
        payload["temperature"] = request.temperature
    return payload


def _encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def _message_param(message: Message) -> dict[str, Any]:
    """One `Message` as an OpenAI message, without null fields."""
    role = message.role
    if role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content or "",
        }
    param: dict[str, Any] = {"role": role}
    if role != "assistant" or message.content is not None or not message.tool_calls:
        param["content"] = message.content or ""
    if role == "assistant" and message.tool_calls:
        param["tool_calls"] = [_tool_call_param(call) for call in message.tool_calls]
    if message.name is not None:
        param["name"] = message.name
    return param


def _tool_call_param(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _tool_param(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


# -- response mapping --------------------------------------------------------

_SSE = SSEReader()


async def _chunks(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    """The stream's chunks, parsed, up to `[DONE]`; read failures become the
    SDK's exceptions, an error event the server sends an `APIError`."""
    try:
        async for data in _SSE.events(response.aiter_bytes()):
            if data == b"[DONE]":
                return
            chunk = _json_object(data)
            error = chunk.get("error")
            if error is not None:
                message = error.get("message") if isinstance(error, dict) else error
                raise openai.APIError(
                    str(message or "the stream reported an error"),
                    response.request,
                    body=error,
                )
            yield chunk
    except httpx2.TimeoutException as exc:
        raise openai.APITimeoutError(request=response.request) from exc
    except (httpx2.TransportError, EventTooLarge) as exc:
        raise openai.APIConnectionError(request=response.request) from exc


def _json_object(raw: bytes) -> dict[str, Any]:
    """`raw` parsed as a JSON object (`json.JSONDecodeError` if it is not JSON)."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise _BadReply("the LLM server sent a reply of an unexpected shape")
    return data


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _usage(usage: object) -> Usage:
    """Provider usage as `Usage` (one LLM call); missing numbers count as 0."""
    if not isinstance(usage, dict):
        return Usage(llm_calls=1)
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    total = _count(usage.get("total_tokens")) or prompt + completion
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        llm_calls=1,
    )


@dataclass
class _PartialCall:
    """A streamed tool call being assembled from its fragments."""

    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamAssembler:
    """Folds chat completion chunks into the final `Completion`.

    Tool-call fragments are matched to their call by `index`; servers that omit
    it are handled by id, else a fragment carrying a name starts a new call and
    one without continues the latest. A fragment whose index is taken by a call
    with a different id (servers that send index 0 for every parallel call)
    starts a new call.
    """

    new_call_id: Callable[[], str]
    text: list[str] = field(default_factory=list)
    calls: list[_PartialCall] = field(default_factory=list)
    by_index: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage | None = None
    finish_reason: str | None = None

    def feed(self, chunk: dict[str, Any]) -> str:
        """Absorb one chunk; return its new text ("" when none)."""
        chunk_usage = chunk.get("usage")
        if chunk_usage is not None:
            self.usage = _usage(chunk_usage)
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list):
            return ""
        new_text = ""
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # only the first choice is used (n is never > 1)
            finish = choice.get("finish_reason")
            if finish:
                self.finish_reason = str(finish)
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            fragments = delta.get("tool_calls")
            if fragments and isinstance(fragments, list):
                for fragment in fragments:
                    if isinstance(fragment, dict):
                        self._feed_tool_call(fragment)
            content = delta.get("content")
            if content and isinstance(content, str):
                self.text.append(content)
                new_text += content
        return new_text

    def completion(self) -> Completion:
        """The whole reply; `_CutShort` if the stream ended before its finish
        reason (the connection closed before the reply was complete)."""
        if self.finish_reason is None:
            raise _CutShort("the stream ended without a finish reason")
        return Completion(
            content="".join(self.text),
            tool_calls=tuple(self._finished_calls()),
            usage=self.usage or Usage(llm_calls=1),
            finish_reason=self.finish_reason,
        )

    def _feed_tool_call(self, fragment: dict[str, Any]) -> None:
        function = fragment.get("function")
        if not isinstance(function, dict):
            function = {}
        name = _text(function.get("name"))
        index = fragment.get("index")
        call = self._call_for(
            index=index if isinstance(index, int) else None,
            call_id=_text(fragment.get("id")) or None,
            name=name,
        )
        if name and not call.name:
            call.name = name
        arguments = _text(function.get("arguments"))
        if arguments:
            call.arguments.append(arguments)

    def _call_for(
        self, *, index: int | None, call_id: str | None, name: str
    ) -> _PartialCall:
        if call_id is not None:
            for call in self.calls:
                if call.id == call_id:
                    return call
        if index is not None:
            known = self.by_index.get(index)
            if known is not None and not (call_id and known.id and known.id != call_id):
                return known
            call = self._start_call(call_id)
            self.by_index[index] = call
            return call
        latest = self.calls[-1] if self.calls else None
        if latest is None or call_id is not None or (name and latest.name):
            return self._start_call(call_id)
        return latest

    def _start_call(self, call_id: str | None) -> _PartialCall:
        call = _PartialCall(id=call_id)
        self.calls.append(call)
        return call

    def _finished_calls(self) -> Iterable[ToolCall]:
        for call in self.calls:
            if not call.name:
                continue  # nothing callable was streamed
            yield ToolCall(
                id=call.id or self.new_call_id(),
                name=call.name,
                arguments="".join(call.arguments) or "{}",
            )


# -- error messages ----------------------------------------------------------


def _status_detail(exc: openai.APIStatusError) -> str:
    """The server's own error message, else its body, else the HTTP reason."""
    body = exc.body
    detail: str | None = None
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message.strip():
            detail = message.strip()
        elif body:
            detail = json.dumps(body, ensure_ascii=False)
    elif isinstance(body, str) and body.strip():
        detail = body.strip()
    if not detail:
        detail = exc.response.reason_phrase or "no details given"
    if len(detail) > _MAX_ERROR_DETAIL:
        detail = detail[:_MAX_ERROR_DETAIL] + "…"
    return detail


_CLOSED = (
    ConnectionResetError,
    aiohttp.ClientPayloadError,
    aiohttp.ServerDisconnectedError,
)
"""What a connection the server closed mid-reply raises (under the SDK's own)."""


def _connection_message(exc: BaseException) -> str:
    """Why a connection failed, from the exception chain, in plain words."""
    for cause in _chain(exc):
        text = str(cause)
        if isinstance(cause, ConnectionRefusedError) or "Connection refused" in text:
            return "cannot reach the LLM server: connection refused"
        if "Connect call failed" in text:
            return "cannot reach the LLM server: connection refused"
        if "Name or service not known" in text or "nodename nor servname" in text:
            return "cannot reach the LLM server: unknown host"
        if "certificate" in text.lower() or "SSL" in text:
            return "cannot reach the LLM server: the TLS handshake failed"
        if isinstance(cause, _CLOSED) or "peer closed" in text:
            return "the LLM server closed the connection before its reply was complete"
    return "cannot reach the LLM server: connection error"
