"""`SessionTable`: the sessions in memory, loaded from and saved to the store.

A session is looked up by id in memory, else loaded from the `Store`
(history, the replay window, `last_seq`), else made new. Each session's
`Journal` reports what it holds unsaved; `flush` writes it as one batch, and
`write_behind` (a task in `ChatService`'s TaskGroup) flushes sessions with
frames sent outside runs, evicts those idle past the grace period and parks
runs left waiting unwatched. Memory stays bounded, in all and per user, by
`Room` (an evicted session keeps nothing unsaved, and its executor state
goes with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection

from backend.chat.inbox import Inbox
from backend.chat.journal import Journal
from backend.chat.room import Room
from backend.chat.session import Dispatcher, Session
from backend.errors import Busy, NoSuchConversation
from backend.files.shelf import info
from backend.history import History
from backend.settings import Settings
from backend.store.base import Batch, Fenced, Loaded, Store, StoreError
from backend.store.records import ConversationRecord

log = logging.getLogger(__name__)

MOVED = "this conversation moved to another server; reconnect to continue"
UNSAVABLE = (
    "this conversation could not be saved for a while, so this server let it "
    "go; reconnect to continue from what was saved"
)
LET_GO_REMEMBERED = 10_000
CRASH_SEQ_GAP = 1_000_000
"""Seqs left unused when a conversation is taken from an owner that did not
let it go cleanly: it may have sent frames the store never got, and a client
that saw them must still get what comes next (it asks for what follows its
last seq)."""


class SessionTable:
    def __init__(
        self,
        settings: Settings,
        store: Store | None,
        *,
        dispatcher: Dispatcher,
        forget_session: Callable[[str], None],
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.store = store
        self.dispatcher = dispatcher
        """What acts on the messages sent to the sessions (`ChatService`)."""
        self._forget_session = forget_session
        self._clock = clock
        self.by_id: dict[str, Session] = {}
        self._by_owner: dict[str, dict[str, Session]] = {}
        self.room = Room(settings, self.sessions_of, self.evict_if_idle)
        self._dirty: set[Session] = set()
        self._releasing: list[tuple[str, int]] = []
        """Conversations evicted cleanly whose release the next pass writes."""
        self._let_go: OrderedDict[str, int] = OrderedDict()
        """The latest conversations let go cleanly here, with their epoch:
        taken back here, they need no gap even before the release is stored."""
        self._next_park = 0.0
        """When `write_behind` next looks for waiting runs to park."""
        self._wake = asyncio.Event()
        self._swept = asyncio.Condition()

    async def create(
        self, owner: str, session_id: str | None = None, origin: str = "unknown"
    ) -> Session:
        """A new conversation of `owner` (with the id `session_id`, which
        no one has: then the same one if it came meanwhile), once there is
        room for it; `origin`: the kind of client starting it."""
        await self.room.make(owner)
        if session_id is None:
            return self.new(uuid.uuid4().hex, owner, origin)
        made = self.by_id.get(session_id)
        if made is None:
            return self.new(session_id, owner, origin)
        if made.owner != owner:
            raise NoSuchConversation(f"no conversation {session_id!r}")
        return made

    def new(self, session_id: str, owner: str, origin: str = "unknown") -> Session:
        """A new conversation of `owner` in memory (stored with its first
        message, tagged with `origin`); the caller made room (`room.make`)."""
        now = self._clock()
        record = ConversationRecord(
            id=session_id, owner=owner, created_at=now, updated_at=now, origin=origin
        )
        session = Session(
            session_id,
            owner=owner,
            max_frame_bytes=self.settings.frame_log_bytes,
            dispatcher=self.dispatcher,
            journal=self._journal(record, stored=False) if self.store else None,
        )
        self._add(session)
        return session

    def _add(self, session: Session) -> None:
        self.by_id[session.id] = session
        self._by_owner.setdefault(session.owner, {})[session.id] = session

    def sessions_of(self, owner: str | None) -> Collection[Session]:
        """The sessions in memory of `owner` (None: everyone's)."""
        if owner is None:
            return self.by_id.values()
        return self._by_owner.get(owner, {}).values()

    def _journal(
        self,
        record: ConversationRecord,
        *,
        stored: bool,
        saved: int = 0,
        epoch: int = 1,
        first_said: str | None = None,
    ) -> Journal:
        journal = Journal(
            record,
            stored=stored,
            saved_messages=saved,
            epoch=epoch,
            first_said=first_said,
        )
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
        """A stored conversation, back in memory and owned here (None: no such
        conversation). Loading raises its epoch: whoever held it before can
        write nothing more."""
        if self.store is None:
            return None
        if session_id in self.by_id:
            return self.by_id[session_id]
        await self.room.make(None)
        loaded = await self.store.take(
            session_id, max_frame_bytes=self.settings.frame_log_bytes
        )
        if loaded is None:
            return None
        if session_id in self.by_id:  # loaded meanwhile by another caller
            return self.by_id[session_id]
        session = self._session(loaded, released=self._was_ours(loaded))
        self._add(session)
        try:
            await self.room.make(session.owner, keep=session)
        except Busy:
            self._evict(session)  # released cleanly: nothing of it is unsaved
            raise
        return session

    def _was_ours(self, loaded: Loaded) -> bool:
        """Let go cleanly by this instance, its release not written yet: the
        epoch just before this take was ours (nobody took it in between)."""
        held = self._let_go.pop(loaded.record.id, None)
        return loaded.released or held == loaded.epoch - 1

    def _session(self, loaded: Loaded, *, released: bool) -> Session:
        record = loaded.record
        session = Session(
            record.id,
            owner=record.owner,
            max_frame_bytes=self.settings.frame_log_bytes,
            dispatcher=self.dispatcher,
            history=History(loaded.messages),
            last_seq=loaded.last_seq,
            journal=self._journal(
                record,
                stored=True,
                saved=len(loaded.messages),
                epoch=loaded.epoch,
                first_said=next(
                    (m.content or "" for m in loaded.messages if m.role == "user"),
                    None,
                ),
            ),
        )
        session.files = [info(file) for file in loaded.files]
        session.inbox = Inbox(loaded.inputs)
        for frame in loaded.frames:
            session.outbox.restore(frame.seq, frame.text)
        assert session.journal is not None
        session.journal.kept_from = loaded.frames[0].seq if loaded.frames else 0
        if not released:
            session.notify.skip(CRASH_SEQ_GAP)
        return session

    def _evictable(self, session: Session) -> bool:
        journal = session.journal
        return journal is None or not journal.pending(session.history)

    def evict_if_idle(self, session: Session) -> bool:
        """Let an idle session go if all it holds is saved (for `Room`)."""
        if self.by_id.get(session.id) is not session or not (
            session.idle and self._evictable(session)
        ):
            return False
        self._evict(session)
        return True

    def _evict(self, session: Session) -> None:
        self.by_id.pop(session.id, None)
        owned = self._by_owner.get(session.owner)
        if owned is not None:
            owned.pop(session.id, None)
            if not owned:
                del self._by_owner[session.owner]
        self._dirty.discard(session)
        journal = session.journal
        if (
            journal is not None
            and journal.stored
            and not journal.pending(session.history)
        ):
            self._releasing.append((session.id, journal.epoch))
            self._let_go[session.id] = journal.epoch
            while len(self._let_go) > LET_GO_REMEMBERED:
                self._let_go.popitem(last=False)
            self._wake.set()
        self._forget_session(session.id)

    def drop(self, session: Session) -> None:
        """Let a session go without saving it (its lease was lost: what it
        holds unsaved may be another instance's to write now)."""
        if self.by_id.get(session.id) is session:
            self._evict(session)

    def let_go(self, session: Session, reason: str = MOVED) -> None:
        """Another instance owns the conversation now (the store's fence said
        so, or its lease was lost), or it cannot be saved: nothing more is
        written or sent from here. Its run is cancelled unsaved (unless that
        is the caller itself, which ends on its own) and its clients are
        closed (1012) with `reason`, to reconnect wherever it is now."""
        if self.by_id.get(session.id) is not session:
            return
        session.lost = True
        session.journal = None
        session.watchers.clear()
        task = session.run.task if session.run is not None else None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        session.outbox.close_all(reason=reason)
        self.drop(session)

    async def release_evicted(self) -> None:
        """Write the clean let-go of conversations evicted since the last
        pass (a failure only costs a gap in their seqs at the next load)."""
        held, self._releasing = self._releasing, []
        if self.store is None or not held:
            return
        try:
            await self.store.release(held)
        except StoreError as exc:
            log.warning("could not release %d conversations: %s", len(held), exc)

    async def release_all(self) -> None:
        """At shutdown, after everything is saved: every session let go cleanly."""
        for session in list(self.by_id.values()):
            journal = session.journal
            clean = journal is not None and not journal.pending(session.history)
            if journal is not None and journal.stored and clean:
                self._releasing.append((session.id, journal.epoch))
        await self.release_evicted()

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

    async def flush(self, session: Session, *, let_go: bool = True) -> None:
        """Write what the session's journal holds (one transaction). Refused
        by the fence, the session is let go (`let_go` False: the caller
        does it, after telling its clients why)."""
        if self.store is not None and session.journal is not None:
            async with session.flushing:
                await self.flush_held(session, let_go=let_go)

    async def flush_held(self, session: Session, *, let_go: bool = True) -> None:
        """`flush`, by a caller that holds `session.flushing`."""
        journal = session.journal
        if self.store is None or not (journal and journal.pending(session.history)):
            return
        batch = journal.take(
            session.history,
            now=self._clock(),
            keep_frames_from=session.outbox.oldest_seq,
        )
        try:
            await self.store.write(batch)
        except Fenced:
            log.error("session %s: another instance owns it now", session.id)
            if let_go:
                self.let_go(session)
            raise
        except StoreError:
            journal.give_back(batch)
            self._failed(session, journal)
            raise
        journal.written(batch)

    def _failed(self, session: Session, journal: Journal) -> None:
        """A flush failed: tried again later, up to `store_max_failures` in
        a row; then the session is let go (its unsaved part lost, said so)."""
        if journal.failures < self.settings.store_max_failures:
            self._dirty.add(session)
            return
        log.error(
            "session %s: %d flushes failed in a row; letting it go",
            session.id,
            journal.failures,
        )
        self.let_go(session, UNSAVABLE)

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
        park_sweep_s = max(min(self.settings.park_waiting_after_s / 4, 30.0), 0.01)
        while True:
            with contextlib.suppress(TimeoutError):
                # wait_for could eat a cancel
                async with asyncio.timeout(min(sweep_s, park_sweep_s)):
                    await self._wake.wait()
            self._wake.clear()
            dirty, self._dirty = self._dirty, set()
            await self._flush_together(dirty)
            del dirty  # hold no session past its eviction
            self.evict_idle()
            if time.monotonic() >= self._next_park:
                self._next_park = time.monotonic() + park_sweep_s
                await self.room.sweep()
            await self.release_evicted()
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
            except Fenced as exc:
                stale = set(exc.conversation_ids)
                for session, journal, batch in taken:
                    if session.id in stale:
                        self.let_go(session)
                    else:
                        journal.give_back(batch)
                        journal.failures -= 1  # not its fault
                taken = [t for t in taken if t[0].id not in stale]
            except StoreError:
                for _session, journal, batch in taken:
                    journal.give_back(batch)
                    journal.failures -= 1  # counted by the flush one by one
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
