"""What the offline model reads of a request: the user's words and this
run's tool results (with their status from the message metadata). A
"continue" goes on with the request before it: that request, and the tool
results since it, are what is read."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.llm.base import Message, ToolCall, ToolStatus
from backend.transcript import EDITED_NOTE

REQUEST_INPUT = "request_input"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool message of this run, with the arguments of its call."""

    name: str
    content: str
    arguments: dict[str, Any] = field(default_factory=dict)
    status: ToolStatus = "ok"
    detail: str | None = None

    @property
    def failed(self) -> bool:
        return self.status != "ok"

    @property
    def error(self) -> str:
        """The failure, without its trailing full stop."""
        return (self.detail or self.content).strip().rstrip(".")

    @property
    def text(self) -> str:
        """The content as plain text (a JSON string is unwrapped)."""
        value = parse_json(self.content)
        return value if isinstance(value, str) else self.content.strip()

    def data(self) -> Any:
        return parse_json(self.content)


@dataclass(frozen=True, slots=True)
class Conversation:
    request: str
    """The last user message."""
    previous: str | None
    """The user message before it while that one is still open (no tool ran
    for it: the reply may have asked a question in words)."""
    results: tuple[ToolResult, ...]
    """This run's tool results (after the last user message), in order."""
    calls_so_far: int
    latest_is_result: bool
    """The latest message is a tool result: a tool ran (or the user answered
    `request_input`) since the model last spoke."""

    @property
    def next_call_id(self) -> str:
        return f"call_{self.calls_so_far + 1}"

    @property
    def answered(self) -> str | None:
        """The user's answer to `request_input`, when that is the latest news."""
        last = self.results[-1] if self.results and self.latest_is_result else None
        if last is None or last.name != REQUEST_INPUT or last.failed:
            return None
        return last.text


READ_CHARS = 2000
"""How much of a user's message the offline model reads: its rules are for
requests people type, and a bound keeps every pattern's cost bounded too."""


CONTINUE = re.compile(
    r"\s*(continue|go on|keep going|carry on|proceed)\b[\s.!]*", re.IGNORECASE
)
"""A message that only asks to go on with the request before it."""


def read(messages: Sequence[Message]) -> Conversation:
    # the user's words sent mid-run start no request: the rules read past them
    messages = [m for m in messages if not m.interjected]
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    while len(users) > 1 and CONTINUE.fullmatch(messages[users[-1]].content or ""):
        # "continue": the request before it goes on, its results so far kept
        messages = [m for i, m in enumerate(messages) if i != users[-1]]
        users = [i for i, m in enumerate(messages) if m.role == "user"]
    run = messages[users[-1] + 1 :] if users else messages
    calls = {call.id: call for m in run for call in m.tool_calls}
    results = tuple(
        _result(m, calls.get(m.tool_call_id or "")) for m in run if m.role == "tool"
    )
    previous = _open_previous(messages, users)
    last = next((m for m in reversed(messages) if m.role != "system"), None)
    return Conversation(
        request=(messages[users[-1]].content or "")[:READ_CHARS] if users else "",
        previous=previous,
        results=results,
        calls_so_far=sum(len(m.tool_calls) for m in messages),
        latest_is_result=last is not None and last.role == "tool",
    )


def _open_previous(messages: Sequence[Message], users: list[int]) -> str | None:
    if len(users) < 2:
        return None
    between = messages[users[-2] + 1 : users[-1]]
    if any(m.tool_calls or m.role == "tool" for m in between):
        return None
    return (messages[users[-2]].content or "")[:READ_CHARS]


def _result(message: Message, call: ToolCall | None) -> ToolResult:
    name = message.name or (call.name if call else "")
    arguments = parse_json(call.arguments) if call else None
    meta = message.meta
    content, _, _ = (message.content or "").partition(EDITED_NOTE)
    return ToolResult(
        name=name,
        content=content,
        arguments=arguments if isinstance(arguments, dict) else {},
        status=meta.status if meta else "ok",
        detail=meta.error if meta else None,
    )


def parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None
