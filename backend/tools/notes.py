"""Notes: a small demo of tools that change things.

`save_note` changes data and asks the user first; `delete_note` changes data;
`list_notes` only reads. Notes belong to the conversation's owner, not to one
session: with a database (the default) they are kept there and survive
restarts; `MemoryNotebook` keeps them in memory for a server without one.

The two that change data do it exactly once per call: each passes its
call's idempotency key (and the conversation's fencing epoch) to the
notebook, which applies a key at most once and returns the first result to
a second execution; their `reconcile` asks the notebook whether a call cut
off by a crash took effect.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, Field

from backend.errors import ToolError
from backend.store.base import EffectKey, LimitReached
from backend.store.records import NoteRecord
from backend.tools.base import Reconciled, Tool, ToolContext, ToolEffect
from backend.tools.effects import effect_key
from backend.tools.notes_skill import DeleteNoteSkill, ListNotesSkill, SaveNoteSkill

MAX_NOTES_PER_OWNER = 200


class Notebook(Protocol):
    """Where notes live (the `Store` is one). With an `EffectKey`, a change
    is applied at most once per key (fenced by the conversation's epoch)."""

    async def add_note(
        self,
        owner: str,
        text: str,
        saved_at: float,
        *,
        limit: int,
        effect: EffectKey | None = None,
    ) -> NoteRecord: ...

    async def notes(self, owner: str) -> list[NoteRecord]: ...

    async def delete_note(
        self, owner: str, note_id: int, *, effect: EffectKey | None = None
    ) -> NoteRecord | None: ...

    async def effect(self, key: str) -> str | None:
        """The recorded result (JSON) of the change made under `key`."""
        ...


@dataclass
class _OwnerNotes:
    next_id: int = 1
    notes: dict[int, NoteRecord] = field(default_factory=dict)


class MemoryNotebook:
    """Notes per owner in server memory, numbered from 1."""

    def __init__(self) -> None:
        self._owners: dict[str, _OwnerNotes] = {}
        self._effects: dict[str, str] = {}

    async def add_note(
        self,
        owner: str,
        text: str,
        saved_at: float,
        *,
        limit: int,
        effect: EffectKey | None = None,
    ) -> NoteRecord:
        if effect is not None and effect.key in self._effects:
            return NoteRecord.model_validate_json(self._effects[effect.key])
        book = self._owners.setdefault(owner, _OwnerNotes())
        if len(book.notes) >= limit:
            raise LimitReached(f"{limit} notes are saved already; delete some first")
        note = NoteRecord(id=book.next_id, text=text, saved_at=saved_at)
        book.notes[note.id] = note
        book.next_id += 1
        self._record(effect, note)
        return note

    async def notes(self, owner: str) -> list[NoteRecord]:
        book = self._owners.get(owner)
        return list(book.notes.values()) if book else []

    async def delete_note(
        self, owner: str, note_id: int, *, effect: EffectKey | None = None
    ) -> NoteRecord | None:
        if effect is not None and effect.key in self._effects:
            return NoteRecord.model_validate_json(self._effects[effect.key])
        book = self._owners.get(owner)
        note = book.notes.pop(note_id, None) if book else None
        if note is not None:
            self._record(effect, note)
        return note

    async def effect(self, key: str) -> str | None:
        return self._effects.get(key)

    def _record(self, effect: EffectKey | None, note: NoteRecord) -> None:
        if effect is not None:
            self._effects[effect.key] = note.model_dump_json()


class SaveNoteArgs(BaseModel):
    text: str = Field(min_length=1, max_length=2000, description="What to remember.")


class ListNotesArgs(BaseModel):
    pass


class DeleteNoteArgs(BaseModel):
    id: int = Field(ge=1, description="The number of the note to delete.")


class _NoteActions:
    """What the note tools do, over one `notebook`."""

    def __init__(self, notebook: Notebook, clock: Callable[[], float]) -> None:
        self.notebook = notebook
        self.clock = clock

    async def save_note(self, args: SaveNoteArgs, ctx: ToolContext) -> dict[str, Any]:
        saved_at = round(self.clock(), 3)
        try:
            note = await self.notebook.add_note(
                ctx.owner,
                args.text.strip(),
                saved_at,
                limit=MAX_NOTES_PER_OWNER,
                effect=effect_key(ctx, "save_note"),
            )
        except LimitReached as exc:
            raise ToolError(str(exc)) from exc
        return {"saved": note.model_dump()}

    async def list_notes(self, args: ListNotesArgs, ctx: ToolContext) -> dict[str, Any]:
        notes = [note.model_dump() for note in await self.notebook.notes(ctx.owner)]
        return {"count": len(notes), "notes": notes}

    async def delete_note(
        self, args: DeleteNoteArgs, ctx: ToolContext
    ) -> dict[str, Any]:
        note = await self.notebook.delete_note(
            ctx.owner, args.id, effect=effect_key(ctx, "delete_note")
        )
        if note is None:
            kept = await self.notebook.notes(ctx.owner)
            ids = ", ".join(str(n.id) for n in kept) or "none"
            raise ToolError(f"there is no note #{args.id}; existing notes: {ids}")
        return {"deleted": note.model_dump()}

    def reconcile(self, verb: str) -> Callable[[ToolContext], Awaitable[Reconciled]]:
        """Whether a call cut off by a crash took effect; its result under `verb`."""

        async def took_effect(ctx: ToolContext) -> Reconciled:
            key = ctx.idempotency_key
            done = await self.notebook.effect(key) if key is not None else None
            if done is None:
                return Reconciled(took_effect=False)
            note = NoteRecord.model_validate_json(done)
            return Reconciled(took_effect=True, result={verb: note.model_dump()})

        return took_effect


def note_tools(
    notebook: Notebook, clock: Callable[[], float] = time.time
) -> list[Tool[Any]]:
    """`save_note`, `list_notes` and `delete_note` over `notebook`."""
    act = _NoteActions(notebook, clock)
    return [
        Tool(
            "save_note",
            "Save a note the user asked you to remember. Asks the user for approval.",
            SaveNoteArgs,
            act.save_note,
            ToolEffect(requires_approval=True, untrusted_result=False),
            offline=SaveNoteSkill(),
            summary="Saves a note for you to find later; asks you first.",
            reconcile=act.reconcile("saved"),
        ),
        Tool(
            "list_notes",
            "List the notes the user saved (in any conversation).",
            ListNotesArgs,
            act.list_notes,
            # every note was approved by the user when it was saved
            ToolEffect(read_only=True, idempotent=True, untrusted_result=False),
            offline=ListNotesSkill(),
            summary="Lists the notes you saved.",
        ),
        Tool(
            "delete_note",
            "Delete a saved note by its number. Asks the user for approval.",
            DeleteNoteArgs,
            act.delete_note,
            ToolEffect(untrusted_result=False),  # asks: it deletes
            offline=DeleteNoteSkill(),
            summary="Deletes one of your saved notes; asks you first.",
            reconcile=act.reconcile("deleted"),
        ),
    ]
