"""`OtelTracing`: spans recorded with the OpenTelemetry SDK.

Imported only when traces are on (`signals.tracing_from`). Each app has
its own `TracerProvider` (never the process-wide one: several apps in one
process keep their own exporters); the context that says which span is
current is OpenTelemetry's, shared by the process, so a `traceparent`
read here (`current_traceparent`) is whichever app's span is current.

The exporter is chosen by the standard variables (`OTEL_TRACES_EXPORTER`:
otlp, the default when an OTLP endpoint is set, or console), batched off
the event loop; tests hand one in (`OtelTracing(exporter=…)`, exported as
each span ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from backend.telemetry.tracing import Attributes, AttributeValue
from backend.telemetry.tracing import SpanKind as Kind

_PROPAGATOR = TraceContextTextMapPropagator()


@dataclass(slots=True)
class _Deferred:
    """A span not made yet (`OtelTracing.deferred`)."""

    name: str
    attributes: Attributes | None
    started_ns: int
    under: trace.Span
    """The span current when it began: made only for a span opened there."""
    span: trace.Span | None = None


_DEFERRED: ContextVar[_Deferred | None] = ContextVar("loopwire_deferred", default=None)
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
_KINDS["server"] = SpanKind.SERVER


class OtelSpan:
    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set(self, key: str, value: AttributeValue) -> None:
        self._span.set_attribute(key, value)

    def fail(self, error_type: str, message: str = "") -> None:
        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, message or None))

    def link(self, traceparent: str | None) -> None:
        linked = _span_context(traceparent)
        if linked is not None:
            self._span.add_link(linked)

    @property
    def traceparent(self) -> str | None:
        return _traceparent_of(self._span)

    @property
    def trace_id(self) -> str | None:
        found = self._span.get_span_context()
        return trace.format_trace_id(found.trace_id) if found.is_valid else None


class OtelTracing:
    enabled = True

    def __init__(
        self,
        *,
        service_name: str = "loopwire",
        exporter: SpanExporter | None = None,
        exporter_name: str = "otlp",
        capture_content: bool = False,
        attributes: Mapping[str, str] | None = None,
    ) -> None:
        """`exporter`: where spans go, each as it ends (tests); else the one
        `exporter_name` names, in batches."""
        resource = Resource.create({"service.name": service_name, **(attributes or {})})
        self.provider = TracerProvider(resource=resource)
        if exporter is not None:
            self.provider.add_span_processor(SimpleSpanProcessor(exporter))
        else:
            self.provider.add_span_processor(
                BatchSpanProcessor(_exporter(exporter_name))
            )
        self._tracer = self.provider.get_tracer("loopwire")
        self.capture_content = capture_content
        _quiet_drops()

    def span(
        self,
        name: str,
        attributes: Attributes | None = None,
        *,
        kind: Kind = "internal",
        parent: str | None = None,
        current: bool = True,
    ) -> contextlib.AbstractContextManager[OtelSpan]:
        return self._opened(name, attributes, kind, parent, current)

    @contextlib.contextmanager
    def deferred(
        self, name: str, attributes: Attributes | None = None
    ) -> Iterator[None]:
        """A span made only if a span is opened inside it, directly (then
        as that span's parent, started when this began); else nothing."""
        held = _Deferred(name, attributes, time.time_ns(), trace.get_current_span())
        token = _DEFERRED.set(held)
        try:
            yield
        except asyncio.CancelledError:
            if held.span is not None:
                held.span.set_attribute("loopwire.cancelled", True)
            raise
        finally:
            _DEFERRED.reset(token)
            if held.span is not None:
                held.span.end()

    def _parent(self, parent: str | None) -> otel_context.Context | None:
        """The context a new span starts in: the `traceparent` given, else
        a deferred span's (made now) if nothing opened since it began."""
        if parent:
            return _PROPAGATOR.extract({"traceparent": parent})
        held = _DEFERRED.get()
        if held is None or trace.get_current_span() is not held.under:
            return None
        if held.span is None:
            held.span = self._tracer.start_span(
                held.name, attributes=held.attributes, start_time=held.started_ns
            )
        return trace.set_span_in_context(held.span)

    @contextlib.contextmanager
    def _opened(
        self,
        name: str,
        attributes: Attributes | None,
        kind: Kind,
        parent: str | None,
        current: bool,
    ) -> Iterator[OtelSpan]:
        context = self._parent(parent)
        span = self._tracer.start_span(
            name,
            context=context,
            kind=_KINDS[kind],
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        token = (
            otel_context.attach(trace.set_span_in_context(span)) if current else None
        )
        try:
            yield OtelSpan(span)
        except asyncio.CancelledError:
            span.set_attribute("loopwire.cancelled", True)
            raise
        except GeneratorExit:
            raise
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(exc)[:200] or None))
            raise
        finally:
            if token is not None:
                otel_context.detach(token)
            span.end()

    def close(self) -> None:
        self.provider.shutdown()


def _exporter(name: str) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    # imported here: its protobuf and HTTP modules only when used
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter,
    )

    return OTLPSpanExporter()


def _span_context(traceparent: str | None) -> trace.SpanContext | None:
    if not traceparent:
        return None
    found = trace.get_current_span(
        _PROPAGATOR.extract({"traceparent": traceparent})
    ).get_span_context()
    return found if found.is_valid else None


def _traceparent_of(span: trace.Span) -> str | None:
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
    return carrier.get("traceparent")


def current_traceparent() -> str | None:
    span = trace.get_current_span()
    return _traceparent_of(span) if span.get_span_context().is_valid else None


@contextlib.contextmanager
def attached(traceparent: str) -> Iterator[None]:
    token = otel_context.attach(_PROPAGATOR.extract({"traceparent": traceparent}))
    try:
        yield
    finally:
        otel_context.detach(token)


DROPS_LOGGER = "opentelemetry.sdk._shared_internal"
"""Where the SDK warns that it dropped a span: once for every span while the
collector is down (each warning a log record made, its caller looked up,
thousands a second under load). The exporter's own error says the
collector cannot be reached, once per batch; that is the line kept."""


def _quiet_drops() -> None:
    logging.getLogger(DROPS_LOGGER).setLevel(logging.ERROR)
