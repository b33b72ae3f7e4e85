"""`Metrics`: what the server counts and times, for Prometheus to scrape.

One `PrometheusMetrics` per app, in its own registry (several apps in one
process keep their own figures), served at `GET /metrics` in the text
format. Labels come from small fixed sets — strategies, end reasons,
phases, the configured models and tools, outcomes — never from ids, so a
series count stays bounded however many runs there are. What is a level
rather than a count (sessions by state, the bus's queue, the conversations
owned here) is read when scraped, from the `Levels` the service gives.

`NO_METRICS` counts nothing: the default of code run without a server
(unit tests, the offline driver).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from backend.transcript import Usage

# The `_created` series would only double what is served.
disable_created_metrics()  # type: ignore[no-untyped-call]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The media type of `exposition()`: Prometheus's classic text format,
which every Prometheus reads (what `generate_latest` writes)."""

RUN_BUCKETS = (0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
PHASE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
LLM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)
STOP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
TOOL_LABELS = 256
"""The most tool names counted apart; the rest count as `other`."""
FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5)


@dataclass(frozen=True, slots=True)
class Levels:
    """The service's levels at one moment (read at each scrape)."""

    sessions: Mapping[str, int] = field(default_factory=dict)
    """By state: connected (a client attached), in_memory, paused (a run
    waiting for a person)."""
    bus_queue_depth: int = 0
    """Commands and frames waiting to go to other instances."""
    conversations_owned: int = 0


class Metrics(Protocol):
    """The counts and timings the server keeps (`PrometheusMetrics`)."""

    def run_ended(self, strategy: str, reason: str, seconds: float) -> None: ...

    def phase_ended(self, phase: str, seconds: float) -> None: ...

    def llm_call(
        self, model: str, outcome: str, seconds: float, usage: Usage | None
    ) -> None: ...

    def tool_call(self, tool: str, status: str) -> None: ...

    def stop_latency(self, seconds: float) -> None: ...

    def frames_sent(self, count: int) -> None: ...

    def rate_limited(self, limit: str) -> None: ...

    def store_flush(self, seconds: float) -> None: ...

    def read_levels(self, levels: Callable[[], Levels]) -> None:
        """Where a scrape reads the service's levels from."""
        ...

    def exposition(self) -> bytes:
        """Every metric in Prometheus's text format (`CONTENT_TYPE`)."""
        ...


_CallSeries = tuple[Counter, Histogram, Counter, Counter, Counter, Counter]
"""A model call's series: calls, time, tokens in, out, cached, reasoning."""


class NoMetrics:
    """Counts nothing."""

    def run_ended(self, strategy: str, reason: str, seconds: float) -> None:
        pass

    def phase_ended(self, phase: str, seconds: float) -> None:
        pass

    def llm_call(
        self, model: str, outcome: str, seconds: float, usage: Usage | None
    ) -> None:
        pass

    def tool_call(self, tool: str, status: str) -> None:
        pass

    def stop_latency(self, seconds: float) -> None:
        pass

    def frames_sent(self, count: int) -> None:
        pass

    def rate_limited(self, limit: str) -> None:
        pass

    def store_flush(self, seconds: float) -> None:
        pass

    def read_levels(self, levels: Callable[[], Levels]) -> None:
        pass

    def exposition(self) -> bytes:
        return b""


NO_METRICS = NoMetrics()


