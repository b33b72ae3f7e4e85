"""`Cluster`: one `ChatService` among several, coordinated by the `Bus`.

The instance that holds a conversation's lease owns it: its `Session` (the
history, the run, the seq counter) lives there and nowhere else. Any other
instance a client reaches serves it from a `Mirror` and forwards what the
client sends to the owner (`Command`s); the owner answers them here
(`command`). Who owns what:

- a conversation opened on an instance with nobody owning it is taken there
  (`take`: the lease, then the session from the store and its live runs);
- a new conversation is owned where it starts;
- an owner that dies leaves its leases to expire; the `sweep` on every
  instance looks for conversations with live runs (waiting for the user,
  parked by a shutdown, or cut off mid-phase) and nobody owning them, and
  takes them: a waiting run waits again, a cut-off one is reported
  interrupted (`ChatService.recover_session`);
- an instance that cannot renew a lease lets the session go at once (`lost`):
  its run is cancelled unsaved and its clients are closed with 1012, to
  reconnect wherever the conversation is now.

Mirrors keep their owner informed (`watching`, every third of a lease) and
re-attach to whoever owns the conversation after a change, from their last
seq, so their clients see every frame once, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, cast, get_args

from pydantic import ValidationError

from backend.bus.base import (
    FORBIDDEN,
    NOT_HERE,
    OK,
    Bus,
    BusError,
    Command,
    CommandKind,
    InstanceGone,
    Reply,
)
from backend.chat.mirror import Mirror
from backend.chat.outcome import run_outcome
from backend.chat.session import Session
from backend.errors import Busy, NoSuchConversation, ProtocolError, Unavailable
from backend.protocol import ClientMessage, ErrorType, client_message_adapter
from backend.store.base import FileRecord, StoreError

if TYPE_CHECKING:
    from backend.chat.service import ChatService

log = logging.getLogger(__name__)

UNREACHABLE = (
    "the server instance that holds this conversation cannot be reached; "
    "try again in a few seconds"
)
GONE = "this conversation no longer exists (it was deleted); start a new one"
ATTEMPTS = 3
"""Tries to find a conversation's owner (it may move while we ask)."""
WATCH_FACTOR = 3.0
"""A watcher not heard from for this many renewal periods is dropped."""

Target = Session | Mirror
"""What a connection is attached to: the session itself, or its mirror."""


class Absent(enum.Enum):
    MISSING = "no such conversation"
    ELSEWHERE = "another instance owns it"


MISSING = Absent.MISSING
ELSEWHERE = Absent.ELSEWHERE


