"""A read-only share link as the store keeps it: the snapshot of a
conversation taken when it was shared (`chat/share_snapshot.py` builds it).

The snapshot holds what the chat page shows of a conversation, and no more:
the user's and the assistant's words, and each tool call as its name, its
arguments cut short and how it ended; never the system prompt, a tool's
output, or a file's contents (files are named)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SharedCall(_Record):
    """A tool call as a share shows it."""

    name: str
    arguments: str
    """The call's arguments as JSON text, cut to `ARGUMENT_CHARS`."""
    status: str
    """How it ended (`ok`, `failed`, …; `not_run` when no result was kept)."""


class SharedMessage(_Record):
    role: Literal["user", "assistant"]
    text: str
    tools: tuple[SharedCall, ...] = ()


class Snapshot(_Record):
    """What the `messages` column holds."""

    messages: tuple[SharedMessage, ...] = ()
    files: tuple[str, ...] = ()
    """The names of the files the conversation had."""


class ShareRecord(_Record):
    id: str
    """The link's secret (`secrets.token_urlsafe(32)`)."""
    conversation_id: str
    owner: str
    title: str
    snapshot: Snapshot
    created_at: float
