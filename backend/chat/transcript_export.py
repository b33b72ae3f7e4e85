"""A conversation written out: the JSON export (a versioned document that
`transcript_import` reads back) and a Markdown transcript for people.

The JSON holds what the store keeps: the conversation's summary, its
messages as the model saw them (tool calls, tool results with their
status), its runs' records without their checkpoints, and its files'
names and sizes (not their contents). The Markdown is built from the same
values: the title, the date, then each message in order, tool calls as
fenced JSON and tool results cut to `RESULT_CHARS`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from backend.store.records import ConversationRecord, FileRecord, RunRecord
from backend.transcript import Message, ToolCall

EXPORT_VERSION = 1
"""`loopwire_export` in every document this server writes (and reads)."""
RESULT_CHARS = 2000
"""The most of one tool result a Markdown transcript shows."""
UNTITLED = "Untitled conversation"
FILENAME_CHARS = 80
RUN_FIELDS = {
    "id",
    "strategy",
    "status",
    "request",
    "steps",
    "usage",
    "started_at",
    "ended_at",
}
HEADINGS = {"user": "User", "assistant": "Assistant", "system": "Note"}


def export_document(
    record: ConversationRecord,
    messages: Sequence[Message],
    runs: Sequence[RunRecord],
    files: Sequence[FileRecord],
) -> dict[str, Any]:
    """The JSON export of one conversation."""
    return {
        "loopwire_export": EXPORT_VERSION,
        "conversation": record.model_dump(
            mode="json", include={"id", "title", "created_at", "updated_at"}
        ),
        "messages": [exported_message(m) for m in messages],
        "runs": [run.model_dump(mode="json", include=RUN_FIELDS) for run in runs],
        "files": [
            file.model_dump(mode="json", include={"name", "media_type", "size"})
            for file in files
        ],
    }


def exported_message(message: Message) -> dict[str, Any]:
    """A message as the store keeps it (`reasoning` is never stored)."""
    return message.model_dump(mode="json", exclude={"reasoning"})


def markdown(record: ConversationRecord, messages: Sequence[Message]) -> str:
    """A readable transcript of the conversation."""
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.created_at))
    title = " ".join(record.title.split()) or UNTITLED  # one line, as a heading
    parts = [f"# {title}", f"Started {started}."]
    for message in messages:
        parts.extend(_message_blocks(message))
    return "\n\n".join(parts) + "\n"


def _message_blocks(message: Message) -> list[str]:
    if message.role == "tool":
        return [_result_block(message)]
    blocks = [f"## {HEADINGS[message.role]}"]
    if message.content:
        blocks.append(message.content)
    blocks.extend(_call_block(call) for call in message.tool_calls)
    return blocks


def _call_block(call: ToolCall) -> str:
    try:
        shown = json.dumps(json.loads(call.arguments), indent=2, ensure_ascii=False)
        language = "json"
    except ValueError:
        shown, language = call.arguments, ""
    return f"**Tool call** `{call.name}` ({call.id})\n\n{fenced(shown, language)}"


def _result_block(message: Message) -> str:
    status = message.status or "ok"
    head = f"**Result** of `{message.name}` ({message.tool_call_id}): {status}"
    content = message.content or ""
    shown = content[:RESULT_CHARS]
    block = f"{head}\n\n{fenced(shown)}"
    if len(content) > RESULT_CHARS:
        block += (
            f"\n\n_(cut: the first {RESULT_CHARS:,} of {len(content):,} characters)_"
        )
    return block


def fenced(text: str, language: str = "") -> str:
    """`text` in a code fence longer than any run of backticks it holds."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def filename(title: str, extension: str) -> str:
    """A file name for a download of the conversation titled `title`:
    letters, digits, `-`, `_` and `.` only (the rest as `-`), never empty."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", title).strip("-.")[:FILENAME_CHARS]
    return f"{safe.strip('-.') or 'conversation'}.{extension}"
