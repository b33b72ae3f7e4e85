"""`RunControl`: the user's levers on one run, and the waits they end.

Fresh per run (events are never cleared and reused). Transports reach it
through the session: `stop`, `answer`, `resolve_approval`; a shutdown
`park`s it. The run's driver alone waits on it: `wait_for_answer` and
`wait_for_approval` end with a typed `WaitOutcome` (the answer or decision,
a graceful stop, the deadline) or `SUSPENDED` (park now). A graceful stop
ends a wait for an approval at once, but not one for an answer already
asked: the answer finishes the step, and the run stops after it. A paused run waits
on one future that those levers resolve and one timer, with no helper tasks:
a session paused on a question costs little more than its state. An
immediate stop is not a wait outcome: `stop_now` cancels whatever the
driver's run has in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Final

from backend.agent.state import (
    Answered,
    Approved,
    Declined,
    StopRequested,
    TimedOut,
    WaitOutcome,
)
from backend.aio import Interrupt
from backend.errors import NoPendingApproval
from backend.protocol import AnswerAction, StopMode


class Suspended:
    """The server is shutting down: park the run where it waits (never
    stored, unlike a `WaitOutcome`)."""


SUSPENDED: Final = Suspended()
_ANSWER: Final = ""
"""What a wait for an answer waits for (an approval waits for its call id)."""


@dataclass(frozen=True, slots=True)
class UserAnswer:
    question_id: str
    content: str
    error: bool = False
    """A client tool's result that says its call failed."""
    action: AnswerAction = "accept"

    def outcome(self) -> Answered:
        return Answered(content=self.content, error=self.error, action=self.action)


@dataclass(frozen=True, slots=True)
class Interjection:
    input_id: str
    content: str


@dataclass(slots=True)
class RunControl:
    stop_now: Interrupt = field(default_factory=Interrupt)
    """An immediate stop: cancels the driver's run where it waits (`driver.py`)."""
    stop_after_step: bool = False
    suspend: bool = False
    """The server is shutting down: park the run at its next phase boundary
    or wait (its checkpoint continues it after the restart)."""
    approvals: dict[str, asyncio.Future[Approved | Declined]] = field(
        default_factory=dict
    )
    stop_requested_at: float | None = None
    """When the first stop reached the run (`time.perf_counter`): the start
    of the stop latency the metrics time."""
    interjections: list[Interjection] = field(default_factory=list)
    """The user's messages for the run (`when_busy: steer`), told to the
    model at its next phase boundary (`driver.py`)."""
    _answers: deque[UserAnswer] = field(default_factory=deque)
    """Answers given while the run was not waiting for one (taken in order)."""
    _waiter: asyncio.Future[WaitOutcome | Suspended] | None = None
    _waiting_for: str | None = None
    """`_ANSWER`, or the tool call id whose decision the run waits for."""

    def stop(self, mode: StopMode) -> None:
        if self.stop_requested_at is None:
            self.stop_requested_at = time.perf_counter()
        self.stop_after_step = True
        if mode == "immediate":
            # cancels the run where it waits: waking the wait would let it
            # run on (to its ending's writes) meanwhile
            self.stop_now.interrupt()
        elif self._waiting_for != _ANSWER:
            # an approval is withdrawn (no call runs after a stop), but a
            # question shown is part of the step: its answer ends the step
            self._wake(StopRequested())

    def park(self) -> None:
        """Park the run at its next phase boundary, or now if it waits."""
        self.suspend = True
        self._wake(SUSPENDED)

    # ------------------------------------------------------------ answers

    def answer(self, answer: UserAnswer) -> None:
        if self._waiting_for != _ANSWER or not self._wake(answer.outcome()):
            self._answers.append(answer)

    @property
    def answered(self) -> bool:
        """An answer is queued and not yet taken."""
        return bool(self._answers)

    async def wait_for_answer(self, limit_s: float) -> WaitOutcome | Suspended:
        early = self._early(limit_s, stopping=False)
        if early is not None:
            return early
        if self._answers:
            return self._answers.popleft().outcome()
        return await self._sleep(_ANSWER, limit_s)

    # ------------------------------------------------------------ approvals

    def expect_approval(self, tool_call_id: str) -> None:
        """Open the request; do it before the user is told, so no answer is lost."""
        loop = asyncio.get_running_loop()
        self.approvals[tool_call_id] = loop.create_future()

    async def wait_for_approval(
        self, tool_call_id: str, limit_s: float
    ) -> WaitOutcome | Suspended:
        decision = self.approvals.get(tool_call_id)
        if decision is None:
            self.expect_approval(tool_call_id)
            decision = self.approvals[tool_call_id]
        try:
            early = self._early(limit_s)
            if early is not None:
                return early
            if decision.done():
                return decision.result()
            return await self._sleep(tool_call_id, limit_s)
        finally:
            self.approvals.pop(tool_call_id, None)

    def resolve_approval(
        self,
        tool_call_id: str,
        approved: bool,
        reason: str | None,
        *,
        approval: Approved | None = None,
    ) -> None:
        """Deliver the user's decision (`approval`: a "yes" with edited
        arguments or remembered); refuse anything not pending right now."""
        decision = self.check_approval(tool_call_id)
        yes = approval or Approved()
        outcome = yes if approved else Declined(reason=reason)
        decision.set_result(outcome)
        if self._waiting_for == tool_call_id:
            self._wake(outcome)

    def check_approval(self, tool_call_id: str) -> asyncio.Future[Approved | Declined]:
        """The open request for `tool_call_id`; `NoPendingApproval` if none."""
        decision = self.approvals.get(tool_call_id)
        if decision is None or decision.done():
            raise NoPendingApproval(
                f"no approval is pending for tool call {tool_call_id!r} in this "
                "session (it may have been answered already or timed out)"
            )
        return decision

    # ------------------------------------------------------------ the wait

    def _early(
        self, limit_s: float, *, stopping: bool = True
    ) -> WaitOutcome | Suspended | None:
        """How a wait ends before it starts: parked, stopped (`stopping`: a
        graceful stop ends it) or past its deadline."""
        if self.suspend:
            return SUSPENDED
        if stopping and self.stop_after_step:
            return StopRequested()
        if limit_s <= 0:
            return TimedOut()
        return None

    async def _sleep(self, waiting_for: str, limit_s: float) -> WaitOutcome | Suspended:
        """Wait until a lever or the deadline resolves the one waiter."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[WaitOutcome | Suspended] = loop.create_future()
        self._waiter, self._waiting_for = waiter, waiting_for
        deadline = loop.call_later(limit_s, self._wake, TimedOut())
        try:
            return await waiter
        finally:
            deadline.cancel()
            self._waiter = self._waiting_for = None

    def _wake(self, outcome: WaitOutcome | Suspended) -> bool:
        """End the current wait with `outcome`; False if nothing waits."""
        waiter = self._waiter
        if waiter is None or waiter.done():
            return False
        waiter.set_result(outcome)
        return True
