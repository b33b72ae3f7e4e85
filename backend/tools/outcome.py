"""`ToolOutcome`: what happened to one tool call, as the run keeps it and
the model is told it; and the helpers that turn a call's raw arguments and
a tool's result into JSON values (`parse_arguments`, `jsonable`)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from backend.llm.base import Message, ToolCall, ToolStatus
from backend.protocol import ToolArguments
from backend.tools.results import compact


class ToolOutcome(BaseModel):
    """What happened to one tool call (a value: it is part of the run state)."""

    model_config = ConfigDict(frozen=True)

    call: ToolCall
    arguments: ToolArguments
    status: ToolStatus = "ok"
    result: Any = None
    error: str | None = None
    duration_ms: float = 0.0
    attempts: int = 0
    step: int = 0
    notes: tuple[str, ...] = ()
    """System notes from side-effect hooks, for the conversation."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def for_model(self, max_chars: int) -> str:
        """The tool message content the model receives (bounded, readable)."""
        if self.ok:
            return compact(self.result, max_chars)
        return compact(f"Error ({self.status}): {self.error}", max_chars)

    def message(self, max_chars: int, *, extra: str = "") -> Message:
        """The call's result message, with its status for code to read."""
        content = self.for_model(max_chars) + extra
        call = self.call
        return Message.tool(call.id, call.name, content, self.status, self.error)


def parse_arguments(raw: str) -> ToolArguments:
    """The call's arguments as an object, or the raw text if they are not one."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError):  # malformed, too deep, huge numbers
        return raw
    return value if isinstance(value, dict) else raw


def jsonable(value: Any) -> Any:
    """Tool results travel as JSON; models become dicts, the rest str()."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=str))
    return value
