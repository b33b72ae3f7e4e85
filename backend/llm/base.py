"""Provider-neutral LLM types and the `LLMClient` seam.

Everything above `llm/` speaks these types; only `openai_compat/` knows the
OpenAI wire format and only `offline.py` knows the embedded model's rules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from backend.transcript import Message as Message
from backend.transcript import Role as Role
from backend.transcript import ToolCall as ToolCall
from backend.transcript import ToolResultMeta as ToolResultMeta
from backend.transcript import ToolStatus as ToolStatus
from backend.transcript import Usage as Usage

ToolChoice = Literal["auto", "none", "required"]
Purpose = Literal["chat", "plan", "reason", "act", "observe", "final"]
"""Why a call is made. Providers may use it (the offline model does); the
OpenAI provider ignores it. Tests assert on it to check phase order."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolSpec(_Frozen):
    """What the model sees of a tool: name, description, JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=dict)


class Completion(_Frozen):
    """One finished model reply: text and/or tool calls; `reasoning` is a
    reasoning model's thinking, kept apart from the answer in `content`."""

    content: str = ""
    reasoning: str = ""
    text_call_format: str | None = None
    """The format (`backend/llm/replies/text_calls.py`) the tool calls were
    read from when the model wrote them as text; None for native calls."""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage(llm_calls=1)
    finish_reason: str | None = None
    attempts: int = 1
    """Requests it took (a retried call took more than one)."""


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
    max_tokens: int | None = None
    """The most tokens the reply may have (None: the model's own limit)."""
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
