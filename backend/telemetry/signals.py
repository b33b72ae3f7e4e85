"""`Telemetry`: the traces and metrics of one app, made from its settings
and the standard `OTEL_*` environment variables.

Traces are on when an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`
or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or `OTEL_TRACES_EXPORTER` names
`otlp` or `console`; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`
turns them off whatever else is set. The SDK reads the rest itself
(endpoint, headers, timeouts, `OTEL_RESOURCE_ATTRIBUTES`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from backend.errors import ConfigError
from backend.telemetry.metrics import NO_METRICS, Metrics, PrometheusMetrics
from backend.telemetry.tracing import NO_TRACING, Tracing

TRUE = ("true", "1", "yes", "on")
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@dataclass(frozen=True, slots=True)
class Telemetry:
    tracing: Tracing = NO_TRACING
    metrics: Metrics = field(default=NO_METRICS)


NO_TELEMETRY = Telemetry()


def traces_exporter(environ: Mapping[str, str]) -> str | None:
    """The span exporter the variables ask for (None: traces are off)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() in TRUE:
        return None
    named = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if named == "none":
        return None
    if named:
        return named.split(",")[0].strip()
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return "otlp" if endpoint else None


def tracing_from(environ: Mapping[str, str]) -> Tracing:
    """`OtelTracing` as the variables say, or `NO_TRACING`."""
    exporter = traces_exporter(environ)
    if exporter is None:
        return NO_TRACING
    if exporter not in ("otlp", "console"):
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER={exporter!r}: loopwire sends traces with "
            "otlp (OTLP over HTTP) or console, or none"
        )
    from backend.telemetry.otel import OtelTracing  # only when on

    return OtelTracing(
        service_name=environ.get("OTEL_SERVICE_NAME") or "loopwire",
        exporter_name=exporter,
        capture_content=environ.get(CAPTURE_CONTENT, "").lower() in TRUE,
    )


def default_telemetry() -> Telemetry:
    """Prometheus metrics, and traces as this process's variables say."""
    return Telemetry(tracing_from(os.environ), PrometheusMetrics())
