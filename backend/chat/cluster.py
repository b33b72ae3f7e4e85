"""`Cluster`: one `ChatService` among several, coordinated by the `Bus`.

The instance that holds a conversation's lease owns it: its `Session` (the
history, the run, the seq counter) lives there and nowhere else. Any other
instance a client reaches serves it from a `Mirror` and forwards what the
client sends to the owner as `Command`s (`forward`; answered there by
`Commands`). Opening a conversation (`open`):

- one owned here, or that nobody owns, is served here (the latter taken
  first: `Ownership.take`, its live runs continued);
- one another instance owns is shown through a mirror, attached to the
  owner from the start of its replay window;
- a new conversation is owned where it starts.

Mirrors keep their owner informed (`watching`, every third of a lease) and
re-attach to whoever owns the conversation after a change, from their last
seq, so their clients see every frame once, in order. The same loop takes
the conversations with live runs whose owner died (`Ownership.adopt_orphans`)
and forgets watchers that stopped reporting.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import defaultdict
from typing import Any

from backend.aio import stop_if_cancelled
from backend.bus.base import (
    FORBIDDEN,
    NOT_HERE,
    Bus,
    BusError,
    Command,
    InstanceGone,
    Reply,
)
from backend.bus.messages import (
    Attach,
    Attached,
    CommandBody,
    CommandKind,
    Watched,
    Watching,
    command_body,
)
from backend.chat.control_spans import control_span
from backend.chat.mirror import Mirror
from backend.chat.ownership import MISSING, Absent, Ownership
from backend.chat.session import Session
from backend.chat.sessions import SessionTable
from backend.chat.target import Target
from backend.errors import Busy, NoSuchConversation, Unavailable
from backend.settings import Settings
from backend.store.base import StoreError
from backend.telemetry.tracing import NO_TRACING, Tracing, current_traceparent

log = logging.getLogger(__name__)

UNREACHABLE = (
    "the server instance that holds this conversation cannot be reached; "
    "try again in a few seconds"
)
GONE = "this conversation no longer exists (it was deleted); start a new one"
ATTEMPTS = 3
"""Tries to find a conversation's owner (it may move while we ask)."""


class Others:
    """What `Cluster._find` finds of another user's conversation."""


OTHERS = Others()


