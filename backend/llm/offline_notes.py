"""The offline model's notes demo: save, list and delete notes.

Note requests come before every other request ("remember that 2+2 is 4" is a
note, not a sum), so `offline.py` asks `decide_notes(state)` first and falls
back to `decide(state)` when the user asked for something else.

Recognised, case-insensitively, optionally after "please", "can you", …:

- save: "remember (that|to|this:) …", "note that …", "note down …", "note: …",
  "note to self: …", "save/make/take/add a note (that|of|saying|:) …",
  "jot down …", "write down …". A bare "remember" or "make a note" asks what
  to remember; when no tool ran in between (the reply asked in text), the next
  message is the note — unless it is a time question, a unit conversion, small
  talk or another note request. (Arithmetic-looking text still counts: notes
  are full of codes like "45-12".)
- delete: "forget/delete/remove/erase note (#|number) 2", "delete #2". Without
  a number it asks which note; a bare number ("2", "#2") answers.
- list: "what do you remember?", "list/show (me) (all) (my) notes", "what
  notes do I have", "do I have any notes", "how many notes", "my notes".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from backend.llm.offline_decisions import (
    REQUEST_INPUT,
    Answer,
    Decision,
    Declined,
    Failure,
    NeedInput,
    NeedTool,
    RunState,
    ToolResult,
    unreadable,
)
from backend.llm.offline_intents import Arithmetic, Unknown, detect_intent

SAVE = "save_note"
LIST = "list_notes"
DELETE = "delete_note"

ASK_NOTE = "What should I remember?"
ASK_NUMBER = "Which note should I delete? Tell me its number."


# --- what the user asks --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SaveNote:
    text: str  # "" until the user says what to remember


@dataclass(frozen=True, slots=True)
class ListNotes:
    pass


@dataclass(frozen=True, slots=True)
class DeleteNote:
    id: int | None  # None until the user says which note


NoteIntent = SaveNote | ListNotes | DeleteNote

_FLAGS = re.IGNORECASE | re.DOTALL
_LEAD = (
    r"^[\s,.!]*(?:(?:please|pls|ok(?:ay)?|hey|so|and|also|now|oh)\b[\s,!]*)*"
    r"(?P<ask>(?:can|could|would|will)\s+you\s+)?"
    r"(?:i\s+(?:want|need)\s+you\s+to\s+)?(?:please\s+)?"
)
_SAVE = re.compile(
    _LEAD + r"(?:remember|note\s+to\s+self|note(?=\s*:|\s+(?:that|down)\b)"
    r"|(?:jot|write)\s+down"
    r"|(?:save|make|take|add|write|keep|create)\s+(?:(?:a|an|this|the|new|me)\s+)*"
    r"note)\b"
    r"(?:\s*[:\-\u2013\u2014]|\s+(?:that|to|of|saying|down)\b(?:\s*:)?"
    r"|\s+this\s*(?::|$))?"
    r"\s*(?P<text>.*)$",
    _FLAGS,
)
_DELETE = re.compile(
    _LEAD + r"(?:forget|delete|remove|erase|drop|discard)\s+"
    r"(?:(?:about|a|the|that|this|one|my|your|of|all)\s+)*"
    r"(?:notes?\b\s*(?:(?:number|no\.|num\.?)\s*)?#?\s*(?P<id>\d+)?"
    r"|#\s*(?P<hash>\d+))",
    _FLAGS,
)
_LIST = re.compile(
    r"\bwhat\s+(?:else\s+)?(?:do|did)\s+you\s+remember\b"
    r"|\bwhat\s+have\s+you\s+(?:remembered|saved|noted)\b"
    r"|\bwhat\s+did\s+i\s+(?:ask|tell)\s+you\s+to\s+remember\b"
    r"|\b(?:list|show|display|read|see|view|give|tell)\b"
    r"(?:\s+(?:me|us|all|of|my|the|your|saved))*\s+notes\b"
    r"|\b(?:what|any|how\s+many)\s+notes\b"
    r"|^\W*(?:(?:all|my|saved)\s+)*notes\W*$",
    _FLAGS,
)
_BARE_NUMBER = re.compile(r"^\W*(?:note\s*)?#?\s*(?P<id>\d+)\W*$", _FLAGS)
_NUMBER = re.compile(r"\d+")
_PLEASE = re.compile(r"[\s,]*\bplease$", re.IGNORECASE)
_QUOTES = {'"': '"', "“": "”", "'": "'", "‘": "’"}  # noqa: RUF001


def note_request(requests: Sequence[str]) -> NoteIntent | None:
    """The note request in the last message, or the one it completes."""
    if not requests:
        return None
    intent = detect_note(requests[-1])
    if intent is None and len(requests) > 1:
        return _completed(detect_note(requests[-2]), requests[-1])
    return intent


def detect_note(text: str) -> NoteIntent | None:
    save = _SAVE.match(text)
    if save is not None:
        return SaveNote(clean_note(save["text"], question=bool(save["ask"])))
    delete = _DELETE.match(text)
    if delete is not None:
        number = delete["id"] or delete["hash"]
        return DeleteNote(int(number) if number else None)
    return ListNotes() if _LIST.search(text) else None


def clean_note(text: str, *, question: bool = False) -> str:
    """What to remember, without the request's trailing punctuation or quotes."""
    ends = " \t\n.!?" if question else " \t\n.!"
    text = _PLEASE.sub("", text.strip().rstrip(ends)).rstrip(ends)
    if len(text) > 1 and _QUOTES.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    return text if any(c.isalnum() for c in text) else ""


