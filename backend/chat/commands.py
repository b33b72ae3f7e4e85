"""`Commands`: what other instances ask of the conversations owned here.

In a cluster, an instance that shows a conversation it does not own (its
`Mirror`) sends what its clients do to the owner as a `Command` over the
bus, one body per kind (`backend.bus.messages`, validated where it
arrives): a client's message, a refusal to report, a run to stop, an
outcome to compute, a flush, a forget, a file added, and `attach` (the
frames after a seq, and the frames published from then on).
Here, on the owner, each is answered by the same code a local client
reaches (the session's `Target` side), and a refusal travels back as a
`Reply` that the asking instance raises as the `ProtocolError` it was
(`raise_for`).

Watchers: an `attach` registers the asking instance as one of the
session's watchers, and its `watching` reports keep it registered; the
`Cluster`'s loop drops those it has not heard from for `WATCH_FACTOR`
periods.
"""

from __future__ import annotations

import time
from typing import Protocol, cast, get_args

from backend.bus.base import FORBIDDEN, NOT_HERE, OK, Bus, Command, Reply
from backend.bus.messages import (
    Attach,
    Attached,
    Dispatch,
    FilesAdded,
    Flush,
    Forget,
    Forgotten,
    Handle,
    Outcome,
    Report,
    Result,
    StopRun,
    Stored,
    Watched,
    Watching,
    wire,
)
from backend.chat.control_spans import control_span
from backend.chat.ownership import Ownership
from backend.chat.session import Session
from backend.chat.sessions import SessionTable
from backend.errors import NoSuchConversation, ProtocolError
from backend.protocol import ErrorType
from backend.store.base import StoreError
from backend.store.records import FileRecord
from backend.telemetry.signals import Telemetry
from backend.telemetry.tracing import continued

__all__ = [
    "MOVED",
    "WATCH_FACTOR",
    "Commands",
    "LocalService",
    "error_type_of",
    "raise_for",
    "wire",
]

MOVED = Reply(
    "error",
    error_type="moved",
    message="this instance no longer holds the conversation",
)
"""What a stale owner answers a forwarded message it could not take: the
asking instance looks the owner up again and sends it there."""
WATCH_FACTOR = 3.0
"""A watcher not heard from for this many renewal periods is dropped."""


class LocalService(Protocol):
    """What answering commands needs of this instance's `ChatService`."""

    def files_added(self, record: FileRecord) -> None: ...

    async def ensure_stored(self, session_id: str, owner: str) -> bool: ...

    @property
    def telemetry(self) -> Telemetry: ...


class Commands:
    def __init__(
        self,
        *,
        service: LocalService,
        table: SessionTable,
        bus: Bus,
        ownership: Ownership,
    ) -> None:
        self.service = service
        self.table = table
        self.bus = bus
        self.ownership = ownership

    @property
    def period_s(self) -> float:
        """How often watchers report (`Cluster.period_s`)."""
        return self.bus.lease_ttl_s / 3

    async def command(self, command: Command) -> Reply:
        """A command from an instance (the bus's `on_command`), in the trace
        of the span that sent it."""
        with continued(command.trace):
            return await self._received(command)

    async def _received(self, command: Command) -> Reply:
        if isinstance(command.body, Watching):
            return self._watching(command.sender, command.body)
        session_id = command.session_id
        await self.ownership.settled(session_id)  # being taken here: wait for it
        session = self.table.by_id.get(session_id)
        if session is None or not self.bus.holds(session_id):
            return NOT_HERE
        if isinstance(command.body, FilesAdded):
            self.service.files_added(command.body.record)
            return OK
        if session.owner != command.user:
            return FORBIDDEN
        session.touch()
        return await self._command(session, command)

    async def _command(self, session: Session, command: Command) -> Reply:
        match command.body:
            case Attach(after=after):
                return self._attached(session, command.sender, after)
            case Handle(message=message):
                await session.handle(message)
                if session.lost:  # refused `moved`: the asker finds the owner
                    return MOVED
                return OK
            case Dispatch(message=message):
                try:
                    done = await session.dispatch(message)
                except ProtocolError as exc:
                    return Reply("error", error_type=exc.error_type, message=str(exc))
                return Reply("ok", Result(value=done))
            case Report(message=message, error_type=error_type):
                await session.report(message, error_type)
                return OK
            case Outcome(run_id=run_id, answer=answer):
                return Reply("ok", Result(value=await session.outcome(run_id, answer)))
            case StopRun(run_id=run_id):
                run = session.run
                linked = run.state.trace_context if run is not None else None
                tracing = self.service.telemetry.tracing
                with control_span(
                    tracing, command.body, session_id=session.id, run_context=linked
                ):
                    session.stop_soon(run_id)
                return OK
            case Flush(store=store):
                return await self._flush(session, store=store)
            case Forget():
                return Reply("ok", Forgotten(forgotten=self.table.forget(session.id)))
        return Reply("error", error_type="invalid_message", message="unknown command")

    async def _flush(self, session: Session, *, store: bool) -> Reply:
        """Save what the session has pending; with `store`, create its
        conversation in the store first if it is not there yet."""
        try:
            if store:
                stored = await self.service.ensure_stored(session.id, session.owner)
                return Reply("ok", Stored(stored=stored))
            await self.table.flush(session)
        except StoreError as exc:
            return Reply("error", error_type="store_error", message=str(exc))
        return OK

    def _attached(self, session: Session, watcher: str, after: int) -> Reply:
        """Register the watcher and answer with the frames after `after`.
        Nothing awaits between the two: the reply is queued before any
        frame published after it."""
        session.watchers[watcher] = self._watch_deadline()
        session.relay = self.bus.publish
        attached = Attached(
            last_seq=session.notify.last_seq,
            run_id=session.run_id,
            frames=session.frames_after(after),
        )
        return Reply("ok", attached)

    def _watching(self, watcher: str, report: Watching) -> Reply:
        """A watcher's report: the sessions it shows. The reply names those
        not here now (it re-attaches to their new owner) and the last seq of
        the others (a frame lost on the way shows as a shortfall)."""
        gone = []
        last: dict[str, int] = {}
        deadline = self._watch_deadline()
        for session_id in report.sessions:
            session = self.table.by_id.get(session_id)
            if session is None or not self.bus.holds(session_id):
                gone.append(session_id)
            elif watcher in session.watchers:
                session.watchers[watcher] = deadline
                last[session_id] = session.notify.last_seq
            else:
                gone.append(session_id)  # forgotten here: attach again
        return Reply("ok", Watched(gone=gone, last=last))

    def _watch_deadline(self) -> float:
        return time.monotonic() + self.period_s * WATCH_FACTOR + 1.0


def error_type_of(reply: Reply) -> ErrorType:
    """The wire error type of a refusal another instance sent back."""
    known: tuple[str, ...] = get_args(ErrorType)
    kind = reply.error_type if reply.error_type in known else "unavailable"
    return cast(ErrorType, kind)


def raise_for(reply: Reply) -> None:
    """An owner's refusal, raised here as the `ProtocolError` it was there."""
    if reply.status == "ok":
        return
    if reply.status in ("not_here", "forbidden"):
        raise NoSuchConversation("no such conversation")
    raise ProtocolError.of_type(reply.error_type, reply.message or "refused")
