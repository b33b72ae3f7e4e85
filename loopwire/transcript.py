"""A run as a person reads it: one line per frame worth a line, and what the
run is busy with between frames (the spinner's label)."""

from __future__ import annotations

import json
from typing import Any

from backend.protocol import (
    AgentBudgetGranted,
    AgentBudgetReached,
    AgentBudgetWarning,
    AgentCompletion,
    AgentError,
    AgentMaxStepsReached,
    AgentObserve,
    AgentPlan,
    AgentReason,
    AgentRequestInput,
    AgentRequestInputTimeout,
    AgentStart,
    AgentStepsGranted,
    AgentStopped,
    AgentTurnStart,
    Error,
    TokenStream,
    ToolApprovalDecided,
    ToolApprovalRequest,
    ToolComplete,
    ToolError,
    ToolStart,
)
from loopwire.connection import Event


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def describe(event: Event) -> str:
    """The line for `event` ('' for frames not worth one; the answer and the
    streamed tokens are the terminal's to show)."""
    if isinstance(event, ToolStart):
        return f"  → {event.tool_name}({_json(event.arguments)})"
    if isinstance(event, ToolComplete):
        return f"  ← {event.tool_name}: {_json(event.result)}"
    if isinstance(event, ToolApprovalRequest) and event.in_doubt:
        return f"  ! {event.tool_name} may already have run: {event.description}"
    if isinstance(event, ToolApprovalRequest):
        line = f"  ! {event.tool_name} needs your approval: {event.description}"
        return line + _untrusted(event)
    if isinstance(event, ToolApprovalDecided):
        return _decided(event)
    if isinstance(event, ToolError):
        return f"  ✗ {event.tool_name} [{event.status}]: {event.error}"
    if isinstance(event, Error):
        return f"  (note: {event.message})"
    return _describe_update(event)


REMEMBERED = {
    "conversation": "allowed from now on in this conversation",
    "user": "allowed from now on in all your conversations",
}


def _decided(event: ToolApprovalDecided) -> str:
    """`  ✓ save approved with {"text": "oat milk"}; allowed from now on …`."""
    parts = []
    if event.arguments is not None:
        parts.append(f"approved with {_json(event.arguments)}")
    if event.remember is not None:
        parts.append(REMEMBERED[event.remember])
    return f"  ✓ {event.tool_name} {'; '.join(parts) or 'approved'}"


def _untrusted(request: ToolApprovalRequest) -> str:
    """The warning for a request from a run that read text the user did not
    write (the call may have been asked for there)."""
    if not request.untrusted_sources:
        return ""
    read = "; ".join(
        f"{s.tool_name} (step {s.step})" + (f": {s.origin}" if s.origin else "")
        for s in request.untrusted_sources
    )
    return (
        "\n    careful: the run has read text you did not write, and this "
        f"request may come from there: {read}"
    )


def _question(event: AgentRequestInput) -> str:
    """`  ? the MCP server 'cafe' asks: …` (a tool's question names who asks),
    and the page to open, if any."""
    line = f"  ? {event.question}"
    if event.asked_by is not None:
        line = f"  ? {event.asked_by} asks: {event.question}"
    if event.url is not None:
        line += f"\n    open {event.url} and press Enter here once done there"
    hint = answer_hint(event.answer_schema or {})
    return f"{line}\n    {hint}" if hint else line


def answer_hint(schema: dict[str, Any]) -> str:
    """What a form's answer looks like, as the server reads it: a string's
    text itself, any other value as JSON ('' for free text)."""
    kind = schema.get("type")
    if kind == "object":
        required = set(schema.get("required", ()))
        fields = ", ".join(
            f"{_json(name)}{'' if name in required else '?'}: {_value(field)}"
            for name, field in schema.get("properties", {}).items()
        )
        return f"answer as JSON: {{{fields}}}"
    if kind == "string" and "enum" in schema:
        return "answer one of: " + ", ".join(map(str, schema["enum"]))
    if kind == "boolean":
        return "answer true or false"
    if kind in ("integer", "number"):
        return f"answer {_value(schema)}"
    return ""


def _value(schema: dict[str, Any]) -> str:
    """`"small" | "large"`, `true | false`, `integer 1…4`, `"…"`."""
    kind = schema.get("type")
    if "enum" in schema:
        return " | ".join(_json(choice) for choice in schema["enum"])
    if kind == "boolean":
        return "true | false"
    if kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is None and high is None:
            return str(kind)
        return f"{kind} {'' if low is None else low}…{'' if high is None else high}"
    return '"…"'


def _describe_update(event: Event) -> str:
    if isinstance(event, AgentTurnStart):
        return f"— step {event.step} / {event.max_steps}"
    if isinstance(event, AgentPlan):
        return "  [plan] " + "; ".join(
            f"{n}. {step}" for n, step in enumerate(event.steps, 1)
        )
    if isinstance(event, AgentReason):
        return f"  [reason] {event.content}"
    if isinstance(event, AgentObserve):
        return f"  [observe] {event.content}"
    if isinstance(event, AgentRequestInput):
        return _question(event)
    if isinstance(event, AgentRequestInputTimeout):
        return "  (the question timed out)"
    if isinstance(event, AgentStepsGranted):
        return f"  (budget raised to {event.max_steps} steps)"
    if isinstance(event, AgentCompletion):
        steps, ms = event.steps, event.duration_ms
        return f"(done: {event.reason}, {steps} step(s), {ms:.0f} ms)"
    if isinstance(event, AgentMaxStepsReached):
        return "  (max steps reached)"
    if isinstance(event, AgentBudgetWarning):
        return f"  (80% of the {_budget_name(event.dimension)} used)"
    if isinstance(event, AgentBudgetReached):
        return f"  ({_budget_name(event.dimension)} used up)"
    if isinstance(event, AgentBudgetGranted):
        return "  (budget raised)"
    if isinstance(event, AgentStopped):
        return "  (stopped)"
    if isinstance(event, AgentError):
        return f"  (model error: {event.message})"
    return ""


def activity(event: Event) -> str | None:
    """What the run does after `event`, until the next frame (None: nothing
    to wait on here: it waits for the user, or it is over)."""
    if isinstance(event, AgentStart | AgentObserve):
        return "thinking"
    if isinstance(event, AgentTurnStart):
        return f"step {event.step}: reasoning"
    if isinstance(event, AgentReason | AgentPlan):
        return f"step {event.step}: acting"
    if isinstance(event, ToolStart | ToolApprovalDecided):
        return f"running {event.tool_name}"
    if isinstance(event, ToolComplete | ToolError):
        return "thinking"
    if isinstance(event, AgentMaxStepsReached | AgentStopped | TokenStream):
        return "writing the answer"
    return None


def _budget_name(dimension: str) -> str:
    return {"tokens": "token budget", "cost": "cost budget"}.get(
        dimension, "time budget"
    )
