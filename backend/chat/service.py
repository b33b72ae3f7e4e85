"""`ChatService`: sessions, history, and one run per session.

Transports hand it typed client messages; it answers through each session's
`Notifications`. Every run goes one way, whatever the mode: a `chat` picks a
strategy from the injected `StrategyRegistry` (`loop_strategy`, else by mode:
plain → `llm_only`, tools selected → `act`, `agent_mode` → the configured
default, data sources named and nothing else → `retrieve`), becomes a
`RunState`, and a `RunDriver` runs it as a task in the service's TaskGroup
(never detached). `_finish_run` is the one place that
writes the answer to history and sends a run's closing frames. A `chat`
with `replace_from` (an edit) first removes the run it names and every
later one (`chat/replacement.py`), then starts the same way.

With a `Store`, conversations last: each session's `Journal` collects its
frames, messages and run records, written at the run's durable checkpoints
(before a tool runs, before a wait, at the end) and, for frames outside
runs, by the write-behind task. A
session with no socket and no run leaves memory after a grace period and is
loaded again when someone reconnects. A starting service continues the runs
that were waiting for the user or parked by a shutdown, and reports the ones
a dying process cut off mid-phase as interrupted (`Lifecycle` below).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from backend.agent.cutoffs import CANCELLED_NOTE
from backend.agent.driver import RunDriver, RunSuspended
from backend.agent.loop import AgentContext, AgentResult
from backend.agent.registry import StrategyRegistry
from backend.agent.run_control import RunControl
from backend.agent.state import (
    ENDING,
    Answered,
    Approved,
    Declined,
    Ending,
    RunState,
    WaitOutcome,
)
from backend.agent.summary import summarize_outcomes
from backend.agent.time_limit import TimeLimit
from backend.bus.base import Bus
from backend.bus.local import LocalBus
from backend.chat.cluster import Cluster, Target, error_type_of, raise_for, wire
from backend.chat.mirror import Mirror
from backend.chat.outcome import run_outcome
from backend.chat.replacement import conversation_runs, plan_replacement
from backend.chat.run_requests import PLAIN, TOOL_MODE, RunRequests
from backend.chat.session import ActiveRun, Session
from backend.chat.sessions import SessionTable
from backend.errors import (
    Busy,
    ConfigError,
    InvalidMessage,
    Moved,
    NoSuchConversation,
    OwnershipLost,
    ProtocolError,
    StoreUnavailable,
    incident,
)
from backend.files.shelf import info
from backend.history import History
from backend.llm.base import LLMClient, Message
from backend.notifications import stamp
from backend.protocol import (
    AgentControlMessage,
    AgentError,
    AgentStepsGranted,
    AgentUserInputMessage,
    ChatMessage,
    ClientMessage,
    Error,
    ErrorType,
    Limits,
    ResetSessionMessage,
    ServerInfo,
    ToolApprovalResponseMessage,
    ToolEffectInfo,
    ToolInfo,
)
from backend.settings import Settings
from backend.store.base import (
    Fenced,
    FileRecord,
    RunRecord,
    RunStatus,
    Store,
    StoreError,
)
from backend.tools.base import AnyTool, ToolRegistry
from backend.users import LOCAL_USER

log = logging.getLogger(__name__)

RESTARTING = "the server is restarting; reconnect with your session_id to continue"
MOVED_DECISION = (
    "this server no longer holds the conversation, so your decision was not "
    "taken; reconnect and send it again"
)
INTERRUPTED = (
    "the server stopped while this run was working, so it was ended here; "
    "what it had done is kept in the conversation"
)


class ChatService:
    def __init__(
        self,
        *,
        llm: LLMClient,
        registry: ToolRegistry,
        strategies: StrategyRegistry,
        settings: Settings,
        store: Store | None = None,
        forget_session: Callable[[str], None] = lambda _session_id: None,
        on_close: Callable[[], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.time,
        data_sources: Sequence[str] = (),
        bus: Bus | None = None,
    ) -> None:
        """`on_close` runs last when the service stops (after every run has
        ended): e.g. the tool executor's worker processes. `data_sources`:
        the names `search_documents` searches (a `chat` may choose among them).
        `bus`: how this instance reaches the others (`RedisBus`); one
        process by default (`LocalBus`)."""
        for needed in (settings.agent_loop_strategy, PLAIN, TOOL_MODE):
            if needed not in strategies:
                known = ", ".join(strategies.names)
                raise ConfigError(
                    f"loop strategy {needed!r} is not registered (known: {known})"
                )
        self.llm = llm
        self.registry = registry
        self.strategies = strategies
        self.settings = settings
        self.store = store
        self.data_sources = tuple(data_sources)
        self.requests = RunRequests(
            llm=llm,
            registry=registry,
            strategies=strategies,
            settings=settings,
            data_sources=data_sources,
        )
        self.time_limit = TimeLimit(
            active_s=settings.run_timeout_s,
            final_answer_s=settings.run_final_answer_timeout_s,
        )
        self._clock = clock
        self.bus: Bus = bus or LocalBus()

        def evicted(session_id: str) -> None:
            forget_session(session_id)
            self.bus.release(session_id)

        self.table = SessionTable(settings, store, forget_session=evicted, clock=clock)
        self.cluster = Cluster(self, self.bus)
        self.draining = False
        self._on_close = on_close
        self._tasks: asyncio.TaskGroup | None = None
        self._loops: list[asyncio.Task[None]] = []

    @property
    def sessions(self) -> dict[str, Session]:
        """The sessions in memory, by id."""
        return self.table.by_id

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ChatService:
        await self.bus.start()
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        self._loops = [
            self._tasks.create_task(self.table.write_behind()),
            *self.cluster.start(self._tasks),
        ]
        if self.store is not None and self.bus.clustered:
            await self.cluster.adopt_orphans()
        elif self.store is not None:
            await self._recover()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.store is not None:
            await self.drain()
        for session in self.sessions.values():
            if session.run is not None:
                session.run.control.stop("immediate")
        for loop in self._loops:
            loop.cancel()
        tasks, self._tasks = self._tasks, None
        try:
            if tasks is not None:
                await tasks.__aexit__(exc_type, exc, tb)
            await self.flush_all()
            await self.table.release_all()  # everything stored: no gap next time
        finally:
            await self.bus.close()  # the leases go once everything is saved
            if self._on_close is not None:
                await self._on_close()

    async def drain(self) -> None:
        """Shut down without losing anything: refuse new work, park every run
        at its next phase boundary or wait (cancelling those that do not get
        there within `shutdown_grace_s`), save everything, tell every client
        and close their sockets."""
        if self.draining:
            return
        self.draining = True
        runs = [s.run for s in self.sessions.values() if s.run is not None]
        for run in runs:
            run.control.park()
        tasks = [run.task for run in runs if run.task is not None]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=self.settings.shutdown_grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        for session in list(self.sessions.values()):
            if session.outbox.subscriber_count:
                session.notify.error(RESTARTING, "server_restarting")
            session.outbox.close_all(reason=RESTARTING)
        for mirror in self.cluster.mirrors.values():  # shown here, owned elsewhere
            mirror.notice(RESTARTING, "server_restarting")
            mirror.outbox.close_all(reason=RESTARTING)
        await self.flush_all()

    # ------------------------------------------------------------ sessions

    async def open_session(
        self, session_id: str | None = None, *, owner: str = LOCAL_USER
    ) -> tuple[Target, bool]:
        """The session to attach to: the named one if it exists (in memory,
        in the store, or on another instance: then its `Mirror`) and belongs
        to `owner`, else a new one."""
        if self.bus.clustered:
            return await self.cluster.open(session_id, owner)
        return await self.table.open(session_id, owner=owner)

    async def flush(self, session: Session) -> None:
        await self.table.flush(session)

    def _in_reach(self, session_id: str) -> bool:
        """Whether this instance acts on the conversation itself: it has it
        in memory, or there is no other instance that could."""
        return session_id in self.table.by_id or not self.bus.clustered

    async def flush_session(self, session_id: str, owner: str = LOCAL_USER) -> None:
        """Save what the conversation has pending, wherever it is in memory
        (before reading it from the store)."""
        if self._in_reach(session_id):
            await self.table.flush_session(session_id)
            return
        raise_for(await self.cluster.request(session_id, owner, "flush", {}))

    async def flush_all(self) -> None:
        await self.table.flush_all()

    def forget(self, session_id: str) -> bool:
        return self.table.forget(session_id)

    async def forget_anywhere(self, session_id: str, owner: str) -> bool:
        """`forget`, on whichever instance has the conversation in memory."""
        if self._in_reach(session_id):
            return self.forget(session_id)
        reply = await self.cluster.request(session_id, owner, "forget", {})
        if reply.status == "not_here":
            return True
        raise_for(reply)
        return bool(reply.body.get("forgotten"))

    async def ensure_stored(self, session_id: str, owner: str) -> bool:
        """Create the conversation of a live session of `owner` in the store
        if it is not there yet (a file may come before the first message);
        False when there is no such session."""
        if not self._in_reach(session_id):
            reply = await self.cluster.request(
                session_id, owner, "flush", {"store": True}
            )
            return reply.status == "ok" and bool(reply.body.get("stored"))
        session = self.table.by_id.get(session_id)
        if session is None or session.owner != owner or session.journal is None:
            return False
        if not session.journal.stored:
            session.journal.want_stored()
            await self.flush(session)
        return session.journal.stored

    def files_added(self, record: FileRecord) -> None:
        """A file joined a conversation: a session in memory lists it (its
        next reason prompt shows it) and tells its clients (`files_update`)."""
        session = self.table.by_id.get(record.conversation_id)
        if session is None:
            if self.bus.clustered and self._tasks is not None:  # owned elsewhere?
                self._tasks.create_task(self._tell_files_added(record))
            return  # loaded with its files from the store when it comes back
        session.files.append(info(record))
        session.notify.files_update(list(session.files), [record.id])

    async def _tell_files_added(self, record: FileRecord) -> None:
        body = record.model_dump(mode="json")
        reply = await self.cluster.request(
            record.conversation_id, "", "files_added", body
        )
        if reply.status == "error":
            log.warning("files_update for %s not sent: %s", record.id, reply.message)

    def now(self) -> float:
        return self._clock()

    @property
    def models(self) -> tuple[str, ...]:
        """What a client may name as `model` (`RunRequests.models`)."""
        return self.requests.models

    def server_info(self) -> ServerInfo:
        settings = self.settings
        limits = Limits(
            max_steps_cap=settings.agent_max_steps_cap,
            default_max_steps=settings.agent_max_steps,
            max_message_bytes=settings.max_message_bytes,
        )
        return ServerInfo(
            limits=limits,
            model=self.llm.model,
            models=list(self.models),
            provider=self.llm.provider,
            tools=[_tool_info(tool) for tool in self.registry],
            strategies=self.requests.strategy_names(),
            data_sources=list(self.data_sources),
        )

    def ready_frame(self, session: Target, *, resumed: bool) -> str:
        """The `session_ready` frame's JSON text for a connection."""
        if isinstance(session, Mirror):
            return session.ready_frame(info=self.server_info())
        return session.notify.session_ready(
            resumed=resumed,
            info=self.server_info(),
            oldest_seq=session.outbox.oldest_seq,
        )

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

    def _keep(self, session: Session, state: RunState, status: RunStatus) -> bool:
        """Journal the run's record; False when the run is not saved."""
        if session.journal is None or not state.request.save_chat:
            return False
        session.journal.run(self._record(state, status))
        return True

    def _record(
        self, state: RunState, status: RunStatus, error: str | None = None
    ) -> RunRecord:
        ended = status not in ("running", "waiting", "suspended")
        return RunRecord(
            id=state.run_id,
            conversation_id=state.session_id,
            strategy=state.strategy,
            status=status,
            request=state.request.content,
            steps=state.step,
            usage=state.usage,
            started_at=state.started_at,
            ended_at=self._clock() if ended else None,
            active_ms=round(state.active_ms, 3),
            error=error,
            state=state.to_json(),
        )

    # ------------------------------------------------------------ recovery

    async def _recover(self) -> None:
        """Continue what a previous process left: waiting and parked runs go
        on; runs it was in the middle of are reported interrupted."""
        assert self.store is not None
        for record in await self.store.live_runs():
            session = self.sessions.get(
                record.conversation_id
            ) or await self.table.load(record.conversation_id)
            if session is not None:
                await self._continue(session, record)

    async def recover_session(self, session: Session) -> None:
        """`_recover` for one conversation just taken over by this instance
        (its owner died or shut down)."""
        if self.store is None:
            return
        for record in await self.store.live_runs(session.id):
            await self._continue(session, record)

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
            self._launch(session, state)
        await self.flush(session)

    def _interrupt(self, session: Session, state: RunState) -> None:
        strategy = self.strategies.get(state.strategy) or next(iter(self.strategies))
        notify = session.notify
        notify.begin_run(state.run_id, agent=state.request.agent)
        ctx = AgentContext(state, session.history, notify.emit, files=session.files)
        result = RunDriver(strategy, ctx, RunControl()).interrupted()
        notify.error(INTERRUPTED, "run_interrupted", in_run=True)
        run = ActiveRun(state, history=session.history)
        self._finish_run(session, run, result)
        self._record_end(session, run, "interrupted")
        notify.response_complete()
        self._close(session, run)

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

    # ------------------------------------------------------------ messages

    async def handle(self, session: Target, message: ClientMessage) -> None:
        """Act on one client message; protocol errors become `error` frames.
        A mirror's message goes to the instance that owns the session."""
        session.touch()
        if isinstance(session, Mirror):
            body = {"message": wire(message)}
            reply = await self.cluster.forward(session, "handle", body)
            if reply.status != "ok":
                session.notice(reply.message or "not delivered", error_type_of(reply))
            return
        try:
            await self.dispatch(session, message)
        except Moved:
            return  # told already (`_decided`), and the socket closes
        except ProtocolError as exc:
            session.notify.error(str(exc), exc.error_type)  # type: ignore[arg-type]

    async def report(
        self, session: Target, message: str, error_type: ErrorType
    ) -> None:
        """An `error` frame about the client's own input (a frame refused,
        too many frames), in the session's sequence."""
        if isinstance(session, Session):
            session.notify.error(message, error_type)
            return
        body = {"message": message, "error_type": error_type}
        reply = await self.cluster.forward(session, "report", body)
        if reply.status != "ok":
            session.notice(message, error_type)

    async def dispatch_here(
        self, session: Session, message: ClientMessage
    ) -> dict[str, Any]:
        """`dispatch`, and what an HTTP client is told: a new run's id and
        where its request sits in the history; the budget after a grant."""
        await self.dispatch(session, message)
        run = session.run
        if isinstance(message, ChatMessage) and run is not None:
            return {"run_id": run.run_id, "request_at": run.state.request_at}
        if isinstance(message, AgentControlMessage) and run is not None:
            return {"max_steps": run.state.max_steps}
        return {}

    async def dispatch_to(
        self, session: Target, message: ClientMessage
    ) -> dict[str, Any]:
        """`dispatch_here` on the session, or on the instance owning the
        mirrored one; a refusal raises its `ProtocolError` either way."""
        if isinstance(session, Session):
            return await self.dispatch_here(session, message)
        body = {"message": wire(message)}
        reply = await self.cluster.forward(session, "dispatch", body)
        raise_for(reply)
        return reply.body

    async def control(
        self, conversation_id: str, user: str, message: ClientMessage
    ) -> dict[str, Any]:
        """A control message sent over HTTP (answer, stop, steps, approval)
        to the conversation, on whichever instance holds it. Raises
        `NoSuchConversation` when none of `user`'s is in memory anywhere."""
        session = self.table.by_id.get(conversation_id)
        if session is not None:
            if session.owner != user:
                raise NoSuchConversation(conversation_id)
            session.touch()
            return await self.dispatch_here(session, message)
        if not self.bus.clustered:
            raise NoSuchConversation(conversation_id)
        body = {"message": wire(message)}
        reply = await self.cluster.request(conversation_id, user, "dispatch", body)
        if reply.status == "not_here":  # nobody owns it (its owner died): here
            taken = await self.cluster.take(conversation_id)
            if isinstance(taken, Session) and taken.owner == user:
                return await self.dispatch_here(taken, message)
        if reply.status in ("not_here", "forbidden"):
            raise NoSuchConversation(conversation_id)
        raise_for(reply)
        return reply.body

    async def dispatch(self, session: Session, message: ClientMessage) -> None:
        """Act on one client message; a `ProtocolError` says why it cannot be
        (`handle` turns it into an `error` frame; HTTP routes into a status).
        Only an edit (`replace_from`) and a decision (stored before it is
        handed to the run) wait."""
        if session.lost:  # its clients were told and closed
            raise Moved(MOVED_DECISION)
        match message:
            case ChatMessage(replace_from=None):
                self._start_run(session, message)
            case ChatMessage():
                await self._replace_and_start(session, message)
            case AgentControlMessage():
                self._control(session, message)
            case AgentUserInputMessage(content=content, question_id=question_id):
                run = session.answerable(question_id)
                await self._decided(session, run, Answered(content=content))
                session.submit_answer(content, question_id)
            case ToolApprovalResponseMessage(
                tool_call_id=call_id, approved=ok, reason=why
            ):
                run = session.approvable(call_id)
                decided = Approved() if ok else Declined(reason=why)
                await self._decided(session, run, decided)
                session.resolve_approval(call_id, ok, why)
            case ResetSessionMessage():
                self._reset(session)

    async def _decided(
        self, session: Session, run: ActiveRun, outcome: WaitOutcome
    ) -> None:
        """Store a person's decision before the run acts on it: the run's
        record, still waiting, with the decision as its resolution (a run
        continued from it acts on it, on any instance). An instance that no
        longer owns the conversation is refused by the store's fence: the
        decision is not taken, the client is told to send it again
        (`moved`), and the conversation is let go here."""
        state = run.state
        if session.journal is None or not state.request.save_chat:
            return
        decided = state.model_copy(update={"resolution": outcome})
        session.journal.run(self._record(decided, "waiting"))
        try:
            await self._flush_patiently(session, let_go=False)
        except Fenced as exc:
            session.outbox.notice(_moved_notice(session.id))  # before it closes
            self.table.let_go(session)
            raise Moved(MOVED_DECISION) from exc
        except StoreError as exc:
            raise StoreUnavailable(
                "your decision could not be saved, so it was not taken; try again"
            ) from exc

    # ------------------------------------------------------------ run outcomes

    async def outcome_of(
        self, session: Target, run_id: str | None, answer: str | None
    ) -> dict[str, Any]:
        """`outcome`, from the instance that owns the session."""
        if run_id is None:
            return {}
        if isinstance(session, Session):
            return run_outcome(session, run_id, answer)
        body = {"run_id": run_id, "answer": answer}
        reply = await self.cluster.forward(session, "outcome", body)
        return reply.body if reply.status == "ok" else {}

    def stop_soon(self, session: Target, run_id: str | None) -> None:
        """Stop the run `run_id` if it is still the session's (an HTTP client
        that asked for it went away); safe to call while being cancelled."""
        if run_id is None:
            return
        if isinstance(session, Session):
            self.stop_run(session, run_id)
        elif self._tasks is not None:
            body = {"run_id": run_id}
            self._tasks.create_task(self.cluster.forward(session, "stop_run", body))

    def stop_run(self, session: Session, run_id: str) -> None:
        run = session.run
        if run is not None and run.run_id == run_id:
            run.control.stop("immediate")

    def _control(self, session: Session, message: AgentControlMessage) -> None:
        run = session.active_run()
        if message.action == "grant_steps":
            assert message.steps is not None
            self._grant(session, run, message.steps)
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

    def _reset(self, session: Session) -> None:
        if session.run is not None:
            raise Busy("cannot reset the session while a run is active; stop it first")
        session.history.clear()
        if session.journal is not None:
            session.journal.history_truncated(0)
        session.notify.session_reset()

    # ------------------------------------------------------------ starting runs

    def _start_run(self, session: Session, message: ChatMessage) -> None:
        self._check_free(session)
        self._start(session, message, self.requests.state_for(session, message))

    def _check_free(self, session: Session) -> None:
        """A new run may start: refuse while draining or while one is active."""
        if self.draining:
            raise Busy(RESTARTING)
        if session.run is not None:
            raise Busy(
                f"a run is already active in this session ({session.run.run_id}); "
                "wait for response_complete or stop it"
            )

    def _start(self, session: Session, message: ChatMessage, state: RunState) -> None:
        history = session.history if message.save_chat else History(session.history)
        if not message.save_chat and session.journal is not None:
            session.journal.unsaved_runs.add(state.run_id)
        state.history_start = 0 if message.include_history else len(history)
        state.request_at = len(history)
        history.append(Message.user(message.content))
        self._launch(session, state, history)

    async def _replace_and_start(self, session: Session, message: ChatMessage) -> None:
        """Edit and resend: remove the named run and every later one (history
        cut, records deleted with the next flush, `runs_removed` sent), then
        start `message` as a new run. The whole chat is checked before
        anything is removed; a refusal changes nothing."""
        assert message.replace_from is not None
        self._check_free(session)
        if not message.save_chat:
            raise InvalidMessage(
                "replace_from needs save_chat: true (an edit replaces runs of "
                "the saved conversation)"
            )
        state = self.requests.state_for(session, message)
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
            session.history.truncate(replacement.cut_at)
            journal.history_truncated(replacement.cut_at)
            journal.runs_removed(replacement.run_ids)
            session.notify.runs_removed(replacement.run_ids)
            self._start(session, message, state)

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
        self._launch(session, state)

    def _launch(
        self, session: Session, state: RunState, history: History | None = None
    ) -> None:
        if self._tasks is None:
            raise RuntimeError("ChatService used outside `async with`")
        run = ActiveRun(state, history=history or session.history)
        session.run = run
        run.task = self._tasks.create_task(self._drive(session, run))

    # ------------------------------------------------------------ runs

    async def _drive(self, session: Session, run: ActiveRun) -> None:
        state, notify = run.state, session.notify
        notify.begin_run(state.run_id, agent=state.request.agent)
        strategy = self.strategies.get(state.strategy)
        assert strategy is not None
        ctx = AgentContext(
            state, run.history, notify.emit, files=session.files, held=session.holding
        )

        async def checkpoint(_ctx: AgentContext) -> None:
            await self._checkpoint(session, run)

        driver = RunDriver(
            strategy,
            ctx,
            run.control,
            checkpoint=checkpoint,
            time_limit=self.time_limit,
        )
        try:
            if self._keep(session, state, "waiting" if state.waiting else "running"):
                await self._flush_patiently(session)  # a crash reports it
            ctx.epoch = _fence(session, state)
            result: AgentResult | None = await driver.run()
        except RunSuspended:
            self._park(session, run)
            await self.table.flush_quietly(session)
            return
        except asyncio.CancelledError:
            self._detach(session)  # past the shutdown grace: left mid-phase
            raise
        except OwnershipLost as exc:  # nothing more is written or sent from here
            log.error("run %s: %s; it goes on where it is owned", state.run_id, exc)
            self.table.let_go(session)
            self._detach(session)
            return
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
        if result is not None:
            self._finish_run(session, run, result)
        else:  # its checkpoint says how it ended, as for any other ending
            state.ending = Ending(answer=None, reason="error", error="failed")
            state.phase = ENDING
        self._record_end(session, run, result.reason if result else "error")
        with session.holding():  # the outcome is stored before it is announced
            session.notify.response_complete()
            await self._flush_quietly(session)
        self._close(session, run)

    async def _flush_quietly(self, session: Session) -> None:
        """`_flush_patiently`, a failure logged (the journal keeps what was
        not written; a fence has let the session go)."""
        try:
            await self._flush_patiently(session)
        except StoreError as exc:
            log.error("could not save session %s: %s", session.id, exc)

    def _park(self, session: Session, run: ActiveRun) -> None:
        """A shutdown parked the run: save it as `suspended`; it goes on
        after the restart."""
        self._keep(session, run.state, "suspended")
        self._detach(session)

    def _detach(self, session: Session) -> None:
        session.notify.end_run()
        session.run = None
        session.touch()

    def _record_end(self, session: Session, run: ActiveRun, status: RunStatus) -> None:
        """After the closing frames: history whole, the record final."""
        run.history.close_dangling_tool_calls(CANCELLED_NOTE)
        self._keep(session, run.state, status)

    def _close(self, session: Session, run: ActiveRun) -> None:
        """After `response_complete`: the session is free for the next run."""
        session.last_run = run
        if session.journal is not None:
            session.journal.run_ended(run.run_id)
        self._detach(session)
        self.table.mark(session)  # response_complete, for the write-behind task

    def _finish_run(
        self, session: Session, run: ActiveRun, result: AgentResult
    ) -> None:
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
            notify.chat_response(result.answer, sources=state.sources)
        elif result.reason in ("stopped", "interrupted"):
            run.history.append(Message.assistant(_cut_short(state, result)))
        if agent:
            notify.agent_completion(
                steps=result.steps,
                reason=result.reason,
                usage=result.usage,
                duration_ms=(self._clock() - state.started_at) * 1000,
                strategy=state.strategy,
            )


