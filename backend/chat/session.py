"""Sessions: a conversation in memory, its outbox of frames, and its run.

`Outbox` keeps the newest frames, up to a number of bytes, for replay by
`seq`, and fans each frame's text out to every connected client's queue
(`chat/subscription.py`). A client that disconnects only unsubscribes; the
session and its run carry on, and a reconnect with the last seen `seq` gets
every frame it missed, in order, without duplicates. The session's
`Journal` takes the same frames to the store, so a reconnect after a
restart replays them too.

A `Session` is the local side of a `Target` (`chat/target.py`): a client's
message is acted on here, by its `Dispatcher` (the `ChatService`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from backend.agent.run_control import RunControl, UserAnswer
from backend.agent.state import Approved, RunState
from backend.chat.inbox import Inbox
from backend.chat.journal import Journal
from backend.chat.outcome import run_outcome
from backend.chat.subscription import SERVICE_RESTART, Subscription
from backend.errors import (
    BudgetExhausted,
    Moved,
    NoActiveRun,
    NoPendingApproval,
    NoPendingInput,
    ProtocolError,
)
from backend.history import History
from backend.notifications import Notifications
from backend.protocol import (
    AnswerAction,
    ClientMessage,
    ErrorType,
    FileInfo,
    ServerInfo,
)
from backend.protocol.client import named_in
from backend.transcript import Frame


class Outbox:
    """The replay log (the newest frames within `max_bytes`) and subscribers."""

    def __init__(self, max_bytes: int, *, client_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes
        self.client_bytes = client_bytes or max(max_bytes, 1 << 20)
        """How far one client may fall behind before it is cut off."""
        self._log: deque[tuple[int, str, int]] = deque()
        self._bytes = 0
        self._subscribers: list[Subscription] = []

    def deliver(self, frame: Frame) -> None:
        self.restore(frame.seq, frame.text)
        for subscriber in self._subscribers:
            subscriber.push(frame.text)

    def restore(self, seq: int, text: str) -> None:
        """Hold a frame for replay without sending it (a session loaded back)."""
        size = len(text.encode())
        self._log.append((seq, text, size))
        self._bytes += size
        while self._bytes > self.max_bytes and len(self._log) > 1:
            self._bytes -= self._log.popleft()[2]

    def after(self, seq: int) -> list[tuple[int, str]]:
        """The frames held after `seq` (seq and text), oldest first."""
        return [(s, text) for s, text, _size in self._log if s > seq]

    @property
    def oldest_seq(self) -> int:
        """The oldest frame still held for replay (0: none)."""
        return self._log[0][0] if self._log else 0

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def subscribe(self, after_seq: int | None) -> Subscription:
        """A new subscriber, pre-filled with the frames after `after_seq`."""
        subscription = Subscription(limit_bytes=self.client_bytes)
        if after_seq is not None:
            for seq, text, _size in self._log:
                if seq > after_seq:
                    subscription.replay(text)
        self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    def notice(self, text: str) -> None:
        """Send a frame outside the session's sequence (seq 0) to every
        subscriber, without holding it for replay."""
        for subscriber in self._subscribers:
            subscriber.push(text)

    def close_all(self, code: int = SERVICE_RESTART, reason: str = "") -> None:
        for subscription in self._subscribers:
            subscription.close(code, reason)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)


@dataclass
class ActiveRun:
    """A run in progress: its state (a value) and the user's levers on it."""

    state: RunState
    history: History = field(default_factory=History)
    """The history the run works on: the session's, or a scratch copy for a
    run that is not saved (`save_chat: false`)."""
    control: RunControl = field(default_factory=RunControl)
    task: asyncio.Task[None] | None = None

    @property
    def run_id(self) -> str:
        return self.state.run_id


class Dispatcher(Protocol):
    """What acts on a client's message in a session owned here
    (`ChatService.dispatch`): a `ProtocolError` says why it cannot; the
    answer is what an HTTP client is told."""

    async def dispatch(
        self, session: Session, message: ClientMessage
    ) -> dict[str, Any]: ...


