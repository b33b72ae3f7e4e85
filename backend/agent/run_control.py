"""`RunControl`: the user's levers on one run, and the waits they end.

Fresh per run (events are never cleared and reused). Transports reach it
through the session: `stop`, `answer`, `resolve_approval`. The run's driver
alone waits on it — `wait_for_answer` and `wait_for_approval` race the
graceful stop and a deadline and return a typed `WaitOutcome`. An immediate
stop is not a wait outcome: the driver races the whole run against
`stop_now`, which cancels whatever is in flight.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from backend.agent.state import (
    Answered,
    Approved,
    Declined,
    StopRequested,
    TimedOut,
    WaitOutcome,
)
from backend.aio import race
from backend.errors import NoPendingApproval
from backend.protocol import StopMode


@dataclass(frozen=True, slots=True)
class UserAnswer:
    question_id: str
    content: str


@dataclass
class RunControl:
    stop_now: asyncio.Event = field(default_factory=asyncio.Event)
    stop_after_step: asyncio.Event = field(default_factory=asyncio.Event)
    suspend: asyncio.Event = field(default_factory=asyncio.Event)
    """The server is shutting down: park the run at its next phase boundary
    or wait (its checkpoint continues it after the restart)."""
    answers: asyncio.Queue[UserAnswer] = field(default_factory=asyncio.Queue)
    approvals: dict[str, asyncio.Future[Approved | Declined]] = field(
        default_factory=dict
    )

    def stop(self, mode: StopMode) -> None:
        self.stop_after_step.set()
        if mode == "immediate":
            self.stop_now.set()

    # ------------------------------------------------------------ answers

    def answer(self, answer: UserAnswer) -> None:
        self.answers.put_nowait(answer)

    @property
    def answered(self) -> bool:
        """An answer is queued and not yet taken."""
        return not self.answers.empty()

    async def wait_for_answer(self, limit_s: float) -> WaitOutcome:
        won = await race(
            self.answers.get(), self.stop_after_step.wait(), limit_s=max(limit_s, 0)
        )
        if won is None:
            return TimedOut()
        if won[0] == 1:
            return StopRequested()
        answer: UserAnswer = won[1]
        return Answered(content=answer.content)

    # ------------------------------------------------------------ approvals

    def expect_approval(self, tool_call_id: str) -> None:
        """Open the request; do it before the user is told, so no answer is lost."""
        loop = asyncio.get_running_loop()
        self.approvals[tool_call_id] = loop.create_future()

    async def wait_for_approval(self, tool_call_id: str, limit_s: float) -> WaitOutcome:
        decision = self.approvals.get(tool_call_id)
        if decision is None:
            self.expect_approval(tool_call_id)
            decision = self.approvals[tool_call_id]
        try:
            won = await race(
                _decided(decision), self.stop_after_step.wait(), limit_s=max(limit_s, 0)
            )
        finally:
            self.approvals.pop(tool_call_id, None)
        if won is None:
            return TimedOut()
        outcome: WaitOutcome = won[1] if won[0] == 0 else StopRequested()
        return outcome

    def resolve_approval(
        self, tool_call_id: str, approved: bool, reason: str | None
    ) -> None:
        """Deliver the user's decision; refuse anything not pending right now."""
        decision = self.approvals.get(tool_call_id)
        if decision is None or decision.done():
            raise NoPendingApproval(
                f"no approval is pending for tool call {tool_call_id!r} in this "
                "session (it may have been answered already or timed out)"
            )
        decision.set_result(Approved() if approved else Declined(reason=reason))


async def _decided(
    future: asyncio.Future[Approved | Declined],
) -> Approved | Declined:
    return await future
