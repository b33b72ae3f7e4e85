"""`ChatService`: the conversations, as transports and the app see them.

Transports hand it typed client messages for the conversation a connection
is attached to (a `Target`: a `Session` owned here, or a `Mirror` of one
another instance owns, which forwards to the owner); it answers through
each session's `Notifications`. For a session owned here, the
`MessageDispatcher` (`chat/dispatcher.py`) acts on a message: a `chat`
becomes a `RunState` (`RunRequests`), which the `RunSupervisor`
(`chat/runs.py`) runs; the other messages are the user's levers on the run.

Its parts, wired here: `SessionTable` (the sessions in memory, loaded from
and saved to the `Store`), `RunSupervisor` (every run, start to end),
`MessageDispatcher`, `Recovery` (what a loaded conversation's live runs
become), and, for several instances, `Ownership` (taking conversations, losing them),
`Cluster` (opening, mirrors, forwarding) and `Commands` (what other
instances ask of the conversations owned here). The service's lifecycle
holds them together: on start, the runs a previous process left continue;
on shutdown (`drain`), every run is parked and everything saved.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from backend.agent.registry import StrategyRegistry
from backend.agent.state import RunState
from backend.aio import cancel_all
from backend.bus.base import Bus
from backend.bus.local import LocalBus
from backend.bus.messages import Flush, Forget, Forgotten, Result, Stored
from backend.chat.cluster import Cluster
from backend.chat.commands import Commands, raise_for, wire
from backend.chat.dispatcher import RESTARTING, MessageDispatcher
from backend.chat.ownership import Ownership
from backend.chat.recovery import Recovery
from backend.chat.run_requests import PLAIN, TOOL_MODE, RunRequests
from backend.chat.runs import RunSupervisor
from backend.chat.session import Session
from backend.chat.sessions import SessionTable
from backend.chat.target import Target
from backend.chat.tool_grants import ToolGrants
from backend.errors import (
    ConfigError,
    NoSuchConversation,
)
from backend.files.shelf import info
from backend.llm.base import LLMClient
from backend.protocol import (
    ClientMessage,
    ErrorType,
    ServerInfo,
)
from backend.settings import Settings
from backend.store.base import Store
from backend.store.records import FileRecord
from backend.telemetry.signals import NO_TELEMETRY, Telemetry
from backend.tools.base import ToolRegistry
from backend.users import LOCAL_USER

log = logging.getLogger(__name__)


class ChatService:
    def __init__(
        self,
        *,
        requests: RunRequests,
        settings: Settings,
        store: Store | None = None,
        forget_session: Callable[[str], None] = lambda _session_id: None,
        on_close: Callable[[], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.time,
        bus: Bus | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        """`requests` turns a client's `chat` into a run's state (with the
        LLM, tools, strategies and data sources it may use). `on_close` runs
        last when the service stops (after every run has ended): e.g. the
        tool executor's worker processes. `bus`: how this instance reaches
        the others (`RedisBus`); one process by default (`LocalBus`).
        `telemetry`: where runs are traced and counted."""
        strategies = requests.strategies
        for needed in (settings.agent_loop_strategy, PLAIN, TOOL_MODE):
            if needed not in strategies:
                known = ", ".join(strategies.names)
                raise ConfigError(
                    f"loop strategy {needed!r} is not registered (known: {known})"
                )
        self.requests = requests
        self.llm: LLMClient = requests.llm
        self.registry: ToolRegistry = requests.registry
        self.strategies: StrategyRegistry = strategies
        self.data_sources = requests.data_sources
        self.settings = settings
        self.store = store
        self._clock = clock
        self.bus: Bus = bus or LocalBus()
        self.telemetry = telemetry
        self._build_parts(forget_session)
        self._on_close = on_close
        self._tasks: asyncio.TaskGroup | None = None
        self._loops: list[asyncio.Task[None]] = []

    def _build_parts(self, forget_session: Callable[[str], None]) -> None:
        """The service's parts, and the bus's hooks into them."""

        def evicted(session_id: str) -> None:
            forget_session(session_id)
            self.bus.release(session_id)

        settings, store, bus = self.settings, self.store, self.bus
        self.table = SessionTable(
            settings, store, dispatcher=self, forget_session=evicted, clock=self._clock
        )
        self.runs = RunSupervisor(
            strategies=self.strategies,
            settings=settings,
            table=self.table,
            clock=self._clock,
            telemetry=self.telemetry,
            instance=bus.instance_id,
            daily_budgets=self.requests.daily_budgets,
        )
        self.grants = ToolGrants(store)
        self.dispatcher = MessageDispatcher(
            requests=self.requests,
            runs=self.runs,
            store=store,
            grants=self.grants,
            tracing=self.telemetry.tracing,
        )
        self.recovery = Recovery(
            store=store,
            table=self.table,
            strategies=self.strategies,
            runs=self.runs,
            clock=self._clock,
        )
        self.recovery.after = self.dispatcher.held.after_recovery
        self.ownership = Ownership(
            bus=bus, table=self.table, store=store, recovery=self.recovery
        )
        self.cluster = Cluster(
            bus=bus,
            table=self.table,
            settings=settings,
            ownership=self.ownership,
            tracing=self.telemetry.tracing,
        )
        self.commands = Commands(
            service=self, table=self.table, bus=bus, ownership=self.ownership
        )
        bus.on_command = self.commands.command
        bus.on_frame = self.cluster.frame
        bus.on_lost = self.ownership.lost

    @property
    def draining(self) -> bool:
        """Shutting down: no run starts, no connection is taken."""
        return self.dispatcher.draining

    @property
    def sessions(self) -> dict[str, Session]:
        """The sessions in memory, by id."""
        return self.table.by_id

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ChatService:
        await self.bus.start()
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        self.runs.tasks = self._tasks
        self._loops = [
            self._tasks.create_task(self.table.write_behind()),
            *self.cluster.start(self._tasks),
        ]
        if self.store is not None and self.bus.clustered:
            await self.ownership.adopt_orphans()
        elif self.store is not None:
            await self.recovery.recover()
            await self.dispatcher.held.left_by_the_last_process()
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
        tasks, self._tasks = self._tasks, None
        self.runs.tasks = None
        self.cluster.stop()
        try:
            await cancel_all(self._loops)
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
        self.dispatcher.draining = self.dispatcher.held.draining = True
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
        self,
        session_id: str | None = None,
        *,
        owner: str = LOCAL_USER,
        create: bool = True,
        named: bool = False,
        origin: str = "unknown",
    ) -> tuple[Target, bool]:
        """The session to attach to: the named one if it exists (in memory,
        in the store, or on another instance: then its `Mirror`) and belongs
        to `owner`, else a new one; with `create=False`, `NoSuchConversation`
        instead (a lookup leaves nothing behind). `named`: the new one takes
        the id `session_id` when no one has it, and another user's is
        `NoSuchConversation`, not a new one. A new one is tagged with `origin`."""
        if self.bus.clustered:
            return await self.cluster.open(
                session_id, owner, create=create, named=named, origin=origin
            )
        found = await self._here(session_id) if session_id else None
        if found is not None and found.owner == owner:
            found.touch()
            return found, True
        if not create or (named and found is not None):
            raise NoSuchConversation(f"no conversation {session_id!r}")
        new_id = session_id if named else None
        return await self.table.create(owner, new_id, origin), False

    async def _here(self, session_id: str) -> Session | None:
        """One process: the session in memory, else loaded from the store
        with its live runs going on again (a run parked while it waited for
        its user goes on now); None if there is no such conversation."""
        session = self.table.by_id.get(session_id)
        if session is None and self.store is not None:
            taken = await self.ownership.take(session_id)
            session = taken if isinstance(taken, Session) else None
        return session

    async def regrant(self, user: str) -> None:
        """The user's runs in progress here take their grants again (one
        was revoked): their next call of a tool no longer allowed asks."""
        for session in self.table.sessions_of(user):
            if session.run is not None:
                allowed = await self.grants.allowed(user, session.id)
                session.run.state.granted = allowed

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
        raise_for(await self.cluster.ask(session_id, owner, Flush()))

    async def flush_all(self) -> None:
        await self.table.flush_all()

    def forget(self, session_id: str) -> bool:
        return self.table.forget(session_id)

    async def forget_anywhere(self, session_id: str, owner: str) -> bool:
        """`forget`, on whichever instance has the conversation in memory."""
        if self._in_reach(session_id):
            return self.forget(session_id)
        reply = await self.cluster.ask(session_id, owner, Forget())
        if reply.status == "not_here":
            return True
        raise_for(reply)
        forgotten = reply.body_as(Forgotten)
        return forgotten is not None and forgotten.forgotten

    async def ensure_stored(self, session_id: str, owner: str) -> bool:
        """Create the conversation of a live session of `owner` in the store
        if it is not there yet (a file may come before the first message);
        False when there is no such session."""
        if not self._in_reach(session_id):
            reply = await self.cluster.ask(session_id, owner, Flush(store=True))
            stored = reply.body_as(Stored)
            return reply.status == "ok" and stored is not None and stored.stored
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
        return self.requests.server_info()

    # ------------------------------------------------------------ a connection's target

    def ready_frame(self, session: Target, *, resumed: bool) -> str:
        """The `session_ready` frame's JSON text for a connection."""
        return session.ready_frame(self.server_info(), resumed=resumed)

    async def handle(self, session: Target, message: ClientMessage) -> None:
        """Act on one client message; protocol errors become `error` frames.
        A mirror's message goes to the instance that owns the session."""
        session.touch()
        await session.handle(message)

    async def report(
        self, session: Target, message: str, error_type: ErrorType
    ) -> None:
        """An `error` frame about the client's own input (a frame refused,
        too many frames), in the session's sequence."""
        await session.report(message, error_type)

    async def dispatch_to(
        self, session: Target, message: ClientMessage
    ) -> dict[str, Any]:
        """`dispatch` on the session, or on the instance owning the mirrored
        one; a refusal raises its `ProtocolError` either way."""
        return await session.dispatch(message)

    async def outcome_of(
        self, session: Target, run_id: str | None, answer: str | None
    ) -> dict[str, Any]:
        """`run_outcome`, from the instance that owns the session."""
        if run_id is None:
            return {}
        return await session.outcome(run_id, answer)

    def stop_soon(self, session: Target, run_id: str | None) -> None:
        """Stop the run `run_id` if it is still the session's (an HTTP client
        that asked for it went away); safe to call while being cancelled."""
        if run_id is not None:
            session.stop_soon(run_id)

    async def control(
        self, conversation_id: str, user: str, message: ClientMessage
    ) -> dict[str, Any]:
        """A control message sent over HTTP (answer, stop, steps, approval)
        to the conversation, on whichever instance holds it. Raises
        `NoSuchConversation` when none of `user`'s is in memory anywhere."""
        if not self.bus.clustered or conversation_id in self.table.by_id:
            session = await self._here(conversation_id)
            if session is None or session.owner != user:
                raise NoSuchConversation(conversation_id)
            session.touch()
            return await self.dispatch(session, message)
        body = {"message": wire(message)}
        reply = await self.cluster.request(conversation_id, user, "dispatch", body)
        if reply.status == "not_here":  # nobody owns it (its owner died): here
            taken = await self.ownership.take(conversation_id)
            if isinstance(taken, Session) and taken.owner == user:
                return await self.dispatch(taken, message)
        if reply.status in ("not_here", "forbidden"):
            raise NoSuchConversation(conversation_id)
        raise_for(reply)
        result = reply.body_as(Result)
        return result.value if result is not None else {}

    async def dispatch(
        self, session: Session, message: ClientMessage
    ) -> dict[str, Any]:
        """Act on one client message in a session owned here
        (`MessageDispatcher.dispatch`)."""
        return await self.dispatcher.dispatch(session, message)

    def resume(self, session: Session, state: RunState) -> None:
        """Continue a run from its state (a checkpoint) and the session's
        history (`RunSupervisor.resume`)."""
        self.runs.resume(session, state)

    async def recover_session(self, session: Session) -> None:
        """What the live runs of a conversation just loaded become
        (`Recovery.recover_session`)."""
        await self.recovery.recover_session(session)
