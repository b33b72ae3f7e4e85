"""Sessions: a conversation, its outbox of frames, and its active run.

`Outbox` is the session's `Notifier`: it serialises each frame once, keeps a
bounded log for replay by `seq`, and fans the text out to every connected
client's queue. A client that disconnects only unsubscribes; the session and
its run carry on, and a reconnect with the last seen `seq` gets every frame
it missed, in order, without duplicates.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from backend.agent.run_control import RunControl, UserAnswer
from backend.agent.state import RunState
from backend.errors import NoActiveRun, NoPendingApproval, NoPendingInput
from backend.history import History
from backend.notifications import Frame, Notifications

OVERFLOW = ""
"""Queued instead of a frame when a client fell too far behind."""


class Subscription:
    """One client's view of a session's frames (JSON text, in seq order)."""

    def __init__(self, limit: int) -> None:
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.limit = limit
        self.overflowed = False

    def push(self, text: str) -> None:
        """Queue a frame; past `limit` unsent frames, give up on this client.

        A client that does not read must not make the server hold unbounded
        memory: its queue is dropped and the writer closes the socket. The
        client reconnects with its last `seq` and the replay log fills the gap.
        """
        if self.overflowed:
            return
        if self.queue.qsize() >= self.limit:
            self.overflowed = True
            while not self.queue.empty():
                self.queue.get_nowait()
            text = OVERFLOW
        self.queue.put_nowait(text)

    async def next_frame(self) -> str:
        """The next frame's text, or `OVERFLOW`."""
        return await self.queue.get()


class Outbox:
    def __init__(self, max_frames: int) -> None:
        self._log: deque[tuple[int, str]] = deque(maxlen=max_frames)
        self._subscribers: list[Subscription] = []

    def deliver(self, frame: Frame) -> None:
        self._log.append((frame.seq, frame.text))
        for subscriber in self._subscribers:
            subscriber.push(frame.text)

    @property
    def oldest_seq(self) -> int:
        """The oldest frame still held for replay (0: none)."""
        return self._log[0][0] if self._log else 0

    def subscribe(self, after_seq: int | None) -> Subscription:
        """A new subscriber, pre-filled with the frames after `after_seq`."""
        subscription = Subscription(limit=max(self._log.maxlen or 0, 1000))
        if after_seq is not None:
            for seq, text in self._log:
                if seq > after_seq:
                    subscription.queue.put_nowait(text)
        self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)


@dataclass
class ActiveRun:
    """A run in progress: its state (a value) and the user's levers on it."""

    state: RunState
    control: RunControl = field(default_factory=RunControl)
    task: asyncio.Task[None] | None = None

    @property
    def run_id(self) -> str:
        return self.state.run_id


class Session:
    def __init__(self, session_id: str, *, max_frames: int) -> None:
        self.id = session_id
        self.history = History()
        self.outbox = Outbox(max_frames)
        self.notify = Notifications(session_id, self.outbox)
        self.run: ActiveRun | None = None
        self.last_active = time.monotonic()

    def touch(self) -> None:
        self.last_active = time.monotonic()

    def active_run(self) -> ActiveRun:
        if self.run is None:
            raise NoActiveRun("there is no active run in this session")
        return self.run

    def resolve_approval(
        self, tool_call_id: str, approved: bool, reason: str | None
    ) -> None:
        """Hand the user's approval decision to the run waiting on it."""
        if self.run is None:
            raise NoPendingApproval(
                f"no approval is pending for tool call {tool_call_id!r}: "
                "no run is active"
            )
        self.run.control.resolve_approval(tool_call_id, approved, reason)

    def submit_answer(self, content: str, question_id: str | None) -> None:
        """Hand the user's answer to the run waiting on a question."""
        run = self.run
        pending = run.state.pending_question if run else None
        if run is None or pending is None:
            raise NoPendingInput("no question is waiting for an answer")
        if question_id is not None and question_id != pending.question_id:
            raise NoPendingInput(
                f"question {question_id!r} is not the pending one "
                f"({pending.question_id!r}); it may have timed out or been answered"
            )
        if run.control.answered or run.state.resolution is not None:
            raise NoPendingInput("the pending question has already been answered")
        run.control.answer(UserAnswer(pending.question_id, content))
