"""`Journal`: what a session has not written to the store yet.

The session's frames, its new history messages, and its runs' records
collect here between flushes; `take` turns them into one `Batch` (one
transaction), and `give_back` returns a batch the store could not write, so
nothing is lost and the next flush tries again. A conversation is created in
the store by its first batch that holds something of the conversation (a
message, a run, a file): a socket that connects and leaves without chatting
stores nothing, nor does one that only sent frames the server refused (the
error frames it got go with the first real batch, the latest
`UNSTORED_FRAMES` of them).

A run started with `save_chat: false` is never journalled: its frames are
skipped here and its messages never reach the session's history. Only its
row of the usage ledger is (`run_usage`), as every run's is with its
record: a conversation not stored gets that row alone, unfenced (nothing
else of it is written, and it is not created for it).

A session reset or an edit cuts the history: the next batch deletes the
stored messages from the cut on before it adds the new ones. An edit (or a
switch of branches) sets the tail it cuts aside as a branch: its runs are
marked with the branch in the same batch, and are not the conversation's
any more until a switch brings them back (`chat/branches.py`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from backend.history import History
from backend.store.base import Batch, SetAside
from backend.store.records import ConversationRecord, PendingInputRecord, RunRecord
from backend.store.usage_records import RunUsageRecord
from backend.transcript import Frame

TITLE_CHARS = 80
UNSTORED_FRAMES = 100
"""Frames kept for a conversation not in the store yet (errors answering
refused frames; the oldest go first)."""
UNSAVED_REMEMBERED = 100
"""Ended unsaved runs whose ids are kept, to say why an edit cannot use one."""


class Journal:
    def __init__(
        self,
        conversation: ConversationRecord,
        *,
        stored: bool,
        epoch: int = 1,
        saved_messages: int = 0,
        first_said: str | None = None,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        """`first_said`: the stored history's first user message, if any."""
        self.conversation = conversation
        self.epoch = epoch
        """The epoch this instance owns the conversation at (the fence every
        batch carries): 1 for a conversation it created."""
        self.failures = 0
        """Flushes that failed in a row (reset by one that succeeds)."""
        self.stored = stored
        """The conversation exists in the store."""
        self.saved_messages = saved_messages
        """How many history messages are already stored."""
        self.truncate_at: int | None = None
        """Where the history was cut since the last flush (None: nowhere)."""
        self.frames: list[Frame] = []
        self.runs: dict[str, RunRecord] = {}
        self.usage: dict[str, RunUsageRecord] = {}
        """Runs' rows of the usage ledger, saved runs or not."""
        self.removed_runs: set[str] = set()
        """Runs set aside (in a branch): not the conversation's until brought
        back."""
        self.set_aside: list[SetAside] = []
        """Tails the next batch keeps as branches."""
        self.restored: list[str] = []
        """Branches the next batch brings back."""
        self.drop_branches = False
        """A reset: the next batch drops every branch."""
        self.unsaved_runs: set[str] = set()
        """Runs under way with `save_chat: false`."""
        self.ended_unsaved: deque[str] = deque(maxlen=UNSAVED_REMEMBERED)
        """The latest unsaved runs that ended."""
        self.kept_from = 0
        """The oldest `seq` the store keeps (older frames left the window)."""
        self.create_wanted = False
        self.inputs: list[PendingInputRecord] = []
        """Held inputs (`chat/inbox.py`) the next batch stores."""
        self.used_inputs: list[str] = []
        """Held inputs used: the next batch deletes them."""
        self.on_change = on_change
        """Called whenever something new is pending."""
        self.auto_title = title_of(first_said) if first_said is not None else ""
        """The title the stored first user message gives (see `_retitle`)."""

    # ------------------------------------------------------------ recording

    def frame(self, frame: Frame) -> None:
        if frame.run_id is not None and frame.run_id in self.unsaved_runs:
            return
        self.frames.append(frame)
        if not self.stored and len(self.frames) > UNSTORED_FRAMES:
            del self.frames[0]
        self.on_change()

    def run(self, record: RunRecord, *, saved: bool = True) -> None:
        """The run's record, and its row of the usage ledger (that alone
        for a run not `saved`: `save_chat: false`)."""
        self.run_usage(record)
        if record.id in self.removed_runs or not saved:
            return
        self.runs[record.id] = record
        self.on_change()

    def run_usage(self, record: RunRecord) -> None:
        """The run's row of the usage ledger (alone, for an unsaved run)."""
        owner = self.conversation.owner
        self.usage[record.id] = RunUsageRecord.of(record, owner)
        self.on_change()

    def run_ended(self, run_id: str) -> None:
        if run_id in self.unsaved_runs:
            self.unsaved_runs.remove(run_id)
            self.ended_unsaved.append(run_id)

    def history_truncated(self, length: int) -> None:
        """The history was cut to its first `length` messages."""
        self.truncate_at = _earliest(self.truncate_at, length)
        self.saved_messages = min(self.saved_messages, length)
        self.on_change()

    def tail_set_aside(self, tail: SetAside) -> None:
        """An edit or a switch cut `tail` off: keep it as a branch (records of
        its runs not written yet are written with it, then set aside)."""
        self.set_aside.append(tail)
        self.removed_runs.update(tail.run_ids)
        self.on_change()

    def branches_dropped(self) -> None:
        """A reset of the history: no version of it can come back."""
        self.drop_branches = True
        self.on_change()

    def branch_restored(self, branch_id: str, run_ids: Iterable[str]) -> None:
        """A switch brought branch `branch_id` back, with these runs."""
        self.restored.append(branch_id)
        self.removed_runs.difference_update(run_ids)
        self.on_change()

    def history_grew(self) -> None:
        self.on_change()

    def input_held(self, record: PendingInputRecord) -> None:
        self.inputs.append(record)
        self.on_change()

    def input_used(self, input_id: str) -> None:
        """Delete a held input (one never stored is simply not stored)."""
        kept = [record for record in self.inputs if record.id != input_id]
        if len(kept) == len(self.inputs):
            self.used_inputs.append(input_id)
        self.inputs = kept
        self.on_change()

    def want_stored(self) -> None:
        """Create the conversation in the store at the next flush, even with
        nothing else to write (a file comes before the first message)."""
        if not self.stored:
            self.create_wanted = True
            self.on_change()

    # ------------------------------------------------------------ flushing

    def pending(self, history: History) -> bool:
        """Something to write: for a conversation not stored yet, something
        that creates it (frames alone do not)."""
        return bool(
            self.usage
            or self._creates(history)
            or (self.stored and (self.frames or self.inputs or self.used_inputs))
        )

    def _creates(self, history: History) -> bool:
        """Something pending that a conversation not stored is created for."""
        return bool(
            self.runs
            or self.set_aside
            or self.restored
            or self.drop_branches
            or self.truncate_at is not None
            or len(history) > self.saved_messages
            or (self.create_wanted and not self.stored)
        )

    def take(self, history: History, *, now: float, keep_frames_from: int) -> Batch:
        """Everything pending, as one batch; the journal is empty afterwards
        (but for a conversation not stored that only has usage rows: they
        alone, unfenced)."""
        usage, self.usage = list(self.usage.values()), {}
        if not self.stored and not self._creates(history):
            return Batch(
                self.conversation.id, now, self.epoch, usage=usage, unfenced=True
            )
        new = [
            (position, history[position])
            for position in range(self.saved_messages, len(history))
        ]
        batch = Batch(
            conversation_id=self.conversation.id,
            updated_at=now,
            epoch=self.epoch,
            truncate_history_at=self.truncate_at,
            messages=new,
            frames=self.frames,
            runs=list(self.runs.values()),
            set_aside=self.set_aside,
            restore=self.restored,
            drop_branches=self.drop_branches,
            inputs=self.inputs,
            delete_inputs=self.used_inputs,
            usage=usage,
        )
        if not self.stored:
            batch.create = self._first_record(history, now)
        else:
            self._retitle(batch, history)
        if keep_frames_from > self.kept_from:
            batch.keep_frames_from = keep_frames_from
        self.frames, self.runs = [], {}
        self.set_aside, self.restored = [], []
        self.drop_branches = False
        self.inputs, self.used_inputs = [], []
        self.truncate_at = None
        self.saved_messages = len(history)
        return batch

    def written(self, batch: Batch) -> None:
        """The store has `batch`."""
        self.failures = 0
        if batch.create is not None:
            self.stored = True
            self.conversation = batch.create
        if batch.keep_frames_from is not None:
            self.kept_from = batch.keep_frames_from

    def give_back(self, batch: Batch) -> None:
        """The store failed `batch`: keep it pending, before anything newer.
        (Replaying it is harmless even if it was written after all: the
        store's writes are idempotent by their natural keys.)"""
        self.failures += 1
        self.frames = batch.frames + self.frames
        for record in batch.runs:
            self.runs.setdefault(record.id, record)
        for row in batch.usage:
            self.usage.setdefault(row.run_id, row)
        self.set_aside[:0] = batch.set_aside
        self.restored[:0] = batch.restore
        self.drop_branches = self.drop_branches or batch.drop_branches
        used = set(self.used_inputs) | set(batch.delete_inputs)
        self.inputs[:0] = [i for i in batch.inputs if i.id not in used]
        self.used_inputs[:0] = batch.delete_inputs
        cut = batch.truncate_history_at
        self.truncate_at = _earliest(self.truncate_at, cut)
        for position in (cut, batch.messages[0][0] if batch.messages else None):
            if position is not None:
                self.saved_messages = min(self.saved_messages, position)

    def _first_record(self, history: History, now: float) -> ConversationRecord:
        first = _first_said(history)
        self.auto_title = title_of(first[1]) if first is not None else ""
        return self.conversation.model_copy(
            update={
                "title": self.conversation.title or self.auto_title,
                "updated_at": now,
            }
        )

    def _retitle(self, batch: Batch, history: History) -> None:
        """A conversation titled by its first user message keeps that title
        in step with it: set when the message comes after the conversation
        was stored (a file came first), changed when an edit changes it. The
        store applies it only while the title is still the one the old
        message gave (or none): a title a person chose stays."""
        first = _first_said(history)
        if first is None or not batch.messages or first[0] < batch.messages[0][0]:
            return  # the first user message is not new in this batch
        title = title_of(first[1])
        if title != self.auto_title:
            batch.title, batch.title_was = title, self.auto_title
            self.auto_title = title


def title_of(said: str) -> str:
    """A conversation's title from its first user message."""
    return " ".join(said.split())[:TITLE_CHARS]


def _first_said(history: History) -> tuple[int, str] | None:
    """The position and text of the history's first user message."""
    return next(
        ((n, m.content or "") for n, m in enumerate(history) if m.role == "user"),
        None,
    )


def _earliest(a: int | None, b: int | None) -> int | None:
    """The earlier of two cuts (None: no cut)."""
    if a is None or b is None:
        return b if a is None else a
    return min(a, b)
