"""`OpenAIClient`: the `LLMClient` of any OpenAI-compatible chat completions
server — OpenAI itself, Ollama, vLLM, LM Studio, llama.cpp.

It holds the `openai` SDK client (for its headers, its aiohttp transport and
its exceptions; each request built as the first was, `request_template`, and
the reply read raw, not through the SDK's models), makes the calls and
retries them. The payloads are `wire`'s, streams are assembled
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
stream is retried only while none of its text has reached the caller.

Refusals: what a request carries besides its model, messages and tools is its
server profile's (`profiles`, `LOOPWIRE_LLM_PROFILE`). A 400 (or 422) whose
message names a parameter the request carried — `stream_options`,
`tool_choice`, `parallel_tool_calls`, `temperature`, or the tools themselves
(`profiles.refused`) — is no fault: the call is asked again at once without
it (not an attempt of the table above, and nothing the user sees), and this
client never sends it again (`refusals`, logged once at INFO). Named profiles
learn as `auto` does. A 400 that names nothing the request carried is the
"other 4xx" of the table.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Collection, Mapping
from dataclasses import replace

import httpx2
import openai

from backend.llm.base import Completion, LLMRequest, StreamEvent, TextDelta
from backend.llm.openai_compat import faults, wire
from backend.llm.openai_compat.profiles import (
    Profile,
    profile_named,
    refused,
    wants_reasoning,
)
from backend.llm.openai_compat.request_template import TemplatedOpenAI
from backend.llm.openai_compat.stream import StreamAssembler, chunks
from backend.llm.replies.normaliser import ReplyStream, normalise
from backend.llm.retries import Failure, Retrier, RetryPolicy, Sleep
from backend.llm.tokens import with_estimate
from backend.redaction import bare_urls, redact

__all__ = ["PLACEHOLDER_API_KEY", "OpenAIClient"]

log = logging.getLogger(__name__)

PLACEHOLDER_API_KEY = "not-needed"
"""Sent when no key is configured: local servers ignore it, the SDK needs one."""

_REFUSALS = (openai.BadRequestError, openai.UnprocessableEntityError)
"""The answers that may refuse a parameter (400, 422)."""


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
        profile: str | Profile = "auto",
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._model = model
        self._profile = profile_named(profile) if isinstance(profile, str) else profile
        self._refusals: dict[str, str] = {}
        self._timeout_s = timeout_s
        self._api_key = api_key or ""
        # aiohttp under the SDK: its pool finds a free connection in constant
        # time, where httpx's scans them all at every request's start and end
        pool = httpx2.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
        )
        http_client = openai.DefaultAioHttpClient(limits=pool, timeout=timeout_s)
        self._sdk = TemplatedOpenAI(
            api_key=self._api_key or PLACEHOLDER_API_KEY,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,  # retried here, once, not by the SDK as well
            http_client=http_client,
        )
        self._retry = RetryPolicy(max_retries, retry_backoff_s, retry_max_wait_s)
        self._sleep = sleep
        self._base_url = bare_urls(str(self._sdk.base_url).rstrip("/"))
        self._call_ids = itertools.count(1)

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return "openai"

    @property
    def profile(self) -> Profile:
        """What this client's requests carry now: its profile, less every
        parameter the server has refused."""
        return self._profile

    @property
    def refusals(self) -> Mapping[str, str]:
        """Each parameter the server refused, with the message it refused it
        with, in the order they came."""
        return dict(self._refusals)

    @property
    def base_url(self) -> str:
        """The server's base URL as the SDK resolved it (no trailing slash),
        without credentials or query."""
        return self._base_url

    async def aclose(self) -> None:
        await self._sdk.close()

    async def complete(self, request: LLMRequest) -> Completion:
        """One non-streaming chat completion."""
        retrier = Retrier(self._retry, self._sleep)
        while True:
            try:
                response = await self._ask(request, stream=False)
                data = wire.json_object(response.content)
                reply = wire.completion(data, new_call_id=self._new_call_id)
                normal = normalise(
                    reply, offered=offered(request), new_call_id=self._new_call_id
                )
                return _attempts(_counted(request, normal), retrier)
            except faults.FAULTS as exc:
                await retrier.after(self._failure(exc))

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        """Yield a `TextDelta` per content piece, then one final `Completion`.

        A failed attempt is retried only if none of its text was yielded.
        Leaving early (break, cancellation) closes the upstream HTTP response.
        """
        retrier = Retrier(self._retry, self._sleep)
        while True:
            assembler = StreamAssembler(new_call_id=self._new_call_id)
            shown = ReplyStream(offered=offered(request))
            try:
                response = await self._ask(request, stream=True)
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
            yield _attempts(_counted(request, completion), retrier)
            return

    async def _ask(self, request: LLMRequest, *, stream: bool) -> httpx2.Response:
        """Send `request` as this client's profile has it. A refusal of a
        parameter it carried drops that parameter for good, and the request
        is sent again at once without it (each time one parameter fewer, so
        this ends); any other failure is raised."""
        while True:
            body, fields = wire.body(
                request, default_model=self._model, profile=self._profile, stream=stream
            )
            try:
                return await self._post(body, stream=stream)
            except _REFUSALS as exc:
                if not self._learn(fields, exc):
                    raise

    def _learn(self, fields: Collection[str], exc: openai.APIStatusError) -> bool:
        """Drop what `exc` refuses of a body with `fields` from the profile;
        False if it refuses nothing the body carried."""
        detail = redact(faults.status_detail(exc), self._api_key)
        if wants_reasoning(self._profile, detail):
            self._profile = replace(self._profile, reasoning_back=True)
            log.info(
                "the LLM server %s wants the thinking behind tool calls sent "
                "back (profile %s): %s",
                self._base_url,
                self._profile.name,
                detail,
            )
            return True
        param = exc.body.get("param") if isinstance(exc.body, dict) else None
        dropped = refused(fields, detail, param)
        for parameter in dropped:
            if parameter in self._refusals:
                continue  # a call sent before it was dropped: already known
            self._refusals[parameter] = detail
            self._profile = self._profile.without(parameter)
            log.info(
                "the LLM server %s refused %s, so it is no longer sent "
                "(profile %s): %s",
                self._base_url,
                parameter,
                self._profile.name,
                detail,
            )
        return bool(dropped)

    async def _post(self, body: bytes, *, stream: bool) -> httpx2.Response:
        """POST a chat completions request through the SDK, which adds the
        headers (as it built them for the first: `request_template`) and
        turns a failed request into its exception; the reply comes back as
        the raw HTTP response, read here without the SDK's models (with
        `stream`, unread: the caller closes it)."""
        return await self._sdk.post_chat_completions(body, stream=stream)

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


def _attempts(reply: Completion, retrier: Retrier) -> Completion:
    """The reply, saying how many requests it took when more than one."""
    if retrier.attempts == 1:
        return reply
    return reply.model_copy(update={"attempts": retrier.attempts})


def _counted(request: LLMRequest, reply: Completion) -> Completion:
    """The reply with its usage: the server's, else estimated (and marked)."""
    return with_estimate(request, reply) if reply.usage.estimated_calls else reply
