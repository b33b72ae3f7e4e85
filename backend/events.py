"""Internal events: what the agent loop and the tool runner report.

They are plain frozen values; `backend.notifications` is the only place that
turns them into wire frames. Producers call an `EventSink`, which never blocks
and never fails, so emitting from cleanup code during cancellation is safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from backend.protocol import (
    ObserveControl,
    ReasonControl,
    ToolArguments,
    ToolErrorStatus,
)

StopMode = Literal["immediate", "after_step"]


@dataclass(frozen=True, slots=True)
class AgentStarted:
    max_steps: int
    strategy: str


@dataclass(frozen=True, slots=True)
class TurnStarted:
    step: int
    max_steps: int


@dataclass(frozen=True, slots=True)
class Reasoned:
    step: int
    content: str
    control: ReasonControl | None


@dataclass(frozen=True, slots=True)
class InputRequested:
    step: int
    question: str
    question_id: str
    timeout_s: float


@dataclass(frozen=True, slots=True)
class InputTimedOut:
    step: int
    question_id: str


@dataclass(frozen=True, slots=True)
class Observed:
    step: int
    content: str
    control: ObserveControl | None


@dataclass(frozen=True, slots=True)
class DuplicateCall:
    step: int
    tool_name: str


@dataclass(frozen=True, slots=True)
class StepsGranted:
    granted: int
    max_steps: int


@dataclass(frozen=True, slots=True)
class MaxStepsReached:
    steps: int


@dataclass(frozen=True, slots=True)
class AgentFailed:
    message: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    tool_call_id: str
    tool_name: str
    arguments: ToolArguments
    step: int


@dataclass(frozen=True, slots=True)
class ToolCompleted:
    tool_call_id: str
    tool_name: str
    result: Any
    duration_ms: float
    step: int


@dataclass(frozen=True, slots=True)
class ToolFailed:
    tool_call_id: str
    tool_name: str
    error: str
    status: ToolErrorStatus
    duration_ms: float
    step: int


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    tool_call_id: str
    tool_name: str
    arguments: ToolArguments
    description: str
    step: int


@dataclass(frozen=True, slots=True)
class TokenStreamed:
    token: str
    is_first: bool
    is_last: bool


Event = (
    AgentStarted
    | TurnStarted
    | Reasoned
    | InputRequested
    | InputTimedOut
    | Observed
    | DuplicateCall
    | StepsGranted
    | MaxStepsReached
    | AgentFailed
    | ToolStarted
    | ToolCompleted
    | ToolFailed
    | ApprovalRequested
    | TokenStreamed
)

EventSink = Callable[[Event], None]
