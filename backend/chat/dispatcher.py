"""`MessageDispatcher`: what a client's message does to a session owned here.

A `chat` becomes a run (`RunRequests.state_for`, then the `RunSupervisor`);
a `chat` with `replace_from` (an edit) first sets aside the run it names
and every later one (`chat/replacement.py`, `chat/branches.py`), which
`switch_branch` brings back. The other messages are the user's
levers on the run: stop, grant steps, answer a question, decide an
approval, and a reset of the history. A decision is stored before the run
is handed it, so none is lost to a crash in between. Every refusal is a
`ProtocolError`, raised before anything changes.
"""

from __future__ import annotations

import logging
from typing import Any

from backend.agent.budget_meter import as_limits, from_limits
from backend.agent.state import Answered
from backend.answer_forms import check_answer
from backend.budget import Budget
from backend.chat.approval_decisions import ApprovalDecisions
from backend.chat.branches import BranchSwitcher, set_aside
from backend.chat.control_spans import control_span
from backend.chat.held_inputs import HeldInputs
from backend.chat.inbox import Held
from backend.chat.replacement import conversation_runs, plan_replacement
from backend.chat.run_requests import RunRequests
from backend.chat.runs import MOVED_DECISION, RunSupervisor
from backend.chat.session import ActiveRun, Session
from backend.chat.tool_grants import ToolGrants
from backend.errors import Busy, InvalidMessage, Moved, StoreUnavailable
from backend.protocol import (
    AgentBudgetGranted,
    AgentControlMessage,
    AgentStepsGranted,
    AgentUserInputMessage,
    CancelInputMessage,
    ChatMessage,
    ClientMessage,
    ResetSessionMessage,
    SwitchBranchMessage,
    ToolApprovalResponseMessage,
    ToolResultMessage,
)
from backend.store.base import Store, StoreError
from backend.telemetry.tracing import NO_TRACING, Tracing

log = logging.getLogger(__name__)

RESTARTING = "the server is restarting; reconnect with your session_id to continue"


