"""What a conversation is made of: messages, tool calls and their results,
token usage, and the frames its clients were sent.

These are values, shared by every layer that keeps or carries a
conversation (`llm/`, `store/`, `bus/`, `notifications.py`, `transport/`),
so none of those needs another's module for them: the store knows no LLM,
and the transport no loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

Role = Literal["system", "user", "assistant", "tool"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    """A tool call requested by the model. `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"


ToolStatus = Literal[
    "ok",
    "failed",
    "blocked",
    "rate_limited",
    "timeout",
    "rejected",
    "cancelled",
    "not_run",
]
"""What became of a tool call, as its result message records it: `ok`, one
of the executor's failures (`failed`, `blocked`, `rate_limited`, `timeout`,
`rejected`, `cancelled` — as in `tool_error.status`), or `not_run` (cut off
before it started, or not run again as a duplicate)."""


INTERJECTION = "interjection"
"""The `name` that marks a user message as an interjection (kept in the
history, never sent to a provider)."""
EDITED_NOTE = "\n(The user changed the arguments before approving: "
"""How a tool result says that a person approved the call with other
arguments than the model's (the arguments, as JSON, and `)` follow)."""


class ToolResultMeta(_Frozen):
    """The structured side of a tool message; providers never send it."""

    status: ToolStatus = "ok"
    error: str | None = None
    """The failure itself, without the wording around it in `content`."""


class Message(_Frozen):
    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    meta: ToolResultMeta | None = None
    """Tool messages only: the call's status (what code reads; the model
    reads `content`)."""
    reasoning: str | None = None
    """Assistant messages that call tools: the thinking that led to the calls,
    for servers that want it back within the turn (DeepSeek's thinking mode).
    Kept in memory only: not stored, so a run continued after a restart
    sends none."""

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def interjection(cls, content: str) -> Message:
        """The user's words sent while a run worked, told to it mid-run
        (`when_busy: steer`): a user message that starts no request."""
        return cls(role="user", content=content, name=INTERJECTION)

    @property
    def interjected(self) -> bool:
        return self.role == "user" and self.name == INTERJECTION

    @classmethod
    def assistant(
        cls,
        content: str | None,
        tool_calls: Sequence[ToolCall] = (),
        reasoning: str | None = None,
    ) -> Message:
        return cls(
            role="assistant",
            content=content,
            tool_calls=tuple(tool_calls),
            reasoning=reasoning or None,
        )

    @classmethod
    def tool(
        cls,
        tool_call_id: str,
        name: str,
        content: str,
        status: ToolStatus = "ok",
        error: str | None = None,
    ) -> Message:
        return cls(
            role="tool",
            content=content,
            tool_call_id=tool_call_id,
            name=name,
            meta=ToolResultMeta(status=status, error=error),
        )

    @property
    def status(self) -> ToolStatus | None:
        """A tool message's status (None for other roles)."""
        return self.meta.status if self.meta is not None else None


class Usage(_Frozen):
    """Tokens of model calls, as their server reported them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    llm_calls: int = 0
    cached_tokens: int = 0
    """Of `prompt_tokens`, those the server read from its prompt cache."""
    reasoning_tokens: int = 0
    """Of `completion_tokens`, a reasoning model's thinking."""
    estimated_calls: int = 0
    """Of `llm_calls`, those whose server reported no usage: their tokens
    are loopwire's estimate (`llm/tokens.py`), not a count."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            llm_calls=self.llm_calls + other.llm_calls,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            estimated_calls=self.estimated_calls + other.estimated_calls,
        )


@dataclass(frozen=True, slots=True)
class Frame:
    """A stamped frame: its `seq`, its run, and its JSON text (made once)."""

    seq: int
    run_id: str | None
    text: str