class Session:
    """A conversation in memory: history, frames, its run, and its journal.

    It is its `Notifications`' notifier: each frame goes to the outbox (for
    the sockets) and to the journal (for the store), when there is one.
    """

    def __init__(
        self,
        session_id: str,
        *,
        owner: str,
        max_frame_bytes: int,
        dispatcher: Dispatcher,
        history: History | None = None,
        last_seq: int = 0,
        journal: Journal | None = None,
    ) -> None:
        self.id = session_id
        self.dispatcher = dispatcher
        self.owner = owner
        self.history = history if history is not None else History()
        self.files: list[FileInfo] = []
        """The conversation's files, oldest first (what the reason prompt lists)."""
        self.outbox = Outbox(max_frame_bytes)
        self.journal = journal
        self.notify = Notifications(session_id, self, last_seq=last_seq)
        self.run: ActiveRun | None = None
        self.last_run: ActiveRun | None = None
        self.inbox = Inbox()
        """Messages sent while a run worked, until used (`chat/inbox.py`)."""
        """The run that ended last (what an HTTP client asks about at its end)."""
        self.last_active = time.monotonic()
        self.flushing = asyncio.Lock()
        self.watchers: dict[str, float] = {}
        """Other instances showing this session to their clients (by instance
        id), until when (monotonic) each is known to watch."""
        self.relay: Callable[[str, int, int, str], None] | None = None
        """Publishes a frame to the watchers (the cluster's bus)."""
        self._prev_seq = last_seq
        self._held: list[Frame] | None = None
        self.lost = False
        """Let go (another instance owns the conversation now, or it could
        not be saved): this object takes no more messages."""

    def deliver(self, frame: Frame) -> None:
        if self.journal is not None:
            self.journal.frame(frame)
        if self._held is not None:
            self._held.append(frame)
        else:
            self._show(frame)

    def _show(self, frame: Frame) -> None:
        self.outbox.deliver(frame)
        if self.watchers and self.relay is not None:
            self.relay(self.id, self._prev_seq, frame.seq, frame.text)
        self._prev_seq = frame.seq

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Frames sent inside are journalled at once and shown to clients
        only at the end: wrap a send and the flush that stores it, so that
        what a reloaded page needs is stored before anyone sees it. Frames
        held by a session let go meanwhile are never shown."""
        if self._held is not None:  # nested: the outer block shows them
            yield
            return
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            if not self.lost:
                for frame in held:
                    self._show(frame)

    @property
    def idle(self) -> bool:
        """No socket, no watching instance and no run: the session may leave
        memory."""
        return (
            self.run is None and self.outbox.subscriber_count == 0 and not self.watchers
        )

    def frames_after(self, seq: int) -> list[tuple[int, str]]:
        """The frames held for replay after `seq`, oldest first."""
        return self.outbox.after(seq)

    def touch(self) -> None:
        self.last_active = time.monotonic()

    # ------------------------------------------------------------ as a Target

    @property
    def run_id(self) -> str | None:
        """The run in progress, if any."""
        return self.run.run_id if self.run is not None else None

    async def handle(self, message: ClientMessage) -> None:
        """Act on a client's message; a refusal becomes an `error` frame (a
        `moved` one was told already, and the socket closes)."""
        try:
            await self.dispatcher.dispatch(self, message)
        except Moved:
            return
        except ProtocolError as exc:
            about = named_in(message)
            resets = exc.resets_at if isinstance(exc, BudgetExhausted) else None
            self.notify.error(str(exc), exc.error_type, about=about, resets_at=resets)  # type: ignore[arg-type]

    async def report(self, message: str, error_type: ErrorType) -> None:
        self.notify.error(message, error_type)

    async def dispatch(self, message: ClientMessage) -> dict[str, Any]:
        return await self.dispatcher.dispatch(self, message)

    async def outcome(self, run_id: str, answer: str | None) -> dict[str, Any]:
        """`run_outcome` of the active or the last run; empty for any other."""
        for run in (self.run, self.last_run):
            if run is not None and run.run_id == run_id:
                return run_outcome(run.state, run.history, answer)
        return {}

    def stop_soon(self, run_id: str) -> None:
        run = self.run
        if run is not None and run.run_id == run_id:
            run.control.stop("immediate")

    def ready_frame(self, info: ServerInfo, *, resumed: bool) -> str:
        return self.notify.session_ready(
            resumed=resumed, info=info, oldest_seq=self.outbox.oldest_seq
        )

    def active_run(self) -> ActiveRun:
        if self.run is None:
            raise NoActiveRun("there is no active run in this session")
        return self.run

    def resolve_approval(
        self,
        tool_call_id: str,
        approved: bool,
        reason: str | None,
        *,
        approval: Approved | None = None,
    ) -> None:
        """Hand the user's approval decision to the run waiting on it."""
        if self.run is None:
            raise NoPendingApproval(
                f"no approval is pending for tool call {tool_call_id!r}: "
                "no run is active"
            )
        self.run.control.resolve_approval(
            tool_call_id, approved, reason, approval=approval
        )

    def submit_answer(
        self,
        content: str,
        question_id: str | None,
        *,
        error: bool | None = None,
        action: AnswerAction = "accept",
    ) -> None:
        """Hand the user's answer (or `action`: none) to the run waiting on a
        question, or (`error` given) a client tool's result to the run
        waiting on it."""
        run = self.answerable(question_id, result=error is not None)
        pending = run.state.pending_question
        assert pending is not None
        answer = UserAnswer(pending.question_id, content, bool(error), action)
        run.control.answer(answer)

    def answerable(self, question_id: str | None, *, result: bool = False) -> ActiveRun:
        """The run whose pending question an answer (to `question_id`, or
        to whatever is asked) would answer, or (`result`) whose client tool
        call `question_id` a result would settle; `NoPendingInput` if none."""
        run = self.run
        pending = run.state.pending_question if run else None
        if run is None or pending is None:
            raise NoPendingInput(
                "no client tool call is waiting for a result"
                if result
                else "no question is waiting for an answer"
            )
        if result != (pending.client_tool is not None):
            raise NoPendingInput(
                _not_that_wait(pending.client_tool, pending.question_id)
            )
        if question_id is not None and question_id != pending.question_id:
            what = "tool call" if result else "question"
            raise NoPendingInput(
                f"{what} {question_id!r} is not the pending one "
                f"({pending.question_id!r}); it may have timed out or been answered"
            )
        if run.control.answered or run.state.resolution is not None:
            raise NoPendingInput("the pending question has already been answered")
        return run

    def approvable(self, tool_call_id: str, *, blind: bool = False) -> ActiveRun:
        """The run waiting for a decision on `tool_call_id`;
        `NoPendingApproval` if none is. A call in doubt is run again only by
        an approval that says so (`blind`: an approval without `in_doubt`)."""
        if self.run is None:
            raise NoPendingApproval(
                f"no approval is pending for tool call {tool_call_id!r}: "
                "no run is active"
            )
        pending = self.run.state.pending_approval
        if pending is not None and pending.upcoming(tool_call_id) is not None:
            return self._ahead(self.run, tool_call_id)
        self.run.control.check_approval(tool_call_id)
        if blind and pending is not None and pending.in_doubt:
            raise NoPendingApproval(
                f"tool call {tool_call_id!r} is in doubt now (it was running when "
                "its server stopped): to run it again, approve with in_doubt: true"
            )
        return self.run

    def _ahead(self, run: ActiveRun, tool_call_id: str) -> ActiveRun:
        """The run asking about `tool_call_id` ahead of its turn, while it
        still waits on the call before it."""
        state = run.state
        if not state.waiting or tool_call_id in state.decided_ahead:
            raise NoPendingApproval(
                f"tool call {tool_call_id!r} cannot be decided now: it was "
                "decided already, or the call asked with it has been decided "
                "(it is asked again when its turn comes)"
            )
        return run


def _not_that_wait(client_tool: str | None, call_id: str) -> str:
    if client_tool is None:
        return (
            "no client tool call is waiting for a result: the run waits for "
            "the answer to a question (agent_user_input)"
        )
    return (
        f"the run waits for the result of client tool {client_tool!r} (call "
        f"{call_id!r}): send it as tool_result, not as an answer"
    )