def _completed(previous: NoteIntent | None, text: str) -> NoteIntent | None:
    """`text` as the answer to the question a bare note request asked."""
    match previous:
        case SaveNote(text="") if isinstance(detect_intent(text), Unknown | Arithmetic):
            note = clean_note(text)
            return SaveNote(note) if note else None
        case DeleteNote(id=None):
            number = _BARE_NUMBER.match(text)
            return DeleteNote(int(number["id"])) if number else None
    return None


# --- what comes next -----------------------------------------------------------


def decide_notes(state: RunState) -> Decision | None:
    """The next step for a note request; None when the user asked something else."""
    match note_request(state.requests):
        case SaveNote(text=text):
            return _save(text, state)
        case ListNotes():
            return _list(state)
        case DeleteNote(id=note_id):
            return _delete(note_id, state)
    return None


def _save(text: str, state: RunState) -> Decision:
    result = state.latest(SAVE)
    if result is not None:
        return _outcome(result, "save the note", "save it", _saved)
    asked = state.latest(REQUEST_INPUT)
    if not text and asked is not None:
        if asked.failed:
            return _unanswered("save a note", "what to remember", asked)
        text = clean_note(asked.text)
    if not text:
        return NeedInput(ASK_NOTE, "what to remember", SAVE, "save a note")
    return NeedTool(SAVE, {"text": text}, f"save the note {_quoted(text, 60)}")


def _list(state: RunState) -> Decision:
    result = state.latest(LIST)
    if result is None:
        return NeedTool(LIST, {}, "list your notes")
    return _outcome(result, "list your notes", "list your notes", _listed)


def _delete(note_id: int | None, state: RunState) -> Decision:
    asked = state.latest(REQUEST_INPUT)
    if note_id is None and asked is not None:
        if asked.failed:
            return _unanswered("delete a note", "which note to delete", asked)
        number = _NUMBER.search(asked.text)
        if number is None:
            return Failure(
                f"I couldn't delete a note: “{asked.text}” has no note number. "
                "Ask me to “list my notes”, then “forget note 2”, for example.",
                "The user's answer has no note number in it.",
            )
        note_id = int(number.group())
    if note_id is None:
        return NeedInput(ASK_NUMBER, "which note to delete", DELETE, "delete a note")
    result = state.latest(DELETE)
    if result is None:
        return NeedTool(DELETE, {"id": note_id}, f"delete note #{note_id}")
    which = f"delete note #{note_id}"
    return _outcome(result, which, which, _deleted)


def _unanswered(goal: str, missing: str, asked: ToolResult) -> Failure:
    return Failure(
        f"I couldn't {goal}: I asked {missing}, but got no answer ({asked.error}).",
        f"The question went unanswered: {asked.error}.",
    )


def _outcome(
    result: ToolResult,
    action: str,
    declined: str,
    read: Callable[[dict[str, Any]], Answer | None],
) -> Decision:
    """What a note tool's result means: the answer, or what was not done."""
    match result.status:
        case None:
            return read(result.data()) or unreadable(result)
        case "rejected":
            why = result.error.splitlines()[0].rstrip(".")
            return Declined(
                f"OK — I didn't {declined}, since you declined.",
                f"{why[:1].upper()}{why[1:]}.",
            )
        case "blocked":
            return Failure(
                f"I couldn't {action}: this session is read-only. "
                "Turn read-only off and ask again.",
                f"The {result.name} tool was blocked: the session is read-only.",
            )
    return Failure(
        f"I couldn't {action}: {result.error}.",
        f"The {result.name} tool reported an error: {result.error}.",
    )


def _saved(data: dict[str, Any]) -> Answer | None:
    note = _note(data.get("saved"))
    if note is None:
        return None
    number, text = note
    return Answer(
        f"Saved note #{number}: “{text}”.", f"The {SAVE} tool saved note #{number}."
    )


def _deleted(data: dict[str, Any]) -> Answer | None:
    note = _note(data.get("deleted"))
    if note is None:
        return None
    number, text = note
    return Answer(
        f"Deleted note #{number}: “{text}”.",
        f"The {DELETE} tool deleted note #{number}.",
    )


def _listed(data: dict[str, Any]) -> Answer | None:
    """A Markdown list of the notes, each under its number (which `forget` takes).

    Numbers can have gaps after a delete, and Markdown renumbers ordered
    lists, so the list is a bulleted one that shows each note's own number.
    """
    raw = data.get("notes")
    if not isinstance(raw, list):
        return None
    notes = [note for note in map(_note, raw) if note is not None]
    if len(notes) != len(raw):
        return None
    if not notes:
        return Answer("You have no notes yet.", f"The {LIST} tool returned no notes.")
    count = f"{len(notes)} note{'' if len(notes) == 1 else 's'}"
    lines = "\n".join(f"- #{number}: {text}" for number, text in notes)
    return Answer(f"You have {count}:\n{lines}", f"The {LIST} tool returned {count}.")


def _note(value: Any) -> tuple[int, str] | None:
    """`(id, text)` of a note in a tool result, the text on one line."""
    if not isinstance(value, dict):
        return None
    number, text = value.get("id"), value.get("text")
    if not isinstance(number, int) or not isinstance(text, str):
        return None
    return number, " ".join(text.split())


def _quoted(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return f"“{text if len(text) <= limit else text[: limit - 1].rstrip() + '…'}”"
