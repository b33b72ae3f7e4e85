"""`Tracing`: the spans the server records, behind a seam.

Traces are off unless the standard `OTEL_*` variables turn them on
(`signals.tracing_from`); then `OtelTracing` (`telemetry/otel.py`, the
only module that imports the OpenTelemetry SDK) records them. Off,
`NO_TRACING` hands out one shared do-nothing span, so the run path pays a
method call per span and imports nothing.

A span opened with `span()` is the current one for the code inside it
(tasks created inside inherit it through `contextvars`), unless
`current=False` (a span kept across the `yield`s of a generator must not
be). Its parent is the current span, or the W3C `traceparent` given as
`parent` (a run continued from its checkpoint, a command from another
instance). `current_traceparent()` is the current span as a `traceparent`,
for what goes to another instance; `continued(traceparent)` makes such a
context current without a span of its own. `deferred()` is a span made only
if a span is opened directly inside it (a phase that calls nothing costs
none).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Literal, Protocol

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[float]
Attributes = Mapping[str, AttributeValue]
SpanKind = Literal["internal", "client", "server"]


class Span(Protocol):
    def set(self, key: str, value: AttributeValue) -> None: ...

    def fail(self, error_type: str, message: str = "") -> None:
        """Status ERROR, with the `error.type` attribute."""
        ...

    def link(self, traceparent: str | None) -> None:
        """A link to another span (by its `traceparent`)."""
        ...

    @property
    def traceparent(self) -> str | None: ...

    @property
    def trace_id(self) -> str | None: ...


class Tracing(Protocol):
    enabled: bool
    capture_content: bool
    """Message contents go into spans (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_
    MESSAGE_CONTENT=true`); off by default."""

    def span(
        self,
        name: str,
        attributes: Attributes | None = None,
        *,
        kind: SpanKind = "internal",
        parent: str | None = None,
        current: bool = True,
    ) -> AbstractContextManager[Span]: ...

    def deferred(
        self, name: str, attributes: Attributes | None = None
    ) -> AbstractContextManager[None]:
        """A span made only if one is opened directly inside it (its child,
        then): a phase that calls the model or runs a tool shows; one that
        only keeps the books does not cost a span."""
        ...

    def close(self) -> None:
        """Send what is buffered and stop (at shutdown)."""
        ...


class NullSpan:
    """Records nothing."""

    __slots__ = ()

    def set(self, key: str, value: AttributeValue) -> None:
        pass

    def fail(self, error_type: str, message: str = "") -> None:
        pass

    def link(self, traceparent: str | None) -> None:
        pass

    @property
    def traceparent(self) -> str | None:
        return None

    @property
    def trace_id(self) -> str | None:
        return None


NULL_SPAN = NullSpan()


class _NullScope:
    """The one context manager of every span not recorded."""

    __slots__ = ()

    def __enter__(self) -> NullSpan:
        return NULL_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NULL_SCOPE = _NullScope()
_NULL_SCOPE_NONE: AbstractContextManager[None] = contextlib.nullcontext()


class NoTracing:
    enabled = False
    capture_content = False

    def span(
        self,
        name: str,
        attributes: Attributes | None = None,
        *,
        kind: SpanKind = "internal",
        parent: str | None = None,
        current: bool = True,
    ) -> AbstractContextManager[Span]:
        return _NULL_SCOPE

    def deferred(
        self, name: str, attributes: Attributes | None = None
    ) -> AbstractContextManager[None]:
        return _NULL_SCOPE_NONE

    def close(self) -> None:
        pass


NO_TRACING = NoTracing()


def current_traceparent() -> str | None:
    """The current span as a W3C `traceparent` (None: no span is current,
    or no tracing was ever turned on in this process)."""
    otel = sys.modules.get("backend.telemetry.otel")
    if otel is None:
        return None
    found: str | None = otel.current_traceparent()
    return found


def continued(traceparent: str | None) -> AbstractContextManager[None]:
    """The context `traceparent` names, current inside (no span of its own)."""
    otel = sys.modules.get("backend.telemetry.otel")
    if otel is None or not traceparent:
        return contextlib.nullcontext()
    scope: AbstractContextManager[None] = otel.attached(traceparent)
    return scope
