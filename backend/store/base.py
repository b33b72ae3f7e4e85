"""The `Store` seam: what loopwire keeps beyond one process, as plain values.

A conversation is a session that outlives its sockets: its messages (the
history every LLM call is built from), its runs (each with its `RunState`
checkpoint and, once ended, its outcome), the frames it sent (by `seq`, for
replay) and, per owner, the notes its tools saved.

Writes arrive as one `Batch` per flush and are applied in one transaction, so
a checkpoint never lands without the messages and frames that led to it.

The database is the referee of who may write a conversation. Loading one
to own it (`take`) raises its *epoch* in the same transaction; every batch
names the epoch its writer loaded, and is applied only if that is still the
conversation's epoch (else `Fenced`, and nothing is written). Tools that
change data do so through the store with the same fence and an idempotency
key (`EffectKey`), so a call is applied at most once whoever runs it.
Batches are idempotent by their natural keys (frame seq, message position,
run id): replaying one whose COMMIT was lost on the way changes nothing.
`SqlStore` (`store/sql.py`) implements it on SQLAlchemy; `ChatService` uses
it through its `Journal`s (`chat/journal.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from backend.errors import LoopwireError, OwnershipLost
from backend.store.records import (
    BranchRecord,
    ConversationRecord,
    FileRecord,
    NoteRecord,
    Page,
    PendingInputRecord,
    RunRecord,
)
from backend.store.search import SearchHit
from backend.store.share_records import ShareRecord
from backend.store.usage_records import RunUsageRecord, UsageLedger
from backend.store.user_records import (
    SignInRecord,
    ToolGrantRecord,
    UsageRecord,
)
from backend.transcript import Frame, Message


@dataclass(frozen=True, slots=True)
class SetAside:
    """A tail of a conversation kept as a branch: its history from message
    `fork_at` on and the runs that made it (`schema.branches`)."""

    branch_id: str
    fork_at: int
    messages: list[Message]
    run_ids: list[str]
    created_at: float
    """When this version was made (its first run started)."""


@dataclass
class Batch:
    """Everything one flush of one conversation writes, in one transaction."""

    conversation_id: str
    updated_at: float
    epoch: int = 0
    """The epoch the writer owns the conversation at: the batch is applied
    only if it is still the conversation's (`Fenced` otherwise)."""
    create: ConversationRecord | None = None
    """Insert the conversation first (its first batch)."""
    truncate_history_at: int | None = None
    """Delete the stored messages at this position and after, before adding
    `messages`: 0 for a session reset, a run's message for an edit."""
    messages: list[tuple[int, Message]] = field(default_factory=list)
    """New messages, with their position in the history."""
    frames: list[Frame] = field(default_factory=list)
    """Frames as `Notifications` stamped them (their text is stored as is)."""
    keep_frames_from: int | None = None
    """Delete frames with a lower `seq` (the replay window moved on)."""
    runs: list[RunRecord] = field(default_factory=list)
    set_aside: list[SetAside] = field(default_factory=list)
    """Tails of the conversation an edit or a switch of branches set aside,
    each as a branch (after `runs` are saved, so that a late record of one
    of their runs is set aside too)."""
    restore: list[str] = field(default_factory=list)
    """Branches brought back (by a switch): their runs rejoin the
    conversation, their rows go (their messages come as `messages`)."""
    drop_branches: bool = False
    """A reset of the history: every branch goes, with its runs (after
    `set_aside`: a tail set aside before the reset goes too)."""
    title: str | None = None
    """A new title from the first user message, applied only if the stored
    title is still `title_was` (the old message's) or empty."""
    title_was: str = ""
    inputs: list[PendingInputRecord] = field(default_factory=list)
    delete_inputs: list[str] = field(default_factory=list)
    """Pending inputs used (deleted after `inputs` are added)."""
    usage: list[RunUsageRecord] = field(default_factory=list)
    """Every run's row of the usage ledger, saved or not."""
    unfenced: bool = False
    """Only `usage`, of a conversation not stored: written unfenced."""

    @property
    def empty(self) -> bool:
        return not (
            self.create
            or self.truncate_history_at is not None
            or self.messages
            or self.frames
            or self.runs
            or self.set_aside
            or self.restore
            or self.drop_branches
            or self.inputs
            or self.delete_inputs
            or self.usage
        )


