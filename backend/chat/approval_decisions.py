"""`ApprovalDecisions`: what a person's answer to an approval request does.

- "no", with a reason the model is told as the call's result;
- "yes", the call running as the model asked;
- "yes" with edited `arguments`: checked against the tool's schema first
  (`InvalidAnswer` naming the field, and the request still waits), then
  the call runs with them and the model is told they were changed;
- "yes" remembered (`remember`): the tool runs without asking for the rest
  of the conversation, or in all of the user's conversations
  (`chat/tool_grants.py`), from this run's next call on.

A call in doubt (it may have run before a crash) runs again as it was or
not at all: neither edited nor remembered. Like every decision, it is
stored before the run is handed it (`RunSupervisor.decided`).

A request may name the reply's later calls that will ask too (`also`): a
decision on one of those, while the request waits, is kept in the run's
state (`decided_ahead`) and taken when that call's turn comes.
"""

from __future__ import annotations

from backend.agent.state import Approved, Declined, PendingApproval
from backend.chat.runs import RunSupervisor
from backend.chat.session import ActiveRun, Session
from backend.chat.tool_grants import ToolGrants
from backend.errors import InvalidAnswer, InvalidMessage
from backend.protocol import ToolApprovalResponseMessage, UpcomingApproval
from backend.tools.base import ToolRegistry

IN_DOUBT = (
    "a call in doubt runs again as it was, or not at all: it cannot be "
    "approved with other arguments or remembered"
)


class ApprovalDecisions:
    def __init__(
        self, *, registry: ToolRegistry, grants: ToolGrants, runs: RunSupervisor
    ) -> None:
        self.registry = registry
        self.grants = grants
        self.runs = runs

    async def decide(
        self, session: Session, message: ToolApprovalResponseMessage
    ) -> None:
        ok, call_id = message.approved, message.tool_call_id
        run = session.approvable(call_id, blind=ok and not message.in_doubt)
        pending = run.state.pending_approval
        assert pending is not None
        upcoming = pending.upcoming(call_id)
        if upcoming is not None:
            await self._ahead(session, run, upcoming, message)
            return
        if not ok:
            decided: Approved | Declined = Declined(reason=message.reason)
        else:
            decided = self._approval(pending, message)
        if isinstance(decided, Approved) and decided.remember is not None:
            await self._remember(session, run, pending.tool_name, decided)
        await self.runs.decided(session, run, decided)
        session.resolve_approval(
            call_id,
            ok,
            message.reason,
            approval=decided if isinstance(decided, Approved) else None,
        )

    async def _ahead(
        self,
        session: Session,
        run: ActiveRun,
        upcoming: UpcomingApproval,
        message: ToolApprovalResponseMessage,
    ) -> None:
        """A decision on a call asked about ahead of its turn: kept in the
        run's state (stored now, the run waiting) until the call comes up."""
        decided: Approved | Declined = Declined(reason=message.reason)
        if message.approved:
            decided = self._approval(upcoming, message)
        if isinstance(decided, Approved) and decided.remember is not None:
            await self._remember(session, run, upcoming.tool_name, decided)
        state = run.state
        state.decided_ahead[upcoming.tool_call_id] = decided
        try:
            await self.runs.decided(session, run, None)
        except BaseException:
            state.decided_ahead.pop(upcoming.tool_call_id, None)  # not taken
            raise

    def _approval(
        self,
        pending: PendingApproval | UpcomingApproval,
        message: ToolApprovalResponseMessage,
    ) -> Approved:
        edited, remember = message.arguments, message.remember
        in_doubt = isinstance(pending, PendingApproval) and pending.in_doubt
        if in_doubt and (edited is not None or remember is not None):
            raise InvalidMessage(IN_DOUBT)
        if edited is not None:
            tool = self.registry.get(pending.tool_name)
            checked = tool.validate(edited, by_schema=True) if tool else None
            if isinstance(checked, str):
                raise InvalidAnswer(
                    f"{checked}; the approval still waits (send it again "
                    "with arguments that fit, or as they were)"
                )
        return Approved(arguments=edited, remember=remember)

    async def _remember(
        self, session: Session, run: ActiveRun, tool: str, decided: Approved
    ) -> None:
        """Store the grant, and let this run's later calls of `tool` run."""
        where = session.id if decided.remember == "conversation" else None
        await self.grants.grant(session.owner, tool, where)
        if tool not in run.state.granted:
            run.state.granted.append(tool)
