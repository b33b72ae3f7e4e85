"""What a settled tool call tells: its frame for the client (`report`),
and, for a tool whose result someone other than the user wrote, the run's
note of it (`note_untrusted`); and the frame of an approval that changed
something (`decided`)."""

from __future__ import annotations

from typing import Any

from backend.agent.state import RunState
from backend.llm.base import ToolCall
from backend.protocol import (
    Remember,
    ToolApprovalDecided,
    ToolComplete,
    ToolError,
    UntrustedSource,
)
from backend.tools.base import AnyTool
from backend.tools.outcome import ToolOutcome


def note_untrusted(state: RunState, tool: AnyTool | None, outcome: ToolOutcome) -> None:
    """Remember the result's text if someone other than the user wrote it."""
    if tool is None or not tool.effect.untrusted_result:
        return
    origin = tool.origin(outcome.result) if tool.origin is not None else ""
    if origin is not None:
        source = UntrustedSource(tool_name=tool.name, step=outcome.step, origin=origin)
        state.read_untrusted(source)


def report(outcome: ToolOutcome) -> ToolComplete | ToolError:
    call = outcome.call
    if outcome.ok:
        return ToolComplete(
            tool_call_id=call.id,
            tool_name=call.name,
            result=outcome.result,
            duration_ms=outcome.duration_ms,
            step=outcome.step,
        )
    status = "cancelled" if outcome.status in ("ok", "not_run") else outcome.status
    return ToolError(
        tool_call_id=call.id,
        tool_name=call.name,
        error=outcome.error or "",
        status=status,
        duration_ms=outcome.duration_ms,
        step=outcome.step,
    )


def decided(
    call: ToolCall,
    step: int,
    edited: dict[str, Any] | None,
    remember: Remember | None,
) -> ToolApprovalDecided:
    """The frame of a "yes" that changed something: the call's arguments
    (`edited`), or what runs without asking from now on (`remember`)."""
    return ToolApprovalDecided(
        tool_call_id=call.id,
        tool_name=call.name,
        step=step,
        arguments=edited,
        remember=remember,
    )
