"""A person's hand on a run, traced: a `stop`, an `approval`, an `answer`,
a `tool_result` or a `grant_steps` becomes a span where it is received and
where it is acted on. Sent to the instance that owns the run, its command
carries the `traceparent` of the first (`Command.trace`), so the two are
one trace across the instances; the owner's span links to the run's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager

from backend.bus.messages import CommandBody, Dispatch, Handle, StopRun
from backend.protocol import (
    AgentControlMessage,
    AgentUserInputMessage,
    ClientMessage,
    ToolApprovalResponseMessage,
    ToolResultMessage,
)
from backend.telemetry.tracing import Span, Tracing


def control_name(message: ClientMessage | CommandBody) -> str | None:
    """The span's name for a person's control of a run (None: not one)."""
    match message:
        case Handle(message=inner) | Dispatch(message=inner):
            return control_name(inner)
        case StopRun():
            return "stop"
        case AgentControlMessage(action="grant_steps" | "grant_budget" as action):
            return action
        case AgentControlMessage():
            return "stop"
        case ToolApprovalResponseMessage():
            return "approval"
        case AgentUserInputMessage():
            return "answer"
        case ToolResultMessage():
            return "tool_result"
    return None


def control_span(
    tracing: Tracing,
    message: ClientMessage | CommandBody,
    *,
    session_id: str,
    run_context: str | None = None,
) -> AbstractContextManager[Span | None]:
    """The span of `message` if it is a person's control of a run (else
    nothing); `run_context`: the run's own span, linked."""
    name = control_name(message) if tracing.enabled else None
    if name is None:
        return contextlib.nullcontext()
    return _linked(tracing, name, session_id, run_context)


@contextlib.contextmanager
def _linked(
    tracing: Tracing, name: str, session_id: str, run_context: str | None
) -> Iterator[Span]:
    with tracing.span(name, {"gen_ai.conversation.id": session_id}) as span:
        span.link(run_context)
        yield span
