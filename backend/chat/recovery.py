"""`Recovery`: what a loaded conversation's live runs become.

The store lists the runs a previous owner left live: `waiting` for the
user, `suspended` (parked by a shutdown) or `running` (cut off mid-phase by
a crash). Waiting and parked runs go on from their checkpoint, as does a
run cut off inside a tool call (the call *in doubt*, settled by the tool's
`reconcile` or by the user); a run cut off in any other phase (a model
call) is ended here, reported `interrupted` (`RunDriver.interrupted`). A
checkpoint that cannot be read ends its run `error`.

A starting instance recovers every conversation with live runs (`recover`)
but the parked ones (a run waiting for its user in a conversation let go
cleanly, to make room or at a shutdown): those are recovered when they are
next opened (`recover_session`, from `Ownership.take`), as is each
conversation an instance of a cluster takes over.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from pydantic import ValidationError

from backend.agent.driver import RunDriver
from backend.agent.loop import AgentContext
from backend.agent.registry import StrategyRegistry
from backend.agent.run_control import RunControl
from backend.agent.state import RunState
from backend.chat.runs import RunSupervisor
from backend.chat.session import ActiveRun, Session
from backend.chat.sessions import SessionTable
from backend.errors import Busy
from backend.store.base import Store
from backend.store.records import RunRecord

log = logging.getLogger(__name__)

INTERRUPTED = (
    "the server stopped while this run was working, so it was ended here; "
    "what it had done is kept in the conversation"
)


class Recovery:
    def __init__(
        self,
        *,
        store: Store | None,
        table: SessionTable,
        strategies: StrategyRegistry,
        runs: RunSupervisor,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.table = table
        self.strategies = strategies
        self.runs = runs
        self._clock = clock
        self.after: Callable[[Session], Awaitable[None]] | None = None
        """What a conversation whose runs were continued does next (its
        held inputs: `HeldInputs.after_recovery`)."""

    async def recover(self) -> None:
        """Continue what a previous process left: waiting runs and runs a
        shutdown parked at a phase boundary go on; runs it was in the middle
        of are reported interrupted. A run parked while it waited (its
        conversation let go cleanly) stays in the store until its
        conversation is opened (`recover_session`): memory holds none for a
        user who is away."""
        assert self.store is not None
        for record in await self.store.live_runs(parked=False):
            try:
                session = self.table.by_id.get(
                    record.conversation_id
                ) or await self.table.load(record.conversation_id)
            except Busy as exc:  # it goes on when its conversation is opened
                log.warning("run %s left in the store: %s", record.id, exc)
                continue
            if session is not None:
                await self._continue(session, record)
                await self._after(session)

    async def recover_session(self, session: Session) -> None:
        """`recover` for one conversation just taken over by this instance
        (its owner died or shut down)."""
        if self.store is None:
            return
        for record in await self.store.live_runs(session.id):
            await self._continue(session, record)
        await self._after(session)

    async def _after(self, session: Session) -> None:
        if self.after is not None:
            await self.after(session)

    async def _continue(self, session: Session, record: RunRecord) -> None:
        if session.run is not None:
            return
        try:
            state = RunState.from_json(record.state)
        except ValidationError as exc:
            log.error("run %s: unreadable checkpoint: %s", record.id, exc)
            self._unreadable(session, record)
            return
        if state.strategy not in self.strategies or (
            record.status == "running" and not _in_doubt(state)
        ):
            self._interrupt(session, state)
        else:  # waiting, parked, or cut off in a tool call: it goes on
            self.runs.launch(session, state)
        await self.table.flush(session)

    def _interrupt(self, session: Session, state: RunState) -> None:
        strategy = self.strategies.get(state.strategy) or next(iter(self.strategies))
        notify = session.notify
        notify.begin_run(state.run_id, agent=state.request.agent)
        ctx = AgentContext(state, session.history, notify.emit, files=session.files)
        result = RunDriver(strategy, ctx, RunControl()).interrupted()
        notify.error(INTERRUPTED, "run_interrupted", in_run=True)
        run = ActiveRun(state, history=session.history)
        self.runs.finish(session, run, result)
        self.runs.record_end(session, run, "interrupted")
        notify.response_complete()
        self.runs.close(session, run)

    def _unreadable(self, session: Session, record: RunRecord) -> None:
        if session.journal is not None:
            session.journal.run(
                record.model_copy(
                    update={
                        "status": "error",
                        "error": "its checkpoint could not be read",
                        "ended_at": self._clock(),
                    }
                )
            )


def _in_doubt(state: RunState) -> bool:
    """The run was cut off in a tool call (announced, maybe run): it goes on
    from there, the call settled by its `reconcile` or by the user."""
    flight = state.in_flight
    return (
        flight is not None
        and bool(state.queue)
        and (state.queue[0].id == flight.tool_call_id)
    )