class PrometheusMetrics:
    """Every metric of one app, in its own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._runs(self.registry)
        self._calls(self.registry)
        self._service(self.registry)
        self._levels = _LevelCollector()
        self.registry.register(self._levels)
        self._tools: set[str] = set()
        self._models: dict[tuple[str, str], _CallSeries] = {}
        """A model call's four series, by (model, outcome)."""

    def _runs(self, reg: CollectorRegistry) -> None:
        self.runs = Counter(
            "loopwire_runs",
            "Runs ended, by strategy and the reason they ended.",
            ["strategy", "reason"],
            registry=reg,
        )
        self.run_seconds = Histogram(
            "loopwire_run_duration_seconds",
            "Wall time of runs, start to end (waits for people included).",
            ["strategy"],
            buckets=RUN_BUCKETS,
            registry=reg,
        )
        self.phase_seconds = Histogram(
            "loopwire_phase_duration_seconds",
            "Time of each phase a run went through (reason, act, observe, ...).",
            ["phase"],
            buckets=PHASE_BUCKETS,
            registry=reg,
        )
        self.stop_seconds = Histogram(
            "loopwire_stop_latency_seconds",
            "From a stop reaching the run's owner to its response_complete.",
            buckets=STOP_BUCKETS,
            registry=reg,
        )

    def _calls(self, reg: CollectorRegistry) -> None:
        self.llm_calls = Counter(
            "loopwire_llm_calls",
            "Model calls, by model and outcome (ok, error, cancelled).",
            ["model", "outcome"],
            registry=reg,
        )
        self.llm_seconds = Histogram(
            "loopwire_llm_call_duration_seconds",
            "Time of model calls, retries included.",
            ["model"],
            buckets=LLM_BUCKETS,
            registry=reg,
        )
        self.tokens = Counter(
            "loopwire_llm_tokens",
            "Tokens of model calls, by model and kind: input, output, and of "
            "those cached_input (read from the server's prompt cache) and "
            "reasoning; estimated where the server reported none.",
            ["model", "kind"],
            registry=reg,
        )
        self.tool_calls = Counter(
            "loopwire_tool_calls",
            "Tool calls settled, by tool and status (ok, error, rejected, ...).",
            ["tool", "status"],
            registry=reg,
        )

    def _service(self, reg: CollectorRegistry) -> None:
        self.frames = Counter(
            "loopwire_frames_sent", "Frames written to WebSocket clients.", registry=reg
        )
        self.limited = Counter(
            "loopwire_rate_limited",
            "Requests refused by a rate limit, by limit.",
            ["limit"],
            registry=reg,
        )
        self.flush_seconds = Histogram(
            "loopwire_store_flush_seconds",
            "Time of each write of a conversation's pending changes.",
            buckets=FLUSH_BUCKETS,
            registry=reg,
        )

    def read_levels(self, levels: Callable[[], Levels]) -> None:
        self._levels.read = levels

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def run_ended(self, strategy: str, reason: str, seconds: float) -> None:
        self.runs.labels(strategy, reason).inc()
        self.run_seconds.labels(strategy).observe(seconds)

    def phase_ended(self, phase: str, seconds: float) -> None:
        self.phase_seconds.labels(phase).observe(seconds)

    def llm_call(
        self, model: str, outcome: str, seconds: float, usage: Usage | None
    ) -> None:
        series = self._models.get((model, outcome))
        if series is None:  # looked up once per model and outcome
            series = self._models[model, outcome] = (
                self.llm_calls.labels(model, outcome),
                self.llm_seconds.labels(model),
                self.tokens.labels(model, "input"),
                self.tokens.labels(model, "output"),
                self.tokens.labels(model, "cached_input"),
                self.tokens.labels(model, "reasoning"),
            )
        calls, duration, tokens_in, tokens_out, cached, reasoning = series
        calls.inc()
        duration.observe(seconds)
        if usage is not None:
            tokens_in.inc(usage.prompt_tokens)
            tokens_out.inc(usage.completion_tokens)
            cached.inc(usage.cached_tokens)
            reasoning.inc(usage.reasoning_tokens)

    def tool_call(self, tool: str, status: str) -> None:
        if tool not in self._tools:  # a name the model made up counts as `other`
            if len(self._tools) >= TOOL_LABELS:
                tool = "other"
            else:
                self._tools.add(tool)
        self.tool_calls.labels(tool, status).inc()

    def stop_latency(self, seconds: float) -> None:
        self.stop_seconds.observe(seconds)

    def frames_sent(self, count: int) -> None:
        self.frames.inc(count)

    def rate_limited(self, limit: str) -> None:
        self.limited.labels(limit).inc()

    def store_flush(self, seconds: float) -> None:
        self.flush_seconds.observe(seconds)


class _LevelCollector(Collector):
    """The gauges, read from the service when scraped."""

    def __init__(self) -> None:
        self.read: Callable[[], Levels] = Levels

    def describe(self) -> Iterator[Metric]:
        return iter(())  # read only at a scrape: nothing to read at registration

    def collect(self) -> Iterator[Metric]:
        levels = self.read()
        sessions = GaugeMetricFamily(
            "loopwire_sessions",
            "Conversations held in memory here, by state.",
            labels=["state"],
        )
        for state in ("connected", "in_memory", "paused"):
            sessions.add_metric([state], levels.sessions.get(state, 0))
        yield sessions
        yield GaugeMetricFamily(
            "loopwire_bus_queue_depth",
            "Messages waiting to go to other instances.",
            value=levels.bus_queue_depth,
        )
        yield GaugeMetricFamily(
            "loopwire_conversations_owned",
            "Conversations this instance owns (holds the lease of).",
            value=levels.conversations_owned,
        )
