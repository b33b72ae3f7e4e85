"""`OpenAIClient`: the `LLMClient` of any OpenAI-compatible chat completions
server — OpenAI itself, Ollama, vLLM, LM Studio, llama.cpp.

It holds the `openai` SDK client (for its headers, its aiohttp transport and
its exceptions; the reply is read raw, not through the SDK's models), makes
the calls and retries them. The payloads are `wire`'s, streams are assembled
by `stream`, every reply is put through `backend/llm/replies` (thinking
apart, tool calls written as text made real), and what a failure means is
`faults`'s.

Retries: the SDK's own are off; this client retries through
`backend.llm.retries`, one `Retrier` per call, so a call makes at most
`1 + max_retries` attempts (3 by default), whatever fails:

    fault                                          retried  wait before retry n
    ---------------------------------------------  -------  ---------------------
    timeout: connecting, or any read (timeout_s)   yes      backoff
    connection refused, failed, or closed early;   yes      backoff
      a stream event over the SSE size limit
    HTTP 408, 409, 429, 5xx                        yes      Retry-After, else backoff
    `x-should-retry: true` / `false` on an answer  as told  Retry-After, else backoff
    a stream that ended without a finish reason    yes      backoff
    other 4xx; malformed JSON; a reply without     no       -
      choices or message; an error event in a
      stream

backoff is `retry_backoff_s * 2 ** (n - 1)` (0.5 s, then 1 s by default), and
no wait is longer than `retry_max_wait_s` (30 s), `Retry-After` included. A
stream is retried only while none of its text has reached the caller. A 400
that names `stream_options` is no fault: the stream is asked for again without
it, and this client never asks for it again.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx2
import openai

from backend.llm.base import Completion, LLMRequest, StreamEvent, TextDelta
from backend.llm.openai_compat import faults, wire
from backend.llm.openai_compat.stream import StreamAssembler, chunks
from backend.llm.replies.normaliser import ReplyStream, normalise
from backend.llm.retries import Failure, Retrier, RetryPolicy, Sleep
from backend.redaction import bare_urls

__all__ = ["OpenAIClient"]

_PLACEHOLDER_API_KEY = "not-needed"
"""Sent when no key is configured: local servers ignore it, the SDK needs one."""


class OpenAIClient:
    """`LLMClient` over `openai.AsyncOpenAI` (chat completions).

    `api_key` is the key to send; without one (`None` or "") a placeholder is
    sent, so keyless local servers work. The environment is never read for it:
    `Settings.llm_api_key` (`OPENAI_API_KEY`) is passed in by `app.py`.
    `timeout_s` bounds each network phase of an attempt: connecting, and every
    read — so a server that goes silent, before its answer or between two
    chunks of a stream, fails the attempt after `timeout_s`. A call makes at
    most `1 + max_retries` attempts (see the module docstring); `sleep` is how
    it waits between them. At most `max_connections` requests are open at once
    (and kept open for reuse); more wait for one to come free.
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
        self._api_key = api_key or ""
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
        payload = wire.payload(request, default_model=self._model)
        retrier = Retrier(self._retry, self._sleep)
        while True:
            try:
                response = await self._post(wire.encode(payload), stream=False)
                data = wire.json_object(response.content)
                reply = wire.completion(data, new_call_id=self._new_call_id)
                return normalise(
                    reply, offered=offered(request), new_call_id=self._new_call_id
                )
            except faults.FAULTS as exc:
                await retrier.after(self._failure(exc))

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        """Yield a `TextDelta` per content piece, then one final `Completion`.

        A failed attempt is retried only if none of its text was yielded.
        Leaving early (break, cancellation) closes the upstream HTTP response.
        """
        payload = wire.payload(request, default_model=self._model)
        payload["stream"] = True
        retrier = Retrier(self._retry, self._sleep)
        while True:
            assembler = StreamAssembler(new_call_id=self._new_call_id)
            shown = ReplyStream(offered=offered(request))
            try:
                response = await self._open_stream(payload)
                try:
                    async for data in chunks(response):
                        text = shown.feed(assembler.feed(data))
                        if text:
                            yield TextDelta(text=text)
                finally:
                    await response.aclose()
                rest, completion = shown.finish(
                    assembler.completion(), self._new_call_id
                )
            except faults.FAULTS as exc:
                failure = self._failure(exc)
                if shown.shown:  # the caller has shown it: never twice
                    failure = replace(failure, retryable=False)
                await retrier.after(failure)
                continue
            if rest:  # held back in case it was a call; it was not
                yield TextDelta(text=rest)
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
                return await self._post(wire.encode(with_usage), stream=True)
            except openai.BadRequestError as exc:
                if "stream_options" not in faults.status_detail(exc):
                    raise
                self._stream_usage_supported = False
        return await self._post(wire.encode(payload), stream=True)

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

    def _failure(self, exc: Exception) -> Failure:
        return faults.failure(
            exc,
            timeout_s=self._timeout_s,
            base_url=self._base_url,
            secret=self._api_key,
        )


def offered(request: LLMRequest) -> frozenset[str]:
    """The tools a reply may call: those the request offers, unless it says
    `tool_choice: "none"`."""
    if request.tool_choice == "none":
        return frozenset()
    return frozenset(spec.name for spec in request.tools)
