"""`Ownership`: taking a conversation to own it here, and losing one.

A conversation's lease (`Bus`) says which instance *should* own it; its
epoch in the store says which one *may* write it. Taking a conversation
(`take`) claims the lease (only if nobody holds it), then loads the
conversation (`SessionTable.load`), which raises its epoch in the same
transaction: whoever held it before can write nothing more (the store's
fence). Its live runs then go on here (`Recovers`: `Recovery`). A take that
fails half way leaves nothing behind: neither served nor leased.

- a conversation opened where nobody owns it is taken there (by `Cluster`);
- conversations that nobody owns (their owner died or shut down) are taken
  by whichever instance looks first (`adopt_orphans`) if they have live
  runs or that instance has clients following them; a parked one (its run
  waiting for its user, the conversation let go cleanly) is taken when that
  user opens it;
- a lease that could not be kept (`lost`), like a write the fence refused,
  lets the conversation go at once (`SessionTable.let_go`): its run is
  cancelled unsaved and its clients are closed with 1012, to reconnect
  wherever it is owned now.

One taker or attacher per conversation at a time (`lock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Protocol

from backend.bus.base import Bus
from backend.chat.session import Session
from backend.chat.sessions import SessionTable
from backend.store.base import Store

log = logging.getLogger(__name__)


class Absent(enum.Enum):
    MISSING = "no such conversation"
    ELSEWHERE = "another instance owns it"


MISSING = Absent.MISSING
ELSEWHERE = Absent.ELSEWHERE


class Recovers(Protocol):
    """What a conversation's live runs become once it is taken (`Recovery`)."""

    async def recover_session(self, session: Session) -> None: ...


class Ownership:
    def __init__(
        self, *, bus: Bus, table: SessionTable, store: Store | None, recovery: Recovers
    ) -> None:
        self.bus = bus
        self.table = table
        self.store = store
        self.recovery = recovery
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def lock(self, session_id: str) -> AsyncIterator[None]:
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

    async def settled(self, session_id: str) -> None:
        """Return once a take of `session_id` in progress here is done."""
        if session_id in self._locks and self.bus.holds(session_id):
            async with self.lock(session_id):
                pass

    async def take(
        self, session_id: str, *, new_for: str | None = None, origin: str = "unknown"
    ) -> Session | Absent:
        """Own `session_id` here if nobody does: its lease, the session from
        the store, and its live runs continued. `ELSEWHERE` if another
        instance holds it, `MISSING` if there is no such conversation —
        unless `new_for`: then a new conversation of that user by this id,
        its lease kept (a lease let go is freed a moment later, so claiming
        it again at once could fail), tagged with `origin`."""
        async with self.lock(session_id):
            table = self.table
            if session_id in table.by_id:
                return table.by_id[session_id]
            if not self.bus.holds(session_id) and not await self.bus.claim(session_id):
                return ELSEWHERE
            try:
                session = await table.load(session_id)
                if session is not None:
                    await self.recovery.recover_session(session)
            except BaseException:  # not half taken: neither served nor leased
                loaded = table.by_id.get(session_id)
                if loaded is not None:
                    table.let_go(loaded)
                self.bus.release(session_id)
                raise
            if session is None and new_for is not None:
                await table.room.make(new_for)
                return table.new(session_id, new_for, origin)
            if session is None:
                self.bus.release(session_id)
                return MISSING
            log.info("cluster: took over conversation %s", session_id)
            return session

    async def adopt_orphans(self, watched: Collection[str] = ()) -> list[str]:
        """Take the conversations that nobody owns (their owner died or shut
        down) with live runs, and those in `watched` (someone follows them
        here); the ids taken. (A parked run, waiting in a conversation let go
        cleanly, is taken when its user opens the conversation.)"""
        if self.store is None:
            return []
        table = self.table
        live = await self.store.live_conversations(parked=False)
        ids = [i for i in dict.fromkeys([*live, *watched]) if i not in table.by_id]
        taken = []
        for session_id, holder in zip(ids, await self.bus.owners(ids), strict=True):
            if holder is None and isinstance(await self.take(session_id), Session):
                taken.append(session_id)
        return taken

    def lost(self, session_ids: Sequence[str]) -> None:
        """Leases that could not be kept (the bus's `on_lost`): another
        instance may own these conversations now, so nothing more is written
        or sent from here."""
        for session_id in session_ids:
            session = self.table.by_id.get(session_id)
            if session is None:
                continue
            log.error("session %s: lease lost; letting it go unsaved", session_id)
            self.table.let_go(session)
