"""A small OTLP/HTTP trace receiver, for tests that read what real
processes export.

`running_otlp_receiver()` serves `POST /v1/traces` (OTLP over HTTP with
protobuf, as `opentelemetry-exporter-otlp-proto-http` sends it) on
127.0.0.1 and a free port; point a process at it with
`OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint`. Every span received is
kept as a `ReceivedSpan`, in the order it arrived.
`await receiver.until(predicate, limit_s)` returns the spans once
`predicate` holds for them, woken by each export (no polling); past the
limit it fails, saying what did arrive.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from tests.live_server import LiveServer

PROTOBUF = "application/x-protobuf"
KINDS = {
    ProtoSpan.SPAN_KIND_UNSPECIFIED: "unspecified",
    ProtoSpan.SPAN_KIND_INTERNAL: "internal",
    ProtoSpan.SPAN_KIND_SERVER: "server",
    ProtoSpan.SPAN_KIND_CLIENT: "client",
    ProtoSpan.SPAN_KIND_PRODUCER: "producer",
    ProtoSpan.SPAN_KIND_CONSUMER: "consumer",
}


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as an exporter sent it, ids in lower-case hex."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    """None: a root span."""
    attributes: dict[str, Any]
    links: list[tuple[str, str]]
    """Each link's (trace_id, span_id)."""
    service: str | None
    """Its resource's `service.name`."""
    order: int
    """Its place among every span received (0 first)."""
    kind: str = "internal"

    def describe(self) -> str:
        parent = self.parent_span_id or "root"
        return (
            f"#{self.order} {self.name!r} trace={self.trace_id} span={self.span_id} "
            f"parent={parent} links={self.links} attributes={self.attributes}"
        )


Predicate = Callable[[list[ReceivedSpan]], bool]


@dataclass
class OtlpReceiver:
    spans: list[ReceivedSpan] = field(default_factory=list)
    exports: int = 0
    """How many export requests arrived."""
    server: LiveServer | None = None
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    @property
    def endpoint(self) -> str:
        """The base URL for `OTEL_EXPORTER_OTLP_ENDPOINT`."""
        assert self.server is not None, "the receiver is not started"
        return self.server.url("").rstrip("/")

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/traces", self._export, methods=["POST"])])

    async def _export(self, request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != PROTOBUF:
            return PlainTextResponse("OTLP over HTTP with protobuf only", 415)
        try:
            export = ExportTraceServiceRequest.FromString(
                _decoded(await request.body(), request.headers)
            )
        except (DecodeError, OSError, zlib.error):
            return PlainTextResponse("not an ExportTraceServiceRequest", 400)
        async with self._arrived:
            self.exports += 1
            self.spans.extend(_spans(export, first=len(self.spans)))
            self._arrived.notify_all()
        return Response(
            ExportTraceServiceResponse().SerializeToString(), media_type=PROTOBUF
        )

    async def until(self, predicate: Predicate, limit_s: float) -> list[ReceivedSpan]:
        """The spans received, once `predicate` holds for them (waits up to
        `limit_s`, woken by each export)."""
        try:
            async with asyncio.timeout(limit_s), self._arrived:
                await self._arrived.wait_for(lambda: predicate(list(self.spans)))
                return list(self.spans)
        except TimeoutError:
            raise AssertionError(
                f"not received within {limit_s} s; {self.exports} exports:\n"
                + described(self.spans)
            ) from None


def described(spans: Sequence[ReceivedSpan]) -> str:
    """One line per span: what a failure message shows."""
    return "\n".join(s.describe() for s in spans) or "(no spans)"


def _decoded(body: bytes, headers: Any) -> bytes:
    encoding = headers.get("content-encoding", "").strip().lower()
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


def _spans(export: ExportTraceServiceRequest, first: int) -> list[ReceivedSpan]:
    found: list[ReceivedSpan] = []
    for resource_spans in export.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        service = resource.get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(_span(span, service, first + len(found)))
    return found


def _span(span: ProtoSpan, service: str | None, order: int) -> ReceivedSpan:
    return ReceivedSpan(
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex() or None,
        attributes=_attributes(span.attributes),
        links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
        service=service,
        order=order,
        kind=KINDS.get(span.kind, str(span.kind)),
    )


def _attributes(pairs: Sequence[KeyValue]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    match value.WhichOneof("value"):
        case "string_value":
            return value.string_value
        case "bool_value":
            return value.bool_value
        case "int_value":
            return value.int_value
        case "double_value":
            return value.double_value
        case "bytes_value":
            return value.bytes_value
        case "array_value":
            return tuple(_value(item) for item in value.array_value.values)
        case "kvlist_value":
            return _attributes(value.kvlist_value.values)
    return None


@asynccontextmanager
async def running_otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    """A started receiver, stopped on exit."""
    receiver = OtlpReceiver()
    receiver.server = LiveServer(receiver.app(), lifespan="off")
    await receiver.server.start()
    try:
        yield receiver
    finally:
        await receiver.server.stop()
