"""The protocol's version and the field types and limits its frames share."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

PROTOCOL_VERSION = 1

Id = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[!-~]+$")]
"""A question, tool call or run id: short printable ASCII, no spaces (tool
call ids come from the model's provider, so no narrower alphabet is assumed)."""
Name = Annotated[str, Field(min_length=1, max_length=128)]
"""A tool, strategy or model name."""
STEPS_LIMIT = 10_000
"""No step count a client sends may exceed this (the server's cap is lower)."""
SYSTEM_PROMPT_LIMIT = 20_000
"""Characters of a client's own instructions (`ChatMessage.system_prompt`)."""
Steps = Annotated[int, Field(ge=1, le=STEPS_LIMIT)]
"""A step count a client asks for (a budget, or steps granted)."""
ToolNames = Annotated[list[Name], Field(max_length=256)]
"""The tools a client selects."""
ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
"""A tool name a model's provider accepts (OpenAI's rule, the strictest)."""
SystemPrompt = Annotated[str, Field(min_length=1, max_length=SYSTEM_PROMPT_LIMIT)]
"""A client's own instructions."""

ToolArguments = dict[str, Any] | str
"""Parsed arguments, or the raw text when the model sent something unparseable."""


class BudgetLimits(BaseModel):
    """Bounds on a run's (or a day's) spending, or amounts to add to them
    (`grant_budget`); a field left out (null) is no bound / nothing added."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: Annotated[int, Field(ge=0)] | None = None
    """Tokens of model calls, input and output."""
    cost_usd: Annotated[float, Field(ge=0)] | None = None
    """US dollars, by the server's price table."""
    time_s: Annotated[float, Field(ge=0)] | None = None
    """Seconds of work (waits for a person do not count)."""


BudgetDimension = Literal["tokens", "cost", "time"]
BudgetScope = Literal["run", "day"]
"""`run`: the run's own bound (a grant may raise it up to the server's cap);
`day`: what the user had left of their daily budget (no grant raises it)."""


class Payload(BaseModel):
    """The base of every server frame's payload (see `frames`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
