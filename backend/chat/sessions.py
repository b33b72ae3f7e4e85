"""`SessionTable`: the sessions in memory, loaded from and saved to the store.

A session is looked up by id in memory, else loaded from the `Store`
(history, the replay window, `last_seq`), else made new. Each session's
`Journal` reports what it holds unsaved; `flush` writes it as one batch, and
`write_behind` (a task in `ChatService`'s TaskGroup) flushes sessions with
frames sent outside runs and evicts those idle past the grace period. Memory
stays bounded: at most `max_sessions`, the longest idle evicted first (an
evicted session keeps nothing unsaved, and its executor state goes with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable

from backend.chat.journal import Journal
from backend.chat.session import Session
from backend.errors import Busy
from backend.files.shelf import info
from backend.history import History
from backend.settings import Settings
from backend.store.base import Batch, ConversationRecord, Store, StoreError

log = logging.getLogger(__name__)


class SessionTable:
    def __init__(
        self,
        settings: Settings,
        store: Store | None,
        *,
        forget_session: Callable[[str], None],
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.store = store
        self._forget_session = forget_session
        self._clock = clock
        self.by_id: dict[str, Session] = {}
        self._dirty: set[Session] = set()
        self._wake = asyncio.Event()
        self._swept = asyncio.Condition()

    async def open(self, session_id: str | None, *, owner: str) -> tuple[Session, bool]:
        """The session to attach to: the named one if it exists (in memory or
        in the store) and belongs to `owner`, else a new one."""
        if session_id:
            session = self.by_id.get(session_id) or await self.load(session_id)
            if session is not None and session.owner == owner:
                session.touch()
                return session, True
        return self.new(uuid.uuid4().hex, owner), False

    def new(self, session_id: str, owner: str) -> Session:
        """A new conversation of `owner` in memory (stored with its first
        message)."""
        self._make_room()
        now = self._clock()
        record = ConversationRecord(
            id=session_id, owner=owner, created_at=now, updated_at=now
        )
        session = Session(
            session_id,
            owner=owner,
            max_frame_bytes=self.settings.frame_log_bytes,
            journal=self._journal(record, stored=False) if self.store else None,
        )
        self.by_id[session.id] = session
        return session

    def _journal(
        self, record: ConversationRecord, *, stored: bool, saved: int = 0
    ) -> Journal:
        journal = Journal(record, stored=stored, saved_messages=saved)
        session_id = record.id

        def changed() -> None:
            session = self.by_id.get(session_id)
            if session is not None and session.journal is journal:
                self.mark(session)

        journal.on_change = changed
        return journal

    def mark(self, session: Session) -> None:
        """The session has something unsaved: the write-behind task takes it,
        unless a run is active (the run's own checkpoints save what it sends;
        the service marks the session again when the run ends)."""
        if session.run is None and session not in self._dirty:
            self._dirty.add(session)
            self._wake.set()

    async def load(self, session_id: str) -> Session | None:
        """A stored conversation, back in memory (None: no such conversation)."""
        if self.store is None:
            return None
        record = await self.store.conversation(session_id)
        if record is None:
            return None
        messages = await self.store.messages(session_id)
        frames = await self.store.frames(
            session_id, max_bytes=self.settings.frame_log_bytes
        )
        last_seq = await self.store.last_seq(session_id)
        files = await self.store.files(session_id)
        if session_id in self.by_id:  # loaded meanwhile by another caller
            return self.by_id[session_id]
        self._make_room()
        session = Session(
            session_id,
            owner=record.owner,
            max_frame_bytes=self.settings.frame_log_bytes,
            history=History(messages),
            last_seq=last_seq,
            journal=self._journal(record, stored=True, saved=len(messages)),
        )
        session.files = [info(record) for record in files]
        for frame in frames:
            session.outbox.restore(frame.seq, frame.text)
        assert session.journal is not None
        session.journal.kept_from = frames[0].seq if frames else 0
        self.by_id[session_id] = session
        return session

    def _make_room(self) -> None:
        """Keep at most `max_sessions` in memory: the longest idle go first
        (they are in the store); if every one is busy, refuse."""
        excess = len(self.by_id) + 1 - self.settings.max_sessions
        if excess <= 0:
            return
        idle = sorted(
            (s for s in self.by_id.values() if s.idle and self._evictable(s)),
            key=lambda s: s.last_active,
        )
        for session in idle[:excess]:
            self._evict(session)
        if len(self.by_id) >= self.settings.max_sessions:
            raise Busy(
                f"the server holds {len(self.by_id)} active sessions, its "
                "limit; try again later"
            )

    def _evictable(self, session: Session) -> bool:
        journal = session.journal
        return journal is None or not journal.pending(session.history)

    def _evict(self, session: Session) -> None:
        self.by_id.pop(session.id, None)
        self._dirty.discard(session)
        self._forget_session(session.id)

    def drop(self, session: Session) -> None:
        """Let a session go without saving it (its lease was lost: what it
        holds unsaved may be another instance's to write now)."""
        if self.by_id.get(session.id) is session:
            self._evict(session)

    def evict_idle(self) -> int:
        """Drop sessions idle past the grace period; return how many."""
        cutoff = time.monotonic() - self.settings.session_grace_s
        idle = [
            s
            for s in self.by_id.values()
            if s.idle and s.last_active < cutoff and self._evictable(s)
        ]
        for session in idle:
            self._evict(session)
        return len(idle)

    async def flush(self, session: Session) -> None:
        """Write what the session's journal holds (one transaction)."""
        journal = session.journal
        if self.store is None or journal is None:
            return
        async with session.flushing:
            if not journal.pending(session.history):
                return
            batch = journal.take(
                session.history,
                now=self._clock(),
                keep_frames_from=session.outbox.oldest_seq,
            )
            try:
                await self.store.write(batch)
            except StoreError:
                journal.give_back(batch)
                self._dirty.add(session)
                raise
            journal.written(batch)

    async def flush_session(self, session_id: str) -> None:
        """Save what a session in memory has pending (before reading the store)."""
        session = self.by_id.get(session_id)
        if session is not None:
            await self.flush(session)

    def forget(self, session_id: str) -> bool:
        """Drop a session from memory (its conversation is being deleted);
        False while it has an active run."""
        session = self.by_id.get(session_id)
        if session is None:
            return True
        if session.run is not None:
            return False
        session.journal = None  # a client still on it chats on, unsaved
        self._evict(session)
        return True

    async def flush_quietly(self, session: Session) -> None:
        """`flush`, a failure logged (the journal keeps what was not written)."""
        try:
            await self.flush(session)
        except StoreError as exc:
            log.error("could not save session %s: %s", session.id, exc)

    async def flush_all(self) -> None:
        for session in list(self.by_id.values()):
            await self.flush_quietly(session)

    async def write_behind(self) -> None:
        """Save frames sent outside runs, and let idle sessions go."""
        sweep_s = max(min(self.settings.session_grace_s / 2, 30.0), 0.01)
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=sweep_s)
            self._wake.clear()
            dirty, self._dirty = self._dirty, set()
            await self._flush_together(dirty)
            del dirty  # hold no session past its eviction
            self.evict_idle()
            async with self._swept:
                self._swept.notify_all()

    async def _flush_together(self, sessions: set[Session]) -> None:
        """Flush many sessions in one transaction; if it fails, one by one
        (so one conversation the store refuses holds up no other)."""
        if self.store is None:
            return
        taken: list[tuple[Session, Journal, Batch]] = []
        async with contextlib.AsyncExitStack() as held:
            for session in sessions:
                journal = session.journal
                if journal is None or not journal.pending(session.history):
                    continue
                if session.flushing.locked():  # a run's checkpoint is writing
                    self._dirty.add(session)
                    continue
                await held.enter_async_context(session.flushing)
                batch = journal.take(
                    session.history,
                    now=self._clock(),
                    keep_frames_from=session.outbox.oldest_seq,
                )
                taken.append((session, journal, batch))
            if not taken:
                return
            try:
                await self.store.write_all([batch for _, _, batch in taken])
            except StoreError:
                for _session, journal, batch in taken:
                    journal.give_back(batch)
            else:
                for _session, journal, batch in taken:
                    journal.written(batch)
                return
        for session, _journal, _batch in taken:
            await self.flush_quietly(session)

    async def next_sweep(self) -> None:
        """Wait for the write-behind task's next pass to finish."""
        async with self._swept:
            await self._swept.wait()
