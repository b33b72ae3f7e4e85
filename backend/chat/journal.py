"""`Journal`: what a session has not written to the store yet.

The session's frames, its new history messages, and its runs' records
collect here between flushes; `take` turns them into one `Batch` (one
transaction), and `give_back` returns a batch the store could not write, so
nothing is lost and the next flush tries again. A conversation is created in
the store by its first batch that holds anything: a socket that connects and
leaves without chatting stores nothing.

A run started with `save_chat: false` is never journalled: its frames are
skipped here and its messages never reach the session's history.
"""

from __future__ import annotations

from collections.abc import Callable

from backend.history import History
from backend.notifications import Frame
from backend.store.base import Batch, ConversationRecord, RunRecord

TITLE_CHARS = 80


class Journal:
    def __init__(
        self,
        conversation: ConversationRecord,
        *,
        stored: bool,
        saved_messages: int = 0,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.conversation = conversation
        self.stored = stored
        """The conversation exists in the store."""
        self.saved_messages = saved_messages
        """How many history messages are already stored."""
        self.reset = False
        self.frames: list[Frame] = []
        self.runs: dict[str, RunRecord] = {}
        self.unsaved_runs: set[str] = set()
        self.kept_from = 0
        """The oldest `seq` the store keeps (older frames left the window)."""
        self.on_change = on_change
        """Called whenever something new is pending."""

    # ------------------------------------------------------------ recording

    def frame(self, frame: Frame) -> None:
        if frame.run_id is not None and frame.run_id in self.unsaved_runs:
            return
        self.frames.append(frame)
        self.on_change()

    def run(self, record: RunRecord) -> None:
        self.runs[record.id] = record
        self.on_change()

    def history_reset(self) -> None:
        self.reset = True
        self.saved_messages = 0
        self.on_change()

    def history_grew(self) -> None:
        self.on_change()

    # ------------------------------------------------------------ flushing

    def pending(self, history: History) -> bool:
        return bool(
            self.frames or self.runs or self.reset or len(history) > self.saved_messages
        )

    def take(self, history: History, *, now: float, keep_frames_from: int) -> Batch:
        """Everything pending, as one batch; the journal is empty afterwards."""
        new = [
            (position, history[position])
            for position in range(self.saved_messages, len(history))
        ]
        batch = Batch(
            conversation_id=self.conversation.id,
            updated_at=now,
            reset_history=self.reset,
            messages=new,
            frames=self.frames,
            runs=list(self.runs.values()),
        )
        if not self.stored:
            batch.create = self._first_record(history, now)
        if keep_frames_from > self.kept_from:
            batch.keep_frames_from = keep_frames_from
        self.frames, self.runs, self.reset = [], {}, False
        self.saved_messages = len(history)
        return batch

    def written(self, batch: Batch) -> None:
        """The store has `batch`."""
        if batch.create is not None:
            self.stored = True
            self.conversation = batch.create
        if batch.keep_frames_from is not None:
            self.kept_from = batch.keep_frames_from

    def give_back(self, batch: Batch) -> None:
        """The store failed `batch`: keep it pending, before anything newer."""
        self.frames = batch.frames + self.frames
        for record in batch.runs:
            self.runs.setdefault(record.id, record)
        self.reset = self.reset or batch.reset_history
        if batch.messages:
            self.saved_messages = min(self.saved_messages, batch.messages[0][0])
        elif batch.reset_history:
            self.saved_messages = 0

    def _first_record(self, history: History, now: float) -> ConversationRecord:
        first = next((m.content for m in history if m.role == "user"), None)
        title = " ".join((first or "").split())[:TITLE_CHARS]
        return self.conversation.model_copy(
            update={"title": self.conversation.title or title, "updated_at": now}
        )
