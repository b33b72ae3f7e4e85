"""`RunSupervisor`: starts, drives, parks and finishes every run.

A run is a task in the service's TaskGroup (never detached) that drives a
`RunDriver` over the run's `RunState` and the session's history (or, for a
`chat` with `save_chat: false`, a scratch copy of it). `finish` is the one
place that writes a run's answer to history and sends its closing frames;
`response_complete` is always the last, and the run's outcome is stored
before it is shown.

With a `Store`, the run's record (its status and `RunState`) joins the
session's `Journal` and is written at the run's durable checkpoints: before
a tool runs (a crash then reports it as one that may have run), before a
wait for the user, at the end, and when a shutdown parks the run
(`suspended`, continued after the restart). A checkpoint the database
refuses for a while is tried again for up to `store_retry_s`; a fence
(another instance owns the conversation now) is final at once. A person's
decision (an answer, an approval) is stored before the run acts on it
(`decided`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from backend.agent.budget_meter import BudgetMeter
from backend.agent.cutoffs import CANCELLED_NOTE
from backend.agent.driver import RunDriver
from backend.agent.loop import AgentContext, AgentResult
from backend.agent.registry import StrategyRegistry
from backend.agent.state import ENDING, Ending, RunState, WaitOutcome
from backend.agent.summary import cut_short
from backend.agent.time_limit import TimeLimit
from backend.budget import Budget
from backend.chat.daily_budgets import DailyBudgets
from backend.chat.instructions import Instructions
from backend.chat.run_trace import run_ended, run_span
from backend.chat.session import ActiveRun, Session
from backend.chat.sessions import SessionTable
from backend.errors import (
    Busy,
    InvalidMessage,
    Moved,
    OwnershipLost,
    RunSuspended,
    StoreUnavailable,
    incident,
)
from backend.history import History
from backend.notifications import stamp
from backend.protocol import AgentError, ChatMessage, Error
from backend.settings import Settings
from backend.store.base import Fenced, StoreError
from backend.store.records import RunRecord, RunStatus
from backend.telemetry.signals import NO_TELEMETRY, Telemetry
from backend.telemetry.tracing import NULL_SPAN, Span
from backend.transcript import Message

log = logging.getLogger(__name__)

MOVED_DECISION = (
    "this server no longer holds the conversation, so your decision was not "
    "taken; reconnect and send it again"
)


class RunSupervisor:
    def __init__(
        self,
        *,
        strategies: StrategyRegistry,
        settings: Settings,
        table: SessionTable,
        clock: Callable[[], float],
        telemetry: Telemetry = NO_TELEMETRY,
        instance: str = "",
        daily_budgets: Mapping[str, Budget] | None = None,
    ) -> None:
        """`daily_budgets`: the users whose budget per day is their own."""
        self.strategies = strategies
        self.prices = settings.price_table
        self.daily = DailyBudgets(
            table.store, settings.daily_budget, daily_budgets, clock=clock
        )
        """Each user's budget per day, fitted to their runs as they start."""
        self.instructions = Instructions(
            table.store, max_chars=settings.instructions_max_chars, clock=clock
        )
        """Custom instructions: every run takes its user's and conversation's."""
        self.settings = settings
        self.table = table
        self.time_limit = TimeLimit(
            active_s=settings.run_timeout_s,
            final_answer_s=settings.run_final_answer_timeout_s,
        )
        self._clock = clock
        self.telemetry = telemetry
        self.instance = instance
        """This instance's id, on the runs' spans."""
        self.tasks: asyncio.TaskGroup | None = None
        """Where runs are started: the service's TaskGroup, while it runs."""
        self.after_run: Callable[[Session], Awaitable[None]] | None = None
        """What follows a run that ended here (the next held input runs)."""

    # ------------------------------------------------------------ starting

    def start(self, session: Session, message: ChatMessage, state: RunState) -> None:
        """A new run for `message`: its request joins the history (a scratch
        copy of it when the chat is not saved), then the run starts."""
        history = session.history if message.save_chat else History(session.history)
        if not message.save_chat and session.journal is not None:
            session.journal.unsaved_runs.add(state.run_id)
        state.history_start = 0 if message.include_history else len(history)
        state.request_at = len(history)
        history.append(Message.user(message.content))
        self.launch(session, state, history)

    def resume(self, session: Session, state: RunState) -> None:
        """Continue a run from its state (a checkpoint) and the session's history.

        A run that was waiting for the user waits again without asking twice.
        """
        if session.run is not None:
            raise Busy(
                f"a run is already active in this session ({session.run.run_id})"
            )
        if state.session_id != session.id or state.strategy not in self.strategies:
            raise InvalidMessage(
                f"run {state.run_id} cannot continue here (session "
                f"{state.session_id}, strategy {state.strategy!r})"
            )
        self.launch(session, state)

    def launch(
        self, session: Session, state: RunState, history: History | None = None
    ) -> None:
        """The run's task, in the service's TaskGroup."""
        if self.tasks is None:
            raise RuntimeError("ChatService used outside `async with`")
        run = ActiveRun(state, history=history or session.history)
        session.run = run
        run.task = self.tasks.create_task(self._drive(session, run))

    # ------------------------------------------------------------ driving

    async def _drive(self, session: Session, run: ActiveRun) -> None:
        with run_span(self.telemetry, run.state, self.instance) as span:
            ended = await self._run(session, run, span)
        if ended and self.after_run is not None:
            await self.after_run(session)

    async def _run(self, session: Session, run: ActiveRun, span: Span) -> bool:
        """Drive the run; False if it did not end here (parked, moved)."""
        state, notify = run.state, session.notify
        notify.begin_run(state.run_id, agent=state.request.agent)
        strategy = self.strategies.get(state.strategy)
        assert strategy is not None
        ctx = self._context(session, run)

        async def checkpoint(_ctx: AgentContext) -> None:
            await self._checkpoint(session, run)

        driver = RunDriver(
            strategy,
            ctx,
            run.control,
            checkpoint=checkpoint,
            time_limit=self.time_limit,
            budget=self.meter(state),
        )
        try:
            await self.instructions.apply(state)  # before the first checkpoint
            if self._keep(session, state, "waiting" if state.waiting else "running"):
                await self._flush_patiently(session)  # a crash reports it
            ctx.epoch = _fence(session, state)
            result: AgentResult | None = await driver.run()
        except RunSuspended:
            span.set("loopwire.parked", True)  # a later span continues it
            self._park(session, run)
            await self.table.flush_quietly(session)
            return False
        except asyncio.CancelledError:
            self._detach(session)  # past the shutdown grace: left mid-phase
            raise
        except OwnershipLost as exc:  # nothing more is written or sent from here
            log.error("run %s: %s; it goes on where it is owned", state.run_id, exc)
            self.table.let_go(session)
            self._detach(session)
            return False
        except StoreError as exc:
            case = incident()
            log.error("run %s: checkpoint failed (%s): %s", state.run_id, case, exc)
            notify.error(
                "the run was ended because it could not be saved "
                f"(incident {case}; the server log has the details)",
                "store_error",
                in_run=True,
            )
            result = None
        except Exception:  # outermost layer: report, never kill the service
            case = incident()
            log.exception("run %s failed (incident %s)", state.run_id, case)
            notify.error(
                f"internal error: the run was ended (incident {case}; the "
                "server log has the details)",
                "internal_error",
                in_run=True,
            )
            result = None
        await self._end(session, run, result, span)
        return True

    def meter(self, state: RunState) -> BudgetMeter:
        """The run's spending against its budget, priced by the table."""
        final = self.settings.budget_final_tokens
        return BudgetMeter(state, self.prices, final_tokens=final)

    def _context(self, session: Session, run: ActiveRun) -> AgentContext:
        """What the run's strategy sees: its state, history, sink, files."""
        return AgentContext(
            run.state,
            run.history,
            session.notify.emit,
            files=session.files,
            held=session.holding,
            telemetry=self.telemetry,
        )

    async def _end(
        self,
        session: Session,
        run: ActiveRun,
        result: AgentResult | None,
        span: Span = NULL_SPAN,
    ) -> None:
        """A run that ended here (`result` None: it failed): the closing
        frames, the record final and stored, then `response_complete`."""
        state = run.state
        if result is not None:
            self.finish(session, run, result)
        else:  # its checkpoint says how it ended, as for any other ending
            state.ending = Ending(answer=None, reason="error", error="failed")
            state.phase = ENDING
        self.record_end(session, run, result.reason if result else "error")
        with session.holding():  # the outcome is stored before it is announced
            session.notify.response_complete()
            await self._flush_quietly(session)
        stopped_at = run.control.stop_requested_at
        if stopped_at is not None:
            self.telemetry.metrics.stop_latency(time.perf_counter() - stopped_at)
        run_ended(self.telemetry, span, state, self._clock() - state.started_at)
        self.close(session, run)

    def finish(self, session: Session, run: ActiveRun, result: AgentResult) -> None:
        """The one ending of every run: history, then the closing frames."""
        notify, state = session.notify, run.state
        agent = state.request.agent
        if result.reason == "stopped" and agent:
            notify.agent_stopped(result.steps, result.stop_mode or "immediate")
        if result.error is not None:
            if agent:
                notify.emit(AgentError(message=result.error))
            else:
                notify.error(result.error, "llm_error", in_run=True)
        if result.answer:
            run.history.append(Message.assistant(result.answer))
            cost = self.prices.cost(state.model, result.usage)
            notify.chat_response(result.answer, state.sources, result.usage, cost)
        elif result.reason in ("stopped", "interrupted"):
            run.history.append(Message.assistant(cut_short(state, result.reason)))
        if agent:
            notify.agent_completion(
                steps=result.steps,
                reason=result.reason,
                usage=result.usage,
                duration_ms=(self._clock() - state.started_at) * 1000,
                strategy=state.strategy,
                cost_usd=self.prices.cost(state.model, result.usage),
            )

    def record_end(self, session: Session, run: ActiveRun, status: RunStatus) -> None:
        """After the closing frames: history whole, the record final."""
        run.history.close_dangling_tool_calls(CANCELLED_NOTE)
        self._keep(session, run.state, status)

    def close(self, session: Session, run: ActiveRun) -> None:
        """After `response_complete`: the session is free for the next run."""
        session.last_run = run
        if session.journal is not None:
            session.journal.run_ended(run.run_id)
        self._detach(session)
        self.table.mark(session)  # response_complete, for the write-behind task

    def _park(self, session: Session, run: ActiveRun) -> None:
        """A shutdown (or the need for room) parked the run: save it as
        `suspended`, to go on after the restart; or, parked in a wait for
        its user, as `waiting`, to go on when its conversation is opened."""
        self._keep(session, run.state, "waiting" if run.state.waiting else "suspended")
        self._detach(session)

    def _detach(self, session: Session) -> None:
        session.notify.end_run()
        session.run = None
        session.touch()

    # ------------------------------------------------------------ the store

    async def _checkpoint(self, session: Session, run: ActiveRun) -> None:
        """After every phase. The state is written, with what led to it,
        before what must outlive the process: a tool about to run (so a crash
        reports it as one that may have run) and a wait for the user; the
        run's end and a shutdown's parking write it too. In between, a crash
        leaves the run `interrupted` whatever was written, so those phases
        are not worth a transaction each."""
        state = run.state
        if state.in_flight is None and not state.waiting:
            return
        status: RunStatus = "waiting" if state.waiting else "running"
        if self._keep(session, state, status):
            await self._flush_patiently(session)

    async def decided(
        self, session: Session, run: ActiveRun, outcome: WaitOutcome | None
    ) -> None:
        """Store a person's decision before the run acts on it: the run's
        record, still waiting, with the decision as its resolution (a run
        continued from it acts on it, on any instance); `outcome` None: the
        decision is in the state already (`decided_ahead`). An instance that no
        longer owns the conversation is refused by the store's fence: the
        decision is not taken, the client is told to send it again
        (`moved`), and the conversation is let go here."""
        state = run.state
        if session.journal is None or not state.request.save_chat:
            return
        decided = state.model_copy(update={"resolution": outcome or state.resolution})
        session.journal.run(self._record(decided, "waiting"))
        await self.stored_now(session)

    async def stored_now(self, session: Session) -> None:
        """What the session journaled, stored before a person is answered
        (a decision, a held input): `Moved` if this instance no longer owns
        the conversation (let go here), `StoreUnavailable` if the store
        keeps failing."""
        try:
            await self._flush_patiently(session, let_go=False)
        except Fenced as exc:
            session.outbox.notice(_moved_notice(session.id))  # before it closes
            self.table.let_go(session)
            raise Moved(MOVED_DECISION) from exc
        except StoreError as exc:
            raise StoreUnavailable(
                "what you sent could not be saved, so it was not taken; try again"
            ) from exc

    async def _flush_patiently(self, session: Session, *, let_go: bool = True) -> None:
        """`flush`, tried again for up to `store_retry_s` while the database
        fails (a restart, a connection cut): the run waits rather than ends.
        A fence (another instance owns it) is final at once."""
        give_up = time.monotonic() + self.settings.store_retry_s
        pause = 0.05
        while True:
            try:
                await self.table.flush(session, let_go=let_go)
                return
            except Fenced:
                raise
            except StoreError as exc:
                if session.journal is None or time.monotonic() + pause > give_up:
                    raise
                log.warning(
                    "session %s: checkpoint failed (retrying): %s", session.id, exc
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)

    async def _flush_quietly(self, session: Session) -> None:
        """`_flush_patiently`, a failure logged (the journal keeps what was
        not written; a fence has let the session go)."""
        try:
            await self._flush_patiently(session)
        except StoreError as exc:
            log.error("could not save session %s: %s", session.id, exc)

    def _keep(self, session: Session, state: RunState, status: RunStatus) -> bool:
        """Journal the run's record, and forget the held inputs it was told
        (deleted in the same batch); False when the run is not saved."""
        for input_id in state.interjected:
            if session.inbox.remove(input_id) is not None and session.journal:
                session.journal.input_used(input_id)
        if session.journal is None:
            return False
        saved = state.request.save_chat  # if not, its usage is counted all the same
        session.journal.run(self._record(state, status), saved=saved)
        return saved

    def _record(
        self, state: RunState, status: RunStatus, error: str | None = None
    ) -> RunRecord:
        """The run's record for the store, its state with it."""
        ended = status not in ("running", "waiting", "suspended")
        return RunRecord(
            id=state.run_id,
            conversation_id=state.session_id,
            strategy=state.strategy,
            status=status,
            request=state.request.content,
            steps=state.step,
            usage=state.usage,
            model=state.model,
            cost_usd=self.prices.cost(state.model, state.usage),
            started_at=state.started_at,
            ended_at=self._clock() if ended else None,
            active_ms=round(state.active_ms, 3),
            error=error,
            state=state.to_json(),
        )


def _fence(session: Session, state: RunState) -> int | None:
    """The epoch a run's data-changing tools write at: that of a stored
    conversation the run is saved in (None: nothing to fence)."""
    journal = session.journal
    if journal is None or not journal.stored or not state.request.save_chat:
        return None
    return journal.epoch


def _moved_notice(session_id: str) -> str:
    """The `moved` error, outside the session's sequence (seq 0): this
    instance's numbering of the conversation is not the owner's any more."""
    return stamp(
        Error(message=MOVED_DECISION, error_type="moved"),
        seq=0,
        session_id=session_id,
        run_id=None,
        ts=time.time(),
    )
