"""A tool asking the user something in the middle of its call.

An MCP server may ask (`elicitation/create`) while one of its tools runs:
for a few fields of a form, or to open a link. A tool passes such a request
to `ToolContext.ask` and gets the person's reply. The run behind it makes it
the same durable pause as any question (`agent/elicitations.py`): shown to
every client of the conversation, checkpointed, answered through any
instance, and replayed to the call made again after a restart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

ReplyAction = Literal["accept", "decline", "cancel"]
"""MCP's three answers: the person answered (`accept`, with the form's
values, or having opened the link), said no (`decline`), or dismissed the
question without a choice (`cancel`; also when nobody answered in time or
the run stopped)."""


@dataclass(frozen=True, slots=True)
class Elicitation:
    message: str
    asked_by: str
    """Who asks, for the person: "the MCP server 'coffee'"."""
    schema: dict[str, Any] | None = None
    """Form mode: the object schema of the answer (`answer_forms`' subset)."""
    url: str | None = None
    """URL mode: the page the person is asked to open (no values come back)."""

    def same_as(self, other: Elicitation) -> bool:
        return (self.message, self.asked_by, self.schema, self.url) == (
            other.message,
            other.asked_by,
            other.schema,
            other.url,
        )


@dataclass(frozen=True, slots=True)
class ElicitationReply:
    action: ReplyAction
    content: dict[str, Any] | None = None
    """The form's values, with `accept` in form mode."""


Asker = Callable[[Elicitation], Awaitable[ElicitationReply]]
"""Asks the person behind the run and waits for the reply."""