def _fence(session: Session, state: RunState) -> int | None:
    """The epoch a run's data-changing tools write at: that of a stored
    conversation the run is saved in (None: nothing to fence)."""
    journal = session.journal
    if journal is None or not journal.stored or not state.request.save_chat:
        return None
    return journal.epoch


def _in_doubt(state: RunState) -> bool:
    """The run was cut off in a tool call (announced, maybe run): it goes on
    from there, the call settled by its `reconcile` or by the user."""
    flight = state.in_flight
    return (
        flight is not None
        and bool(state.queue)
        and (state.queue[0].id == flight.tool_call_id)
    )


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


def _cut_short(state: RunState, result: AgentResult) -> str:
    """What history keeps of a run cut off before it answered, so that a
    "continue" in the next message picks up from there."""
    how = "stopped by the user" if result.reason == "stopped" else "interrupted"
    done = summarize_outcomes(state.outcomes, state.step) if state.outcomes else ""
    notes = " ".join(state.observations[-3:])
    parts = [f"(This run was {how} at step {state.step} before it answered.)"]
    parts += [text for text in (notes, done) if text]
    return "\n\n".join(parts)


def _tool_info(tool: AnyTool) -> ToolInfo:
    effect = tool.effect
    return ToolInfo(
        name=tool.name,
        description=tool.description,
        summary=tool.people_summary,
        effect=ToolEffectInfo(
            read_only=effect.read_only,
            idempotent=effect.idempotent,
            requires_approval=effect.requires_approval,
            finalize=effect.finalize,
        ),
    )