class Cluster:
    def __init__(self, service: ChatService, bus: Bus) -> None:
        self.service = service
        self.bus = bus
        self.mirrors: dict[str, Mirror] = {}
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._resyncing: set[str] = set()
        self._tasks: asyncio.TaskGroup | None = None
        bus.on_command = self.command
        bus.on_frame = self.frame
        bus.on_lost = self.lost

    @property
    def me(self) -> str:
        return self.bus.instance_id

    @property
    def period_s(self) -> float:
        """How often watchers report and orphans are looked for."""
        return self.bus.lease_ttl_s / 3

    def start(self, tasks: asyncio.TaskGroup) -> list[asyncio.Task[None]]:
        """The cluster's loops, in the service's TaskGroup."""
        self._tasks = tasks
        if not self.bus.clustered:
            return []
        return [tasks.create_task(self._every_period())]

    @contextlib.asynccontextmanager
    async def _lock(self, session_id: str) -> AsyncIterator[None]:
        """One taker or attacher per conversation at a time (the lock is
        dropped when nobody holds or waits for it)."""
        lock, users = self._locks.get(session_id, (asyncio.Lock(), 0))
        self._locks[session_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[session_id]
            if users == 1:
                del self._locks[session_id]
            else:
                self._locks[session_id] = (lock, users - 1)

    # ------------------------------------------------------------ opening

    async def open(self, session_id: str | None, user: str) -> tuple[Target, bool]:
        """The conversation to attach a client to: the local session (owned
        here, or taken now), a mirror of another instance's, or a new one."""
        try:
            if session_id:
                found = await self._find(session_id, user)
                if found is not None:
                    found.touch()
                    return found, True
            return await self._new(user), False
        except BusError as exc:
            log.error("cannot open a session: %s", exc)
            raise Unavailable(
                "the servers cannot coordinate right now; try again in a few seconds"
            ) from exc

    async def _find(self, session_id: str, user: str) -> Target | None:
        for _ in range(ATTEMPTS):
            local = self.service.table.by_id.get(session_id)
            if local is not None:
                return local if local.owner == user else None
            mirror = self.mirrors.get(session_id)
            if mirror is not None and mirror.synced:
                return mirror if mirror.owner == user else None
            holder = await self.bus.owner_of(session_id)
            if holder is None or holder == self.me:
                taken = await self.take(session_id)
                if taken is MISSING:
                    return None
                if isinstance(taken, Session):
                    return taken if taken.owner == user else None
                continue  # another instance took it meanwhile
            reply = await self._attach(session_id, user, holder)
            if isinstance(reply, Mirror):
                return reply
            if reply.status == "forbidden":  # another user's: a new one
                return None
        raise Unavailable(UNREACHABLE)

    async def _new(self, user: str) -> Session:
        session_id = uuid.uuid4().hex
        if not await self.bus.claim(session_id):  # a collision of 128 bits
            raise Unavailable("could not start a conversation; try again")
        return self.service.table.new(session_id, user)

    async def take(self, session_id: str) -> Session | Absent:
        """Own `session_id` here if nobody does: its lease, the session from
        the store, and its live runs continued. `ELSEWHERE` if another
        instance holds it, `MISSING` if there is no such conversation."""
        async with self._lock(session_id):
            table = self.service.table
            if session_id in table.by_id:
                return table.by_id[session_id]
            if not self.bus.holds(session_id) and not await self.bus.claim(session_id):
                return ELSEWHERE
            try:
                session = await table.load(session_id)
                if session is not None:
                    await self.service.recover_session(session)
            except BaseException:  # not half taken: neither served nor leased
                loaded = table.by_id.get(session_id)
                if loaded is not None:
                    table.let_go(loaded)
                self.bus.release(session_id)
                raise
            if session is None:
                self.bus.release(session_id)
                return MISSING
            return session

    # ------------------------------------------------------------ mirrors

    async def _attach(self, session_id: str, user: str, holder: str) -> Mirror | Reply:
        """A mirror of `holder`'s session, attached from the start of its
        replay window; or why not (`not_here`, `forbidden`)."""
        async with self._lock(session_id):
            existing = self.mirrors.get(session_id)
            if existing is not None and existing.synced:
                return existing if existing.owner == user else FORBIDDEN
            self._make_room()
            mirror = Mirror(
                session_id,
                owner=user,
                max_frame_bytes=self.service.settings.frame_log_bytes,
            )
            self.mirrors[session_id] = mirror
            try:
                await self.bus.watch(session_id)
                reply = await self.bus.request(
                    holder, Command("attach", session_id, user, {"after": 0})
                )
            except InstanceGone as exc:
                log.warning("session %s: %s; its lease runs out first", session_id, exc)
                await self._outlive(session_id)
                reply = NOT_HERE
            except BusError as exc:
                log.warning("cannot attach to %s on %s: %s", session_id, holder, exc)
                reply = NOT_HERE
            if reply.status != "ok":
                self._drop_mirror(mirror)
                return reply
            mirror.sync(holder, reply.body)
            return mirror

    def _make_room(self) -> None:
        """Mirrors count towards `max_sessions` with the sessions: each may
        hold a replay window. Idle ones go first; if none is idle, refuse."""
        limit = self.service.settings.max_sessions
        if len(self.mirrors) + len(self.service.table.by_id) < limit:
            return
        idle = sorted(
            (m for m in self.mirrors.values() if m.idle), key=lambda m: m.last_active
        )
        if not idle:
            raise Busy(
                f"the server shows {len(self.mirrors)} conversations held by "
                "other instances and holds the rest of its limit; try again later"
            )
        self._drop_mirror(idle[0])

    def _drop_mirror(self, mirror: Mirror) -> None:
        if self.mirrors.get(mirror.id) is mirror:
            del self.mirrors[mirror.id]
            if self._tasks is not None:
                self._tasks.create_task(self._unwatch(mirror.id))

    async def _unwatch(self, session_id: str) -> None:
        """Stop listening for its frames, unless a mirror of it was made
        again meanwhile (its subscription is the same one)."""
        if session_id not in self.mirrors:
            await self.bus.unwatch(session_id)

    def frame(self, session_id: str, prev: int, seq: int, text: str) -> None:
        """A frame an owner published (the bus's `on_frame`)."""
        mirror = self.mirrors.get(session_id)
        if mirror is not None and not mirror.receive(prev, seq, text):
            self._resync_soon(mirror)

    def _resync_soon(self, mirror: Mirror) -> None:
        if mirror.id in self._resyncing or self._tasks is None:
            return
        self._resyncing.add(mirror.id)
        self._tasks.create_task(self._resync(mirror))

    async def _resync(self, mirror: Mirror) -> None:
        """Attach again, from our last frame, to whoever owns it now."""
        try:
            holder = await self.bus.owner_of(mirror.id)
            if holder is None:
                mirror.holder = None
                return
            reply = await self.bus.request(
                holder,
                Command("attach", mirror.id, mirror.owner, {"after": mirror.last_seq}),
            )
            if reply.status == "ok":
                mirror.sync(holder, reply.body)
            else:
                mirror.holder = None
        except BusError as exc:
            log.warning("mirror %s: cannot resync: %s", mirror.id, exc)
            mirror.holder = None
        finally:
            self._resyncing.discard(mirror.id)

    async def _outlive(self, session_id: str) -> None:
        """Wait out the lease of an instance that is gone (at most one TTL):
        then the conversation is free to take."""
        left = await self.bus.lease_left(session_id)
        await asyncio.sleep(min(left, self.bus.lease_ttl_s) + 0.01)

    # ------------------------------------------------------------ forwarding

    async def forward(
        self, mirror: Mirror, kind: CommandKind, body: dict[str, Any]
    ) -> Reply:
        """A command to the mirror's owner, wherever it is now; if nobody
        owns the conversation, this instance takes it."""
        mirror.touch()
        for _ in range(ATTEMPTS):
            try:
                holder = mirror.holder or await self.bus.owner_of(mirror.id)
                if holder is None:
                    taken = await self.take(mirror.id)
                    if taken is MISSING:
                        return Reply(
                            "error", error_type="invalid_message", message=GONE
                        )
                    if not isinstance(taken, Session):
                        continue
                    holder = self.me
                    self._resync_soon(mirror)  # watch the session taken here
                reply = await self.bus.request(
                    holder, Command(kind, mirror.id, mirror.owner, body)
                )
            except BusError as exc:
                log.warning("session %s: %s", mirror.id, exc)
                mirror.holder = None
                if isinstance(exc, InstanceGone):
                    await self._outlive(mirror.id)
                continue
            if reply.status == "not_here":
                mirror.holder = None
                continue
            if holder != mirror.holder:
                mirror.holder = holder
                self._resync_soon(mirror)
            return reply
        return Reply("error", error_type="unavailable", message=UNREACHABLE)

    async def request(
        self, session_id: str, user: str, kind: CommandKind, body: dict[str, Any]
    ) -> Reply:
        """A command about a conversation not in memory here: to its owner,
        or `not_here` when nobody owns it."""
        for _ in range(ATTEMPTS):
            try:
                holder = await self.bus.owner_of(session_id)
                if holder is None:
                    return NOT_HERE
                reply = await self.bus.request(
                    holder, Command(kind, session_id, user, body)
                )
            except BusError as exc:
                log.warning("session %s: %s", session_id, exc)
                if isinstance(exc, InstanceGone):
                    await self._outlive(session_id)
                continue
            if reply.status != "not_here":
                return reply
        return Reply("error", error_type="unavailable", message=UNREACHABLE)

    # ------------------------------------------------------------ the owner's side

    async def command(self, command: Command) -> Reply:
        """A command from an instance (the bus's `on_command`)."""
        if command.kind == "watching":
            return self._watching(command)
        session_id = command.session_id
        if session_id in self._locks and self.bus.holds(session_id):
            async with self._lock(session_id):  # being taken here: wait for it
                pass
        session = self.service.table.by_id.get(session_id)
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
        match command.kind:
            case "attach":
                return self._attached(session, command)
            case "handle":
                await self.service.handle(session, _message(command))
                return OK
            case "dispatch":
                try:
                    body = await self.service.dispatch_here(session, _message(command))
                except ProtocolError as exc:
                    return Reply("error", error_type=exc.error_type, message=str(exc))
                return Reply("ok", body=body)
            case "report":
                session.notify.error(
                    str(command.body["message"]), command.body["error_type"]
                )
                return OK
            case "outcome":
                return Reply(
                    "ok",
                    body=run_outcome(
                        session, str(command.body["run_id"]), command.body.get("answer")
                    ),
                )
            case "stop_run":
                self.service.stop_run(session, str(command.body["run_id"]))
                return OK
            case "flush":
                try:
                    if command.body.get("store"):
                        stored = await self.service.ensure_stored(
                            session.id, session.owner
                        )
                        return Reply("ok", body={"stored": stored})
                    await self.service.flush(session)
                except StoreError as exc:
                    return Reply("error", error_type="store_error", message=str(exc))
                return OK
            case "forget":
                return Reply("ok", body={"forgotten": self.service.forget(session.id)})
        return Reply("error", error_type="invalid_message", message="unknown command")

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
                "run_id": session.run.run_id if session.run is not None else None,
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
            session = self.service.table.by_id.get(session_id)
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

    # ------------------------------------------------------------ leases lost

    def lost(self, session_ids: Sequence[str]) -> None:
        """Leases that could not be kept: another instance may own these
        conversations now, so nothing more is written or sent from here."""
        for session_id in session_ids:
            session = self.service.table.by_id.get(session_id)
            if session is None:
                continue
            log.error("session %s: lease lost; letting it go unsaved", session_id)
            self.service.table.let_go(session)

    # ------------------------------------------------------------ the loop

    async def _every_period(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            for step in (self.adopt_orphans, self._report_watching):
                try:
                    await step()
                except (BusError, StoreError) as exc:
                    log.warning("cluster: %s failed: %s", step.__name__, exc)
                except Exception:  # keep the loop: the next period tries again
                    log.exception("cluster: %s failed", step.__name__)
            self._expire_watchers()

    async def adopt_orphans(self) -> list[str]:
        """Take the conversations with live runs that nobody owns (their
        owner died or shut down); the ids taken."""
        store = self.service.store
        if store is None:
            return []
        table = self.service.table
        ids = [i for i in await store.live_conversations() if i not in table.by_id]
        taken = []
        for session_id, holder in zip(ids, await self.bus.owners(ids), strict=True):
            if holder is None and isinstance(await self.take(session_id), Session):
                log.info("cluster: took over conversation %s", session_id)
                taken.append(session_id)
        return taken

    async def _report_watching(self) -> None:
        """Tell each owner which of its sessions we still show; re-attach
        those it no longer has, and drop mirrors nobody looks at."""
        cutoff = time.monotonic() - self.bus.lease_ttl_s
        by_holder: dict[str | None, list[Mirror]] = defaultdict(list)
        for mirror in list(self.mirrors.values()):
            if mirror.idle and mirror.last_active < cutoff:
                self._drop_mirror(mirror)
            else:
                by_holder[mirror.holder].append(mirror)
        for holder, mirrors in by_holder.items():
            lost = mirrors
            if holder is not None:
                command = Command(
                    "watching", "", body={"sessions": [m.id for m in mirrors]}
                )
                try:
                    reply = await self.bus.request(holder, command)
                except BusError:
                    pass
                else:
                    gone = set(reply.body.get("gone", []))
                    last = reply.body.get("last", {})
                    lost = [
                        m
                        for m in mirrors
                        if m.id in gone or m.last_seq < int(last.get(m.id, 0))
                    ]
            for mirror in lost:
                mirror.holder = None
                self._resync_soon(mirror)

    def _expire_watchers(self) -> None:
        now = time.monotonic()
        for session in self.service.table.by_id.values():
            for instance, until in list(session.watchers.items()):
                if until < now:
                    del session.watchers[instance]


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
    error = ProtocolError(reply.message or "refused")
    error.error_type = reply.error_type or "invalid_message"
    raise error
