"""Rows ↔ records: what `SqlStore` writes for a record and reads back, and
the cursor of a page of conversations."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import CursorResult, Row

from backend.bounded_json import load_json
from backend.errors import InvalidMessage
from backend.store.records import ConversationRecord, RunRecord
from backend.transcript import Frame, Message, ToolCall, ToolResultMeta

CURSOR_MAX_CHARS = 200
"""A cursor this server wrote is about 80 characters."""


def rowcount(result: CursorResult[Any]) -> int:
    return int(result.rowcount or 0)


def conversation_record(row: Row[Any]) -> ConversationRecord:
    values = row._asdict()
    values.pop("epoch", None)
    return ConversationRecord.model_validate(values)


def run_record(row: Row[Any]) -> RunRecord:
    values = row._asdict()
    values.pop("epoch", None)
    values.pop("branch_id", None)
    return RunRecord.model_validate(values)


def run_row(run: RunRecord, epoch: int) -> dict[str, Any]:
    values = run.model_dump()
    values["usage"] = run.usage.model_dump()
    values["epoch"] = epoch
    return values


def frame_row(conversation_id: str, frame: Frame, epoch: int) -> dict[str, Any]:
    return {
        "conversation_id": conversation_id,
        "seq": frame.seq,
        "run_id": frame.run_id,
        "text": frame.text,
        "epoch": epoch,
    }


def message_row(conversation_id: str, position: int, m: Message) -> dict[str, Any]:
    calls = [c.model_dump() for c in m.tool_calls] if m.tool_calls else None
    return {
        "conversation_id": conversation_id,
        "position": position,
        "role": m.role,
        "content": m.content,
        "tool_calls": calls,
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "status": m.meta.status if m.meta else None,
        "error": m.meta.error if m.meta else None,
    }


def message(row: Row[Any]) -> Message:
    calls: Sequence[dict[str, Any]] = row.tool_calls or ()
    meta = (
        ToolResultMeta(status=row.status, error=row.error)
        if row.status is not None
        else None
    )
    return Message(
        role=row.role,
        content=row.content,
        tool_calls=tuple(ToolCall(**c) for c in calls),
        tool_call_id=row.tool_call_id,
        name=row.name,
        meta=meta,
    )


def encode_cursor(record: ConversationRecord) -> str:
    raw = json.dumps([record.updated_at, record.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """A page's cursor back to its key; `ValueError` for anything this server
    did not write (too long, not base64, not a `[number, id]` pair)."""
    try:
        if len(cursor) > CURSOR_MAX_CHARS or not cursor.isascii():
            raise ValueError("not a cursor of this server")
        padded = cursor + "=" * (-len(cursor) % 4)
        pair = load_json(base64.urlsafe_b64decode(padded))
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError("not a [time, id] pair")
        updated_at, last_id = pair
        if isinstance(updated_at, bool) or not isinstance(updated_at, int | float):
            raise ValueError("not a time")
        if not isinstance(last_id, str):
            raise ValueError("not an id")
        return float(updated_at), last_id
    except (ValueError, InvalidMessage) as exc:
        raise ValueError(f"invalid cursor {cursor[:40]!r}") from exc
