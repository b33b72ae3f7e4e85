"""The stored records: conversations, runs, files, notes and held inputs,
as the `Store` (`store/base.py`) returns and takes them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.transcript import Message, Usage

RunStatus = Literal[
    "running",
    "waiting",
    "suspended",
    "finished",
    "max_steps",
    "budget",
    "stopped",
    "rejected",
    "timeout",
    "error",
    "interrupted",
]
"""`running` / `waiting` (for the user) while the run lives; `suspended` when
a shutdown parked it at a phase boundary; otherwise how it ended (a
`CompletionReason`), or `interrupted` when the process died mid-phase."""

LIVE_STATUSES: tuple[RunStatus, ...] = ("running", "waiting", "suspended")
"""Runs in these states were not ended: a server that loads their
conversation continues or closes them."""
PARKED = "a waiting run whose conversation was let go cleanly"
"""Such a run (parked to make room, or by a shutdown) needs nobody until
its user comes back: it goes on when its conversation is next opened, not
when a server starts or an owner dies (`parked=False` leaves it out)."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ConversationRecord(_Record):
    id: str
    owner: str
    title: str = ""
    created_at: float
    updated_at: float
    settings: dict[str, Any] = Field(default_factory=dict)
    origin: str = "unknown"
    """The kind of client that started it (`schema.conversations`)."""


InputMode = Literal["queue", "steer", "interrupt"]


class PendingInputRecord(_Record):
    """A message sent while a run worked, kept until it is used: run after
    the run (`queue`; `interrupt` first), or told to the run at its next
    phase boundary (`steer`) (`chat/inbox.py`)."""

    id: str
    mode: InputMode
    message: dict[str, Any]
    """The `chat` message, as JSON."""
    position: float
    """Order among the conversation's pending inputs (lowest first)."""
    created_at: float


class RunRecord(_Record):
    """A run as stored: its outcome so far and its latest checkpoint."""

    id: str
    conversation_id: str
    strategy: str
    status: RunStatus
    request: str
    """The user's message that started the run."""
    steps: int = 0
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    """The model its calls went to (the client's choice, or the server's)."""
    cost_usd: float | None = None
    """What its usage cost by the price table; None: the model has no price."""
    started_at: float
    ended_at: float | None = None
    active_ms: float = 0.0
    error: str | None = None
    state: str
    """The `RunState` checkpoint, as JSON (with the execution trace)."""


FileOrigin = Literal["upload", "artifact"]


class FileRecord(_Record):
    """A conversation's file: an upload, or a tool's artifact."""

    id: str
    conversation_id: str
    name: str
    """Cleaned (`backend.files.kinds.clean_name`); never a path."""
    media_type: str
    size: int
    sha256: str
    """Where its content is (`backend.files.blobs.BlobStore`)."""
    origin: FileOrigin
    description: str = ""
    run_id: str | None = None
    """The run whose tool made it (artifacts)."""
    created_at: float


class NoteRecord(_Record):
    id: int
    """Numbered from 1 per owner."""
    text: str
    saved_at: float


class Page(_Record):
    """One page of conversations, newest first; `next` continues it."""

    items: list[ConversationRecord]
    next: str | None = None


class BranchRecord(_Record):
    """A version of a conversation set aside by an edit or a switch
    (`schema.branches`)."""

    id: str
    parent: str | None
    """The branch it forks from; None: from the conversation as it stands."""
    fork_at: int
    """The position in the history where its messages begin."""
    messages: list[Message]
    created_at: float
