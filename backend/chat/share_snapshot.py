"""The snapshot a share link shows: a conversation's messages as stored,
reduced to what its page shows.

Kept: each user message (interjections too) and each assistant message's
text; each tool call as its name, its arguments cut to `ARGUMENT_CHARS`,
and the status of its result. Left out: system messages (the prompt),
tool results' contents, the model's reasoning, and empty assistant turns.
Files are named, never copied."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from backend.store.records import FileRecord
from backend.store.share_records import SharedCall, SharedMessage, Snapshot
from backend.transcript import Message

ARGUMENT_CHARS = 200
"""The most of a tool call's arguments (JSON text) a share shows."""
NOT_RUN = "not_run"


def snapshot(messages: Sequence[Message], files: Sequence[FileRecord]) -> Snapshot:
    statuses = {
        message.tool_call_id: message.status or "ok"
        for message in messages
        if message.role == "tool" and message.tool_call_id
    }
    shown = [_shown(message, statuses) for message in messages]
    return Snapshot(
        messages=tuple(item for item in shown if item is not None),
        files=tuple(file.name for file in files),
    )


def _shown(message: Message, statuses: Mapping[str, str]) -> SharedMessage | None:
    if message.role == "user":
        return SharedMessage(role="user", text=message.content or "")
    if message.role != "assistant":
        return None
    calls = tuple(
        SharedCall(
            name=call.name,
            arguments=short(call.arguments),
            status=statuses.get(call.id, NOT_RUN),
        )
        for call in message.tool_calls
    )
    if not message.content and not calls:
        return None
    return SharedMessage(role="assistant", text=message.content or "", tools=calls)


def short(text: str) -> str:
    """`text` cut to `ARGUMENT_CHARS`, an ellipsis marking the cut."""
    if len(text) <= ARGUMENT_CHARS:
        return text
    return text[: ARGUMENT_CHARS - 1] + "\u2026"
