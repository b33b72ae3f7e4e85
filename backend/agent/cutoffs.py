"""What an ending cut off: every call the model asked for that did not finish.

Every ending of a run (a stop, an error, a decided end) passes through
`close_queue`, so the history stays whole — each tool call has its result,
as providers require — and the user is told honestly what became of each
call: the one running is `cancelled` (or not run, if it waited for an
approval), the rest were never started, a pending question is withdrawn.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from backend.agent import client_tools
from backend.agent.loop import AgentContext
from backend.agent.request_input import is_request_input
from backend.agent.state import RunState
from backend.llm.base import Message, ToolCall, ToolStatus
from backend.protocol import ToolError

CANCELLED_NOTE = "Cancelled: the user stopped the run before this tool finished."
STOPPED_NOTE = "Not run: the user stopped the run before this call."
ENDED_NOTE = "Not run: the run ended before this call."
UNANSWERED_NOTE = "Cancelled: the run stopped before the user answered."
TIMED_OUT_NOTE = "Cancelled: the run ran out of time before this tool finished."
UNASKED_NOTE = "Cancelled: the run ran out of time before the user answered."
RESTARTED_NOTE = "Not run: the server stopped before this call."
INTERRUPTED_NOTE = (
    "{name} was interrupted: the server stopped while it was running, so it may "
    "or may not have taken effect; it was not run again. Check before retrying."
)


def closed(call: ToolCall, note: str, status: ToolStatus) -> Message:
    """A tool message for a call that gave no result: `note` for the model,
    the reason alone (no "Cancelled:" label) as its error."""
    reason = note.split(": ", 1)[-1].rstrip(".")
    return Message.tool(call.id, call.name, note, status, reason)


def close_queue(
    ctx: AgentContext,
    *,
    stopped: bool,
    interrupted: bool = False,
    timed_out: bool = False,
    clock: Callable[[], float] = time.time,
) -> None:
    """Report and close every call still queued; clear the waits.

    `interrupted`: the process that ran the run died; the call that was in
    flight may have run, and is reported so. `timed_out`: the run's time
    limit cut it off.
    """
    state = ctx.state
    for call in state.queue:
        if is_request_input(ctx, call):
            note = UNASKED_NOTE if timed_out else UNANSWERED_NOTE
            ctx.history.append(closed(call, note, "cancelled"))
        elif interrupted:
            _close_interrupted(ctx, call)
        else:
            _close_call(ctx, call, stopped=stopped, timed_out=timed_out, clock=clock)
    state.queue.clear()
    state.in_flight = None
    state.batch = []
    state.pending_question = None
    state.pending_approval = None
    state.resolution = None


def _close_interrupted(ctx: AgentContext, call: ToolCall) -> None:
    if _running(ctx.state, call):
        note = INTERRUPTED_NOTE.format(name=call.name)
        status: ToolStatus = "cancelled"
    else:
        note, status = RESTARTED_NOTE, "not_run"
    _report(ctx, call, note, status, 0.0)


def _running(state: RunState, call: ToolCall) -> bool:
    """`call` was announced and may be running: the head, or one of its batch."""
    flight = state.in_flight
    return flight is not None and (
        flight.tool_call_id == call.id or call.id in state.batch
    )


def _report(
    ctx: AgentContext, call: ToolCall, note: str, status: ToolStatus, duration: float
) -> None:
    ctx.telemetry.metrics.tool_call(client_tools.counted_as(ctx, call), status)
    ctx.emit(
        ToolError(
            tool_call_id=call.id,
            tool_name=call.name,
            error=note,
            status="cancelled",
            duration_ms=duration,
            step=ctx.state.step,
        )
    )
    ctx.history.append(closed(call, note, status))


def _close_call(
    ctx: AgentContext,
    call: ToolCall,
    *,
    stopped: bool,
    timed_out: bool,
    clock: Callable[[], float],
) -> None:
    state = ctx.state
    flight = state.in_flight
    duration = 0.0
    status: ToolStatus
    if flight is not None and _running(state, call):
        duration = round(max(clock() - flight.started_at, 0.0) * 1000, 3)
        approval = state.pending_approval
        if approval is not None and approval.tool_call_id == call.id:
            note, status = f"{call.name} was not run: the run is stopping", "not_run"
        else:
            note = TIMED_OUT_NOTE if timed_out else CANCELLED_NOTE
            status = "cancelled"
    else:
        note, status = (STOPPED_NOTE if stopped else ENDED_NOTE), "not_run"
    _report(ctx, call, note, status, duration)