class Cluster:
    def __init__(
        self,
        *,
        bus: Bus,
        table: SessionTable,
        settings: Settings,
        ownership: Ownership,
        tracing: Tracing = NO_TRACING,
    ) -> None:
        self.bus = bus
        self.tracing = tracing
        self.table = table
        self.settings = settings
        self.ownership = ownership
        self.mirrors: dict[str, Mirror] = {}
        self._resyncing: set[str] = set()
        self._tasks: asyncio.TaskGroup | None = None

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

    def stop(self) -> None:
        """The service's TaskGroup is closing: nothing more is started in it."""
        self._tasks = None

    # ------------------------------------------------------------ opening

    async def open(
        self,
        session_id: str | None,
        user: str,
        *,
        create: bool = True,
        named: bool = False,
        origin: str = "unknown",
    ) -> tuple[Target, bool]:
        """The conversation to attach a client to: the local session (owned
        here, or taken now), a mirror of another instance's, or a new one
        (`create`, tagged with `origin`; else `NoSuchConversation`), with
        the id `session_id` if `named` (another user's is then
        `NoSuchConversation`)."""
        new_for = (user, origin) if named and create else None
        try:
            found = await self._find(session_id, user, new_for) if session_id else None
            if found is not None and not isinstance(found, Others):
                found.touch()
                return found, True  # one `named` made counts as found
            if not create or named:
                raise NoSuchConversation(f"no conversation {session_id!r}")
            return await self._new(user, origin), False
        except BusError as exc:
            log.error("cannot open a session: %s", exc)
            raise Unavailable(
                "the servers cannot coordinate right now; try again in a few seconds"
            ) from exc

    async def _find(
        self, session_id: str, user: str, new_for: tuple[str, str] | None = None
    ) -> Target | Others | None:
        """The user's conversation `session_id`; `OTHERS` if it is another
        user's; None if no one has it (`new_for`: a new one of that user
        and origin by this id, made where it is looked for)."""
        for _ in range(ATTEMPTS):
            local = self.table.by_id.get(session_id)
            if local is not None:
                return local if local.owner == user else OTHERS
            mirror = self.mirrors.get(session_id)
            if mirror is not None and mirror.synced:
                return mirror if mirror.owner == user else OTHERS
            holder = await self.bus.owner_of(session_id)
            if holder is None or holder == self.me:
                taken = await self._take(session_id, new_for)
                if taken is MISSING:
                    return None
                if isinstance(taken, Session):
                    return taken if taken.owner == user else OTHERS
                continue  # another instance took it meanwhile
            reply = await self._attach(session_id, user, holder)
            if isinstance(reply, Mirror):
                return reply
            if reply.status == "forbidden":
                return OTHERS
        raise Unavailable(UNREACHABLE)

    async def _take(
        self, session_id: str, new_for: tuple[str, str] | None
    ) -> Session | Absent:
        if new_for is None:
            return await self.ownership.take(session_id)
        user, origin = new_for
        return await self.ownership.take(session_id, new_for=user, origin=origin)

    async def _new(self, user: str, origin: str) -> Session:
        await self.table.room.make(user)
        session_id = uuid.uuid4().hex
        if not await self.bus.claim(session_id):  # a collision of 128 bits
            raise Unavailable("could not start a conversation; try again")
        return self.table.new(session_id, user, origin)

    # ------------------------------------------------------------ mirrors

    async def _attach(self, session_id: str, user: str, holder: str) -> Mirror | Reply:
        """A mirror of `holder`'s session, attached from the start of its
        replay window; or why not (`not_here`, `forbidden`)."""
        async with self.ownership.lock(session_id):
            existing = self.mirrors.get(session_id)
            if existing is not None and existing.synced:
                return existing if existing.owner == user else FORBIDDEN
            self._make_room()
            mirror = Mirror(
                session_id,
                owner=user,
                max_frame_bytes=self.settings.frame_log_bytes,
                link=self,
            )
            self.mirrors[session_id] = mirror
            try:
                await self.bus.watch(session_id)
                reply = await self.bus.request(
                    holder, Command(session_id, Attach(after=0), user)
                )
            except InstanceGone as exc:
                log.warning("session %s: %s; its lease runs out first", session_id, exc)
                await self._outlive(session_id, holder)
                reply = NOT_HERE
            except BusError as exc:
                log.warning("cannot attach to %s on %s: %s", session_id, holder, exc)
                reply = NOT_HERE
            attached = reply.body_as(Attached)
            if reply.status != "ok" or attached is None:
                self._drop_mirror(mirror)
                return reply
            mirror.sync(holder, attached)
            return mirror

    def _make_room(self) -> None:
        """Mirrors count towards `max_sessions` with the sessions: each may
        hold a replay window. Idle ones go first; if none is idle, refuse."""
        limit = self.settings.max_sessions
        if len(self.mirrors) + len(self.table.by_id) < limit:
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
            after = Attach(after=mirror.last_seq)
            reply = await self.bus.request(
                holder, Command(mirror.id, after, mirror.owner)
            )
            attached = reply.body_as(Attached)
            if reply.status == "ok" and attached is not None:
                mirror.sync(holder, attached)
            else:
                mirror.holder = None
        except BusError as exc:
            log.warning("mirror %s: cannot resync: %s", mirror.id, exc)
            mirror.holder = None
        finally:
            self._resyncing.discard(mirror.id)

    async def _outlive(self, session_id: str, gone: str) -> None:
        """Wait out the lease of instance `gone` (at most one TTL): then the
        conversation is free to take. No wait once another instance holds
        it (it took the conversation over) or nobody does."""
        if await self.bus.owner_of(session_id) != gone:
            return
        left = await self.bus.lease_left(session_id)
        await asyncio.sleep(min(left, self.bus.lease_ttl_s) + 0.01)

    # ------------------------------------------------------------ forwarding

    async def forward(self, mirror: Mirror, body: CommandBody) -> Reply:
        """A command to the mirror's owner, wherever it is now; if nobody
        owns the conversation, this instance takes it. A person's control
        of the run is traced here, and its trace goes with it."""
        mirror.touch()
        with control_span(self.tracing, body, session_id=mirror.id):
            return await self._forward(mirror, body)

    async def _forward(self, mirror: Mirror, body: CommandBody) -> Reply:
        for _ in range(ATTEMPTS):
            holder: str | None = None
            try:
                holder = mirror.holder or await self.bus.owner_of(mirror.id)
                if holder is None:
                    taken = await self.ownership.take(mirror.id)
                    if taken is MISSING:
                        return Reply(
                            "error", error_type="invalid_message", message=GONE
                        )
                    if not isinstance(taken, Session):
                        continue
                    holder = self.me
                    self._resync_soon(mirror)  # watch the session taken here
                command = Command(
                    mirror.id, body, mirror.owner, trace=current_traceparent()
                )
                reply = await self.bus.request(holder, command)
            except BusError as exc:
                log.warning("session %s: %s", mirror.id, exc)
                mirror.holder = None
                if isinstance(exc, InstanceGone) and holder is not None:
                    await self._outlive(mirror.id, holder)
                continue
            if reply.status == "not_here" or reply.error_type == "moved":
                mirror.holder = None  # stale or gone: look the owner up again
                continue
            if holder != mirror.holder:
                mirror.holder = holder
                self._resync_soon(mirror)
            return reply
        return Reply("error", error_type="unavailable", message=UNREACHABLE)

    def forward_soon(self, mirror: Mirror, body: CommandBody) -> None:
        """`forward`, as a task in the service's TaskGroup (for a caller
        that cannot wait: one being cancelled)."""
        if self._tasks is not None:
            self._tasks.create_task(self.forward(mirror, body))

    async def request(
        self, session_id: str, user: str, kind: CommandKind, fields: dict[str, Any]
    ) -> Reply:
        """`ask`, with the command's body as its `kind` and JSON fields."""
        return await self.ask(session_id, user, command_body(kind, fields))

    async def ask(self, session_id: str, user: str, body: CommandBody) -> Reply:
        """A command about a conversation not in memory here: to its owner,
        or `not_here` when nobody owns it."""
        with control_span(self.tracing, body, session_id=session_id):
            return await self._ask(session_id, user, body)

    async def _ask(self, session_id: str, user: str, body: CommandBody) -> Reply:
        for _ in range(ATTEMPTS):
            try:
                holder = await self.bus.owner_of(session_id)
                if holder is None:
                    return NOT_HERE
                command = Command(session_id, body, user, trace=current_traceparent())
                reply = await self.bus.request(holder, command)
            except BusError as exc:
                log.warning("session %s: %s", session_id, exc)
                if isinstance(exc, InstanceGone) and holder is not None:
                    await self._outlive(session_id, holder)
                continue
            if reply.status != "not_here" and reply.error_type != "moved":
                return reply
        return Reply("error", error_type="unavailable", message=UNREACHABLE)

    # ------------------------------------------------------------ the loop

    async def _adopt(self) -> None:
        """Take the orphaned conversations that must go on: working runs, and
        those clients here follow (through a mirror whose owner is gone)."""
        watched = [i for i, mirror in self.mirrors.items() if not mirror.idle]
        await self.ownership.adopt_orphans(watched)

    async def _every_period(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            for step in (self._adopt, self._report_watching):
                try:
                    await step()
                except (BusError, StoreError) as exc:
                    stop_if_cancelled()
                    log.warning("cluster: %s failed: %s", step.__name__, exc)
                except Exception:  # keep the loop: the next period tries again
                    stop_if_cancelled()
                    log.exception("cluster: %s failed", step.__name__)
            self._expire_watchers()

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
                command = Command("", Watching(sessions=[m.id for m in mirrors]))
                try:
                    reply = await self.bus.request(holder, command)
                except BusError:
                    pass
                else:
                    watched = reply.body_as(Watched) or Watched()
                    gone, last = set(watched.gone), watched.last
                    lost = [
                        m
                        for m in mirrors
                        if m.id in gone or m.last_seq < last.get(m.id, 0)
                    ]
            for mirror in lost:
                mirror.holder = None
                self._resync_soon(mirror)

    def _expire_watchers(self) -> None:
        now = time.monotonic()
        for session in self.table.by_id.values():
            for instance, until in list(session.watchers.items()):
                if until < now:
                    del session.watchers[instance]
