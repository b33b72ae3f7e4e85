"""Provider-neutral LLM types and the `LLMClient` seam.

Everything above `llm/` speaks these types; only `openai_compat/` knows the
OpenAI wire format and only `offline.py` knows the embedded model's rules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]
ToolChoice = Literal["auto", "none", "required"]
Purpose = Literal["chat", "plan", "reason", "act", "observe", "final"]
"""Why a call is made. Providers may use it (the offline model does); the
OpenAI provider ignores it. Tests assert on it to check phase order."""


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

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(
        cls, content: str | None, tool_calls: Sequence[ToolCall] = ()
    ) -> Message:
        return cls(role="assistant", content=content, tool_calls=tuple(tool_calls))

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


class ToolSpec(_Frozen):
    """What the model sees of a tool: name, description, JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=dict)


class Usage(_Frozen):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    llm_calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            llm_calls=self.llm_calls + other.llm_calls,
        )


class Completion(_Frozen):
    """One finished model reply: text and/or tool calls."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage(llm_calls=1)
    finish_reason: str | None = None


class TextDelta(_Frozen):
    """A piece of streamed text."""

    text: str


StreamEvent = TextDelta | Completion
"""`LLMClient.stream` yields `TextDelta`s, then exactly one `Completion`."""


class LLMRequest(_Frozen):
    """Everything one call needs; `purpose` is a hint, never sent upstream."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    model: str | None = None
    temperature: float | None = None
    purpose: Purpose = "chat"


class LLMClient(Protocol):
    """The seam every model provider implements.

    Implementations raise `backend.errors.LLMError` for provider failures and
    let `asyncio.CancelledError` through untouched (closing the upstream
    request on the way out).
    """

    @property
    def model(self) -> str: ...

    @property
    def provider(self) -> str: ...

    async def complete(self, request: LLMRequest) -> Completion: ...

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...
