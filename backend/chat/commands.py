"""`Commands`: what other instances ask of the conversations owned here.

In a cluster, an instance that shows a conversation it does not own (its
`Mirror`) sends what its clients do to the owner as a `Command` over the
bus: a client's message (`wire`, decoded here), a refusal to report, a run
to stop, an outcome to compute, a flush, a forget, a file added, and
`attach` (the frames after a seq, and the frames published from then on).
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
from typing import Any, Protocol, cast, get_args

from pydantic import ValidationError

from backend.bus.base import FORBIDDEN, NOT_HERE, OK, Bus, Command, Reply
from backend.chat.ownership import Ownership
from backend.chat.session import Session
from backend.chat.sessions import SessionTable
from backend.errors import NoSuchConversation, ProtocolError
from backend.protocol import ClientMessage, ErrorType, client_message_adapter
from backend.store.base import FileRecord, StoreError

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
        """A command from an instance (the bus's `on_command`)."""
        if command.kind == "watching":
            return self._watching(command)
        session_id = command.session_id
        await self.ownership.settled(session_id)  # being taken here: wait for it
        session = self.table.by_id.get(session_id)
        if session is None or not self.bus.holds(session_id):
            return NOT_HERE
        if command.kind == "files_added":
            self.service.files_added(FileRecord.model_validate(command.body))
            return OK
        if session.owner != command.user:
            return FORBIDDEN
        session.touch()
        return await self._command(session, command)

    async def _command(self, session: Session, command: Command) -> Reply:
        body = command.body
        match command.kind:
            case "attach":
                return self._attached(session, command)
            case "handle":
                await session.handle(_message(command))
                if session.lost:  # refused `moved`: the asker finds the owner
                    return MOVED
                return OK
            case "dispatch":
                try:
                    done = await session.dispatch(_message(command))
                except ProtocolError as exc:
                    return Reply("error", error_type=exc.error_type, message=str(exc))
                return Reply("ok", body=done)
            case "report":
                await session.report(str(body["message"]), body["error_type"])
                return OK
            case "outcome":
                outcome = await session.outcome(str(body["run_id"]), body.get("answer"))
                return Reply("ok", body=outcome)
            case "stop_run":
                session.stop_soon(str(body["run_id"]))
                return OK
            case "flush":
                return await self._flush(session, store=bool(body.get("store")))
            case "forget":
                return Reply("ok", body={"forgotten": self.table.forget(session.id)})
        return Reply("error", error_type="invalid_message", message="unknown command")

    async def _flush(self, session: Session, *, store: bool) -> Reply:
        """Save what the session has pending; with `store`, create its
        conversation in the store first if it is not there yet."""
        try:
            if store:
                stored = await self.service.ensure_stored(session.id, session.owner)
                return Reply("ok", body={"stored": stored})
            await self.table.flush(session)
        except StoreError as exc:
            return Reply("error", error_type="store_error", message=str(exc))
        return OK

    def _attached(self, session: Session, command: Command) -> Reply:
        """Register the watcher and answer with the frames after `after`.
        Nothing awaits between the two: the reply is queued before any
        frame published after it."""
        session.watchers[command.sender] = self._watch_deadline()
        session.relay = self.bus.publish
        after = int(command.body.get("after", 0))
        return Reply(
            "ok",
            body={
                "last_seq": session.notify.last_seq,
                "run_id": session.run_id,
                "frames": session.frames_after(after),
            },
        )

    def _watching(self, command: Command) -> Reply:
        """A watcher's report: the sessions it shows. The reply names those
        not here now (it re-attaches to their new owner) and the last seq of
        the others (a frame lost on the way shows as a shortfall)."""
        gone = []
        last: dict[str, int] = {}
        deadline = self._watch_deadline()
        for session_id in command.body.get("sessions", []):
            session = self.table.by_id.get(session_id)
            if session is None or not self.bus.holds(session_id):
                gone.append(session_id)
            elif command.sender in session.watchers:
                session.watchers[command.sender] = deadline
                last[session_id] = session.notify.last_seq
            else:
                gone.append(session_id)  # forgotten here: attach again
        return Reply("ok", body={"gone": gone, "last": last})

    def _watch_deadline(self) -> float:
        return time.monotonic() + self.period_s * WATCH_FACTOR + 1.0


def _message(command: Command) -> ClientMessage:
    try:
        return client_message_adapter.validate_python(command.body["message"])
    except (KeyError, ValidationError) as exc:
        raise ProtocolError(f"a forwarded message is not valid: {exc}") from exc


def wire(message: ClientMessage) -> dict[str, Any]:
    """A client message as the JSON a client would have sent (for the owner)."""
    return {"type": message.type, **message.model_dump(mode="json", exclude_unset=True)}


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
