"""Notes: a small demo of tools that change things.

`save_note` changes data and asks the user first; `delete_note` changes data;
`list_notes` only reads. Notes belong to the session they were saved in and
live in server memory (they do not survive a restart).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from backend.errors import ToolError
from backend.tools.base import Tool, ToolContext, ToolEffect
from backend.tools.notes_skill import DeleteNoteSkill, ListNotesSkill, SaveNoteSkill

MAX_NOTES_PER_SESSION = 200


@dataclass
class _SessionNotes:
    next_id: int = 1
    notes: dict[int, dict[str, Any]] = field(default_factory=dict)


class NoteStore:
    """Notes per session, numbered from 1."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._sessions: dict[str, _SessionNotes] = {}
        self._clock = clock

    def add(self, session_id: str, text: str) -> dict[str, Any]:
        book = self._sessions.setdefault(session_id, _SessionNotes())
        if len(book.notes) >= MAX_NOTES_PER_SESSION:
            limit = MAX_NOTES_PER_SESSION
            raise ToolError(
                f"this session already has {limit} notes; delete some first"
            )
        note = {"id": book.next_id, "text": text, "saved_at": round(self._clock(), 3)}
        book.notes[book.next_id] = note
        book.next_id += 1
        return dict(note)

    def all(self, session_id: str) -> list[dict[str, Any]]:
        book = self._sessions.get(session_id)
        return [dict(n) for n in book.notes.values()] if book else []

    def delete(self, session_id: str, note_id: int) -> dict[str, Any]:
        book = self._sessions.get(session_id)
        if book is None or note_id not in book.notes:
            ids = ", ".join(str(i) for i in (book.notes if book else ())) or "none"
            raise ToolError(f"there is no note #{note_id}; existing notes: {ids}")
        return book.notes.pop(note_id)


class SaveNoteArgs(BaseModel):
    text: str = Field(min_length=1, max_length=2000, description="What to remember.")


class ListNotesArgs(BaseModel):
    pass


class DeleteNoteArgs(BaseModel):
    id: int = Field(ge=1, description="The number of the note to delete.")


def note_tools(store: NoteStore) -> list[Tool[Any]]:
    """`save_note`, `list_notes` and `delete_note` over `store`."""

    async def save_note(args: SaveNoteArgs, ctx: ToolContext) -> dict[str, Any]:
        return {"saved": store.add(ctx.session_id, args.text.strip())}

    async def list_notes(args: ListNotesArgs, ctx: ToolContext) -> dict[str, Any]:
        notes = store.all(ctx.session_id)
        return {"count": len(notes), "notes": notes}

    async def delete_note(args: DeleteNoteArgs, ctx: ToolContext) -> dict[str, Any]:
        return {"deleted": store.delete(ctx.session_id, args.id)}

    return [
        Tool(
            "save_note",
            "Save a note the user asked you to remember. Asks the user for approval.",
            SaveNoteArgs,
            save_note,
            ToolEffect(requires_approval=True),
            offline=SaveNoteSkill(),
        ),
        Tool(
            "list_notes",
            "List the notes saved in this conversation.",
            ListNotesArgs,
            list_notes,
            ToolEffect(read_only=True, idempotent=True),
            offline=ListNotesSkill(),
        ),
        Tool(
            "delete_note",
            "Delete a saved note by its number.",
            DeleteNoteArgs,
            delete_note,
            ToolEffect(idempotent=False),
            offline=DeleteNoteSkill(),
        ),
    ]