@dataclass(frozen=True, slots=True)
class Loaded:
    """A conversation taken to be owned: everything a session needs, read
    in the transaction that raised its epoch to `epoch`."""

    record: ConversationRecord
    epoch: int
    released: bool
    """Its last owner let it go cleanly (everything it sent was stored); if
    not, it may have sent frames it never stored, and seqs skip a gap."""
    messages: list[Message]
    frames: list[Frame]
    last_seq: int
    files: list[FileRecord]
    inputs: list[PendingInputRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class EffectKey:
    """What makes a data-changing tool call safe to run twice: its
    idempotency key (`<run id>:<tool call id>`) and the fence of the
    conversation it serves (its id and the epoch its owner holds)."""

    key: str
    conversation_id: str
    epoch: int
    tool_name: str


class StoreError(LoopwireError):
    """The database refused or failed an operation."""


class Fenced(StoreError, OwnershipLost):
    """A write came from a stale owner: the conversation's epoch moved on
    (another instance took it over). Nothing was written; the writer must
    let the conversation go."""

    def __init__(self, conversation_ids: Sequence[str]) -> None:
        self.conversation_ids = tuple(conversation_ids)
        names = ", ".join(self.conversation_ids[:3])
        super().__init__(
            f"conversation {names} is owned by another instance now (its epoch "
            "moved on); nothing was written"
        )


class LimitReached(StoreError):
    """A per-owner limit (such as the number of notes) would be exceeded."""


def files_full(limit: int) -> LimitReached:
    """What adding a file to a conversation that holds `limit` is refused with."""
    return LimitReached(
        f"this conversation has {limit} files already, the most it takes"
    )


class QuotaExceeded(LimitReached):
    """A file would take its owner's files past their quota (the bytes one
    user may hold: `LOOPWIRE_MAX_FILE_BYTES_PER_USER`)."""

    def __init__(self, what: str, used: int, quota: int) -> None:
        self.used = used
        self.quota = quota
        super().__init__(
            f"{what} would take your files past your quota: {shown_bytes(used)} "
            f"of {shown_bytes(quota)} used; delete conversations whose files "
            "you no longer need"
        )


def shown_bytes(count: int) -> str:
    """`count` bytes for people: `300 bytes`, `1.5 KiB`, `100 MiB`."""
    if count < 1024:
        return f"{count} bytes"
    value = count / 1024
    units = ["KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and len(units) > 1:
        value /= 1024
        units.pop(0)
    return f"{value:.1f}".removesuffix(".0") + f" {units[0]}"


class Store(UsageLedger, Protocol):
    """Where conversations, runs, frames and notes live."""

    async def open(self) -> None:
        """Connect and bring the schema up to date (migrations)."""
        ...

    async def close(self) -> None: ...

    # conversations
    async def create_conversation(self, record: ConversationRecord) -> None: ...

    async def take(
        self, conversation_id: str, *, max_frame_bytes: int
    ) -> Loaded | None:
        """Raise the conversation's epoch and read it, in one transaction
        (None: no such conversation). The caller owns it at that epoch."""
        ...

    async def release(self, held: Sequence[tuple[str, int]]) -> None:
        """Let conversations go cleanly: (id, epoch held) each, everything
        they sent stored; a pair whose epoch moved on is left as it is."""
        ...

    async def conversation(self, conversation_id: str) -> ConversationRecord | None: ...

    async def conversations(
        self,
        owner: str,
        *,
        limit: int,
        cursor: str | None = None,
        origins: Collection[str] | None = None,
    ) -> Page:
        """`owner`'s, the latest updated first; only those of `origins` if given."""
        ...

    async def search(self, owner: str, text: str, *, limit: int) -> list[SearchHit]: ...

    async def rename_conversation(self, conversation_id: str, title: str) -> bool:
        """Retitle it (its place in the list, by last activity, stays)."""
        ...

    async def delete_conversation(self, conversation_id: str) -> bool: ...

    # what a conversation holds
    async def messages(self, conversation_id: str) -> list[Message]: ...

    async def runs(self, conversation_id: str) -> list[RunRecord]: ...

    async def branches(self, conversation_id: str) -> list[BranchRecord]:
        """The conversation's branches (versions set aside), oldest first."""
        ...

    async def branch(
        self, conversation_id: str, branch_id: str
    ) -> tuple[BranchRecord, list[RunRecord], list[Frame]] | None:
        """A branch with its runs and the frames they sent that are still
        kept, each oldest first (None: no such branch)."""
        ...

    async def live_runs(
        self, conversation_id: str | None = None, *, parked: bool = True
    ) -> list[RunRecord]:
        """Runs in a `LIVE_STATUSES` state (of one conversation, or all),
        oldest first; without `PARKED` ones unless `parked`."""
        ...

    async def live_conversations(self, *, parked: bool = True) -> list[str]:
        """The conversations with a run in a `LIVE_STATUSES` state (without
        those whose only live runs are `PARKED`, unless `parked`)."""
        ...

    async def frames(self, conversation_id: str, *, max_bytes: int) -> list[Frame]:
        """The newest frames whose texts fit in `max_bytes`, in `seq` order."""
        ...

    async def last_seq(self, conversation_id: str) -> int: ...

    async def write(self, batch: Batch) -> None:
        """Apply one flush atomically."""
        ...

    async def write_all(self, batches: Sequence[Batch]) -> None:
        """Apply flushes of several conversations in one transaction (each
        conversation at most once)."""
        ...

    # files, per conversation
    async def add_file(
        self,
        record: FileRecord,
        *,
        limit: int,
        quota: int | None = None,
        effect: EffectKey | None = None,
    ) -> FileRecord:
        """Keep `record`; `LimitReached` if the conversation has `limit` files,
        `QuotaExceeded` if its owner's files (`file_bytes`) would be over
        `quota` bytes with it. The check and the insert are one transaction
        that excludes every other `add_file` of the same owner with a quota,
        on any instance, so two of them cannot both take the last room.
        With `effect` (a tool's artifact, its id made from the call's key):
        fenced, and a file already kept under that id is returned instead."""
        ...

    async def file_bytes(self, owner: str) -> int:
        """The bytes of files `owner` holds: the sizes of the files of all
        their conversations, added up (a file held twice counts twice)."""
        ...

    async def referenced_blobs(self, digests: Collection[str]) -> set[str]:
        """Which of `digests` (SHA-256 hex) some file record names."""
        ...

    async def files(self, conversation_id: str) -> list[FileRecord]:
        """The conversation's files, oldest first."""
        ...

    async def file(self, conversation_id: str, file_id: str) -> FileRecord | None: ...

    # tool effects
    async def effect(self, key: str) -> str | None:
        """The recorded result (JSON text) of the data-changing call with
        idempotency key `key`; None if it never took effect."""
        ...

    # notes, per owner
    async def add_note(
        self,
        owner: str,
        text: str,
        saved_at: float,
        *,
        limit: int,
        effect: EffectKey | None = None,
    ) -> NoteRecord:
        """With `effect`: fenced, and at most once per key (a second call
        returns the first one's note)."""
        ...

    async def notes(self, owner: str) -> list[NoteRecord]: ...

    async def delete_note(
        self, owner: str, note_id: int, *, effect: EffectKey | None = None
    ) -> NoteRecord | None: ...

    # sign-ins (browsers), and what each user keeps
    async def add_signin(self, record: SignInRecord, *, forget_before: float) -> None:
        """Keep a new sign-in; delete those that expired or were revoked
        before `forget_before`."""
        ...

    async def signin(self, signin_id: str) -> SignInRecord | None: ...

    async def live_signins(
        self, now: float, *, user: str | None = None, limit: int = 1000
    ) -> list[SignInRecord]:
        """Sign-ins neither revoked nor expired at `now` (of one user, or
        all), newest first."""
        ...

    async def revoke_signin(self, signin_id: str, at: float) -> SignInRecord | None:
        """Revoke a live sign-in; None if there is no such live one."""
        ...

    async def revoke_signins(self, user: str, at: float) -> list[str]:
        """Revoke all of a user's live sign-ins; their ids."""
        ...

    async def touch_signin(self, signin_id: str, at: float) -> None:
        """Note that the sign-in was used at `at`."""
        ...

    async def usage(self) -> list[UsageRecord]:
        """Per owner of anything: conversations, runs and file bytes, by user."""
        ...

    # tools a user allowed to run without asking (`chat/tool_grants.py`)
    async def tool_grants(self, user: str) -> list[ToolGrantRecord]:
        """The user's grants, oldest first."""
        ...

    async def add_tool_grant(self, record: ToolGrantRecord) -> None: ...

    async def revoke_tool_grant(
        self, user: str, grant_id: str
    ) -> ToolGrantRecord | None:
        """Delete the user's grant `grant_id`; None if they have none so named."""
        ...

    # custom instructions (`chat/instructions.py`); empty text clears them
    async def user_instructions(self, user: str) -> str:
        """The user's own instructions, for all their conversations."""
        ...

    async def set_user_instructions(self, user: str, text: str, at: float) -> None: ...

    async def set_conversation_instructions(
        self, conversation_id: str, text: str
    ) -> bool:
        """False: there is no such conversation."""
        ...

    async def run_instructions(
        self, user: str, conversation_id: str
    ) -> tuple[str, str]:
        """The user's and the conversation's, together, for a run's start."""
        ...

    # read-only share links (`transport/shares.py`); deleted with their conversation
    async def add_share(self, record: ShareRecord) -> None: ...

    async def share(self, share_id: str) -> ShareRecord | None: ...

    async def shares(self, conversation_id: str) -> list[ShareRecord]:
        """The conversation's shares, newest first."""
        ...

    async def delete_share(self, share_id: str, owner: str) -> bool:
        """False: `owner` has no share so named."""
        ...
