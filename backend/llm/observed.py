"""`ObservedLLM`: an `LLMClient` that records each call it passes on.

Every call becomes a `chat {model}` span (OpenTelemetry's GenAI
conventions: the operation, provider, requested model, the tokens the
server reported, the finish reason; how many requests it took; the time to
the first token of a stream) and counts in the metrics (calls by outcome,
their time, tokens by kind). Message contents join the span only when
`Tracing.capture_content` says so.

The span of a stream is not made current: a generator's `yield`s may
resume in another task's context.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

from backend.errors import LLMError
from backend.llm.base import (
    Completion,
    LLMClient,
    LLMRequest,
    StreamEvent,
    TextDelta,
)
from backend.llm.replies.cutoff import ReplyCutOff
from backend.telemetry.signals import Telemetry
from backend.telemetry.tracing import Attributes, Span


class ObservedLLM:
    def __init__(
        self,
        llm: LLMClient,
        telemetry: Telemetry,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.inner = llm
        self._tracing = telemetry.tracing
        self._metrics = telemetry.metrics
        self._clock = clock

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def provider(self) -> str:
        return self.inner.provider

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def complete(self, request: LLMRequest) -> Completion:
        model = request.model or self.inner.model
        started = self._clock()
        with self._tracing.span(
            f"chat {model}", self._attributes(request, model), kind="client"
        ) as span:
            try:
                reply = await self.inner.complete(request)
            except BaseException as exc:
                self._failed(span, model, started, exc)
                raise
            self._done(span, model, started, reply)
            return reply

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        model = request.model or self.inner.model
        started = self._clock()
        attributes = self._attributes(request, model)
        with self._tracing.span(
            f"chat {model}", attributes, kind="client", current=False
        ) as span:
            first = True
            try:
                async for event in self.inner.stream(request):
                    if first and isinstance(event, TextDelta):
                        first = False
                        ttft = round(self._clock() - started, 6)
                        span.set("loopwire.llm.time_to_first_token_s", ttft)
                    elif isinstance(event, Completion):
                        self._done(span, model, started, event)
                    yield event
            except BaseException as exc:
                self._failed(span, model, started, exc)
                raise

    def _attributes(self, request: LLMRequest, model: str) -> Attributes:
        if not self._tracing.enabled:
            return {}
        attributes: dict[str, str | float | bool] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.inner.provider,
            "gen_ai.request.model": model,
            "loopwire.phase": request.purpose,
        }
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if self._tracing.capture_content:
            attributes["gen_ai.input.messages"] = json.dumps(
                [{"role": m.role, "content": m.content} for m in request.messages],
                ensure_ascii=False,
            )
        return attributes

    def _done(self, span: Span, model: str, started: float, reply: Completion) -> None:
        usage = reply.usage
        self._metrics.llm_call(model, "ok", self._clock() - started, usage)
        if not self._tracing.enabled:
            return
        span.set("gen_ai.response.model", model)
        span.set("gen_ai.usage.input_tokens", usage.prompt_tokens)
        span.set("gen_ai.usage.output_tokens", usage.completion_tokens)
        span.set("gen_ai.response.finish_reasons", [reply.finish_reason or "unknown"])
        span.set("loopwire.llm.attempts", reply.attempts)
        if usage.cached_tokens:
            span.set("loopwire.usage.cached_input_tokens", usage.cached_tokens)
        if usage.reasoning_tokens:
            span.set("loopwire.usage.reasoning_tokens", usage.reasoning_tokens)
        if usage.estimated_calls:
            span.set("loopwire.usage.estimated", True)
        if reply.tool_calls:
            span.set("loopwire.llm.tool_calls", len(reply.tool_calls))
        if self._tracing.capture_content:
            answer = {"role": "assistant", "content": reply.content}
            span.set("gen_ai.output.messages", json.dumps([answer], ensure_ascii=False))

    def _failed(
        self, span: Span, model: str, started: float, exc: BaseException
    ) -> None:
        cancelled = isinstance(exc, asyncio.CancelledError | GeneratorExit)
        outcome = "cancelled" if cancelled else "error"
        usage = exc.usage if isinstance(exc, ReplyCutOff) else None
        self._metrics.llm_call(model, outcome, self._clock() - started, usage)
        if isinstance(exc, LLMError):
            span.fail(type(exc).__name__, str(exc)[:300])
