"""A run as operators see it: its `invoke_agent` span, the fields of its log
lines, and its figures when it ends.

The span follows OpenTelemetry's GenAI conventions for an agent's
invocation. A run continued from its checkpoint (after a restart, on the
instance that took its conversation over, after a wait it was parked in)
opens a new span under its first one (`RunState.trace_context`), so a run
stays one trace wherever it went on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from backend.agent.state import RunState
from backend.telemetry.logs import log_fields
from backend.telemetry.signals import Telemetry
from backend.telemetry.tracing import Span

RUN_SPAN = "invoke_agent loopwire"


@contextlib.contextmanager
def run_span(telemetry: Telemetry, state: RunState, instance: str) -> Iterator[Span]:
    """The run's span, current inside, and its ids on every log line."""
    tracing = telemetry.tracing
    attributes: dict[str, str | bool] = {}
    if tracing.enabled:
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": state.strategy,
            "gen_ai.conversation.id": state.session_id,
            "loopwire.run.id": state.run_id,
            "loopwire.strategy": state.strategy,
            "loopwire.instance": instance,
            "enduser.id": state.owner,
            "loopwire.resumed": state.trace_context is not None,
        }
        if state.request.model:
            attributes["gen_ai.request.model"] = state.request.model
    continued = state.trace_context
    with tracing.span(RUN_SPAN, attributes, parent=continued) as span:
        if continued is None:
            state.trace_context = span.traceparent
        with log_fields(
            run_id=state.run_id,
            conversation_id=state.session_id,
            user=state.owner,
            trace_id=span.trace_id,
        ):
            yield span


def run_ended(
    telemetry: Telemetry, span: Span, state: RunState, duration_s: float
) -> None:
    """The run's ending on its span and in the metrics."""
    reason = state.ending.reason if state.ending is not None else "error"
    telemetry.metrics.run_ended(state.strategy, reason, duration_s)
    span.set("loopwire.end_reason", reason)
    span.set("loopwire.steps", state.step)
    span.set("gen_ai.usage.input_tokens", state.usage.prompt_tokens)
    span.set("gen_ai.usage.output_tokens", state.usage.completion_tokens)
    if reason == "error":
        error = state.ending.error if state.ending is not None else None
        span.fail("run_error", error or "")
