"""The `AgentLoop` seam and the values that cross it.

`ChatService` builds an `AgentContext` per run and awaits `loop.run(ctx)`.
The loop reports progress through `ctx.emit`, reads the user's controls from
`ctx.control`, keeps what it has done in `ctx.state` (readable even after the
run was cancelled by an immediate stop) and returns an `AgentResult`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from backend.aio import race
from backend.errors import NoPendingApproval
from backend.events import EventSink, StepsGranted, StopMode
from backend.history import History
from backend.llm.base import Usage
from backend.protocol import CompletionReason
from backend.tools.executor import ToolOutcome
from backend.tools.policy import ApprovalDecision, ApprovalStatus

# ------------------------------------------------------------------ controls


@dataclass(frozen=True, slots=True)
class UserAnswer:
    question_id: str
    content: str


@dataclass(frozen=True, slots=True)
class PendingQuestion:
    question_id: str
    question: str
    step: int


@dataclass
class RunControl:
    """The user's levers on one run. Fresh per run; events are never reused."""

    max_steps: int
    max_steps_cap: int
    stop_now: asyncio.Event = field(default_factory=asyncio.Event)
    stop_after_step: asyncio.Event = field(default_factory=asyncio.Event)
    answers: asyncio.Queue[UserAnswer] = field(default_factory=asyncio.Queue)
    pending_question: PendingQuestion | None = None
    pending_approvals: dict[str, asyncio.Future[ApprovalDecision]] = field(
        default_factory=dict
    )

    def grant(self, steps: int, emit: EventSink) -> int:
        """Raise the budget by `steps` (up to the cap); return the new budget."""
        before = self.max_steps
        self.max_steps = min(self.max_steps + steps, self.max_steps_cap)
        emit(StepsGranted(granted=self.max_steps - before, max_steps=self.max_steps))
        return self.max_steps

    def stop(self, mode: StopMode) -> None:
        self.stop_after_step.set()
        if mode == "immediate":
            self.stop_now.set()

    async def wait_for_approval(
        self, tool_call_id: str, limit_s: float, announce: Callable[[], None]
    ) -> ApprovalDecision:
        """The user's decision on a call, racing the graceful stop and `limit_s`.

        The request is registered before `announce()` tells the user, so an
        answer can never arrive before it can be taken.
        """
        loop = asyncio.get_running_loop()
        decision: asyncio.Future[ApprovalDecision] = loop.create_future()
        self.pending_approvals[tool_call_id] = decision
        try:
            announce()
            won = await race(
                _wait(decision), self.stop_after_step.wait(), limit_s=limit_s
            )
        finally:
            self.pending_approvals.pop(tool_call_id, None)
        if won is None:
            return ApprovalDecision("timeout")
        return won[1] if won[0] == 0 else ApprovalDecision("withdrawn")

    def resolve_approval(
        self, tool_call_id: str, approved: bool, reason: str | None
    ) -> None:
        """Deliver the user's decision; refuse anything not pending right now."""
        decision = self.pending_approvals.get(tool_call_id)
        if decision is None or decision.done():
            raise NoPendingApproval(
                f"no approval is pending for tool call {tool_call_id!r} in this "
                "session "
                "(it may have been answered already or timed out)"
            )
        status: ApprovalStatus = "approved" if approved else "rejected"
        decision.set_result(ApprovalDecision(status, reason))


async def _wait(future: asyncio.Future[ApprovalDecision]) -> ApprovalDecision:
    return await future


# ------------------------------------------------------------------ run values


@dataclass
class RunState:
    """What the loop has done so far; the driver reads it after a stop."""

    step: int = 0
    usage: Usage = field(default_factory=Usage)
    outcomes: list[ToolOutcome] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)


@dataclass
class AgentContext:
    session_id: str
    run_id: str
    question: str
    history: History
    selected_tools: Sequence[str] | None
    read_only: bool
    control: RunControl
    emit: EventSink
    model: str | None = None
    temperature: float | None = None
    state: RunState = field(default_factory=RunState)


@dataclass(frozen=True, slots=True)
class AgentResult:
    final_answer: str | None
    reason: CompletionReason
    steps: int
    usage: Usage
    stop_mode: StopMode | None = None


# ------------------------------------------------------------------ decisions


@dataclass(frozen=True, slots=True)
class Continue:
    """Go on to the next phase (or the next step)."""


@dataclass(frozen=True, slots=True)
class Final:
    """End the loop. `answer` None means: write a final answer now."""

    answer: str | None
    reason: CompletionReason
    why: str = ""


@dataclass(frozen=True, slots=True)
class Stopped:
    mode: StopMode


Decision = Continue | Final | Stopped


class AgentLoop(Protocol):
    """A strategy that answers one agent-mode chat message."""

    name: str

    async def run(self, ctx: AgentContext) -> AgentResult: ...
