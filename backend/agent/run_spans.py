"""The spans of a run's phases and waits (`RunDriver`), through the run's
`Tracing` seam: attributes are made only when traces are on."""

from __future__ import annotations

from contextlib import AbstractContextManager

from backend.agent.loop import AgentContext
from backend.agent.run_control import Suspended
from backend.agent.state import WaitOutcome
from backend.telemetry.tracing import Span


def phase_span(
    ctx: AgentContext, phase: str, step: int
) -> AbstractContextManager[None]:
    """The phase's span, made only when the phase calls the model or runs
    a tool (a phase that only keeps the books costs none)."""
    tracing = ctx.telemetry.tracing
    if not tracing.enabled:
        return tracing.deferred(phase)
    attributes: dict[str, str | int] = {"loopwire.phase": phase}
    attributes["loopwire.step"] = step
    return tracing.deferred(f"phase {phase}", attributes)


def run_span(
    ctx: AgentContext, name: str, *, step: int, tool: str = ""
) -> AbstractContextManager[Span]:
    """A span of the run (attributes only when traces are on)."""
    tracing = ctx.telemetry.tracing
    if not tracing.enabled:
        return tracing.span(name)
    attributes: dict[str, str | int] = {"loopwire.step": step}
    if tool:
        attributes["gen_ai.tool.name"] = tool
    return tracing.span(name, attributes)


_OUTCOMES = {
    "Answered": "answered",
    "Approved": "approved",
    "Declined": "declined",
    "TimedOut": "timed_out",
    "StopRequested": "stopped",
    "Suspended": "parked",
}


def told(span: Span, outcome: WaitOutcome | Suspended) -> WaitOutcome | Suspended:
    """The wait's outcome on its span."""
    span.set("loopwire.wait.outcome", _OUTCOMES.get(type(outcome).__name__, "other"))
    return outcome