class MessageDispatcher:
    """Acts on the messages of sessions owned here (the sessions'
    `Dispatcher`). `draining` is set once the server shuts down: no run
    starts after it."""

    def __init__(
        self,
        *,
        requests: RunRequests,
        runs: RunSupervisor,
        store: Store | None,
        grants: ToolGrants,
        tracing: Tracing = NO_TRACING,
    ) -> None:
        self.requests = requests
        self.tracing = tracing
        self.runs = runs
        self.store = store
        self.grants = grants
        self.decisions = ApprovalDecisions(
            registry=requests.registry, grants=grants, runs=runs
        )
        self.held = HeldInputs(requests=requests, runs=runs, grants=grants)
        runs.after_run = self.held.next_run
        self.branches = BranchSwitcher(store, runs.table)
        self.draining = False

    async def dispatch(
        self, session: Session, message: ClientMessage
    ) -> dict[str, Any]:
        """Act on one client message; a `ProtocolError` says why it cannot be
        (`Session.handle` turns it into an `error` frame; HTTP routes into a
        status). What an HTTP client is told: a new run's id and where its
        request sits in the history; the budget after a grant; what a switch
        of branches did."""
        if isinstance(message, SwitchBranchMessage):
            if session.lost:
                raise Moved(MOVED_DECISION)
            if self.draining:
                raise Busy(RESTARTING)
            return await self.branches.switch(session, message.branch_id)
        run = session.run
        linked = run.state.trace_context if run is not None else None
        with control_span(
            self.tracing, message, session_id=session.id, run_context=linked
        ):
            held = await self._act(session, message)
        run = session.run
        if held is not None:
            return {"input_id": held.id, "mode": held.mode, "state": "queued"}
        if isinstance(message, ChatMessage) and run is not None:
            return {"run_id": run.run_id, "request_at": run.state.request_at}
        if isinstance(message, AgentControlMessage) and run is not None:
            if message.action == "grant_budget":
                return {"budget": as_limits(run.state.budget).model_dump()}
            return {"max_steps": run.state.max_steps}
        return {}

    async def _act(self, session: Session, message: ClientMessage) -> Held | None:
        """Only an edit (`replace_from`) and a decision (stored before it is
        handed to the run) wait. What a message sent while a run works
        became, if it was held."""
        if session.lost:  # its clients were told and closed
            raise Moved(MOVED_DECISION)
        match message:
            case ChatMessage(replace_from=None):
                return await self._start_run(session, message)
            case ChatMessage():
                await self._replace_and_start(session, message)
            case AgentControlMessage():
                self._control(session, message)
            case AgentUserInputMessage(
                content=content, question_id=question_id, action=given
            ):
                action = given or "accept"
                run = session.answerable(question_id)
                pending = run.state.pending_question
                if action == "accept":
                    check_answer(pending.answer_schema if pending else None, content)
                answered = Answered(content=content, action=action)
                await self.runs.decided(session, run, answered)
                session.submit_answer(content, question_id, action=action)
            case ToolResultMessage(
                tool_call_id=call_id, content=content, is_error=failed
            ):
                run = session.answerable(call_id, result=True)
                result = Answered(content=content, error=failed)
                await self.runs.decided(session, run, result)
                session.submit_answer(content, call_id, error=failed)
            case ToolApprovalResponseMessage():
                await self.decisions.decide(session, message)
            case CancelInputMessage(input_id=input_id):
                self.held.cancel(session, input_id)
            case ResetSessionMessage():
                self._reset(session)
        return None

    def _control(self, session: Session, message: AgentControlMessage) -> None:
        run = session.active_run()
        if message.action == "grant_steps":
            assert message.steps is not None
            self._grant(session, run, message.steps)
        elif message.action == "grant_budget":
            self._grant_budget(session, run, from_limits(message.budget))
        elif message.action == "stop":
            run.control.stop("immediate")
        else:
            run.control.stop("after_step")

    def _grant(self, session: Session, run: ActiveRun, steps: int) -> None:
        """Raise the running loop's budget by `steps`, up to the cap."""
        state = run.state
        if not state.request.agent:
            raise InvalidMessage("grant_steps applies to agent-mode runs only")
        granted = state.grant(steps)
        session.notify.emit(
            AgentStepsGranted(granted=granted, max_steps=state.max_steps)
        )

    def _grant_budget(self, session: Session, run: ActiveRun, more: Budget) -> None:
        """Raise the running run's budget by `more`, up to its cap (the
        server's, and the day's remainder)."""
        meter = self.runs.meter(run.state)
        if not meter.bounded:
            raise InvalidMessage("this run has no budget to raise")
        granted = meter.grant(more)
        session.notify.emit(
            AgentBudgetGranted(granted=as_limits(granted), budget=meter.limits())
        )

    def _reset(self, session: Session) -> None:
        if session.run is not None:
            raise Busy("cannot reset the session while a run is active; stop it first")
        session.history.clear()
        if session.journal is not None:
            session.journal.history_truncated(0)
            session.journal.branches_dropped()
        self.held.drop_all(session, "the conversation was reset")
        session.notify.session_reset()

    # ------------------------------------------------------------ starting runs

    async def _start_run(self, session: Session, message: ChatMessage) -> Held | None:
        """A new run, with the tools its user allowed (read before the
        checks, so nothing runs between them and the start); or, while a
        run works, the message held as it asks (`when_busy`)."""
        granted = await self.grants.allowed(session.owner, session.id)
        spent = await self.runs.daily.today(session.owner)
        if session.run is not None and message.when_busy != "refuse":
            if self.draining:
                raise Busy(RESTARTING)
            return await self.held.hold(session, message)
        self._check_free(session)
        state = self.requests.state_for(session, message)
        self.runs.daily.fit(state, spent)
        state.granted = granted
        self.runs.start(session, message, state)
        return None

    def _check_free(self, session: Session) -> None:
        """A new run may start: refuse while draining or while one is active."""
        if self.draining:
            raise Busy(RESTARTING)
        if session.run is not None:
            raise Busy(
                f"a run is already active in this session ({session.run.run_id}); "
                "wait for response_complete or stop it"
            )

    async def _replace_and_start(self, session: Session, message: ChatMessage) -> None:
        """Edit and resend: set the named run and every later one aside as a
        branch (history cut, their records marked with the next flush,
        `runs_removed` sent), then start `message` as a new run. The whole
        chat is checked before anything is set aside; a refusal changes
        nothing."""
        assert message.replace_from is not None
        self._check_free(session)
        if not message.save_chat:
            raise InvalidMessage(
                "replace_from needs save_chat: true (an edit replaces runs of "
                "the saved conversation)"
            )
        state = self.requests.state_for(session, message)
        self.runs.daily.fit(state, await self.runs.daily.today(session.owner))
        state.granted = await self.grants.allowed(session.owner, session.id)
        journal = session.journal
        if self.store is None or journal is None:
            raise InvalidMessage("this server keeps no runs, so none can be replaced")
        async with session.flushing:  # no batch half written meanwhile
            try:
                stored = await self.store.runs(session.id)
            except StoreError as exc:
                log.error("session %s: cannot read its runs: %s", session.id, exc)
                raise StoreUnavailable(
                    "the conversation store is unavailable; try again later"
                ) from exc
            self._check_free(session)  # another client may have started one
            if session.journal is not journal:
                raise InvalidMessage("this conversation was deleted meanwhile")
            runs = conversation_runs(
                stored, journal.runs.values(), removed=journal.removed_runs
            )
            replacement = plan_replacement(
                message.replace_from,
                runs,
                session.history,
                unsaved=journal.ended_unsaved,
            )
            set_aside(
                session, replacement.cut_at, replacement.run_ids, replacement.started_at
            )
            session.notify.runs_removed(replacement.run_ids)
            self.runs.start(session, message, state)
