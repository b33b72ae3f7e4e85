"""What the notes tools teach the offline model: "remember that …", "list my
notes", "forget note 2" — with a question when the note or its number is
missing — and how to word what the tools return.

Note requests come before every other request ("remember that 2+2 is 4" is
a note, not a sum). Recognised, case-insensitively, optionally after
"please", "can you", …:

- save: "remember (that|to|this:) …", "note that …", "note down …", "note: …",
  "note to self: …", "save/make/take/add a note (that|of|saying|:) …",
  "jot down …", "write down …". A bare "remember" or "make a note" asks what
  to remember.
- delete: "forget/delete/remove/erase note (#|number) 2", "delete #2".
  Without a number it asks which note.
- list: "what do you remember?", "list/show (me) (all) (my) notes", "what
  notes do I have", "do I have any notes", "how many notes", "my notes".
"""

from __future__ import annotations

import re
from typing import Any

from backend.llm.offline_skill import (
    BaseSkill,
    Call,
    Capability,
    Need,
    Question,
    Reply,
)

SAVE = "save_note"
LIST = "list_notes"
DELETE = "delete_note"

ASK_NOTE = "What should I remember?"
ASK_NUMBER = "Which note should I delete? Tell me its number."

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
_NUMBER = re.compile(r"\d+")
_PLEASE = re.compile(r"[\s,]*\bplease$", re.IGNORECASE)
_QUOTES = {'"': '"', "“": "”", "'": "'", "‘": "’"}  # noqa: RUF001


def clean_note(text: str, *, question: bool = False) -> str:
    """What to remember, without the request's trailing punctuation or quotes."""
    ends = " \t\n.!?" if question else " \t\n.!"
    text = _PLEASE.sub("", text.strip().rstrip(ends)).rstrip(ends)
    if len(text) > 1 and _QUOTES.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    return text if any(c.isalnum() for c in text) else ""


class SaveNoteSkill(BaseSkill):
    priority = 10
    capabilities = (
        Capability(
            "keep notes",
            ("remember that …", "list my notes", "forget note 1"),
            qualifier=", with tools on",
        ),
    )

    def match(self, text: str) -> Need | None:
        save = _SAVE.match(text)
        if save is None:
            return None
        note = clean_note(save["text"], question=bool(save["ask"]))
        return _save(note) if note else _ASK_NOTE

    def complete(self, text: str, answer: str) -> Need | Reply | None:
        note = clean_note(answer)
        return _save(note) if note else None

    def reply(self, call: Call, result: Any) -> Reply | None:
        return _saved(result) if isinstance(result, dict) else None


class DeleteNoteSkill(BaseSkill):
    priority = 11

    def match(self, text: str) -> Need | None:
        delete = _DELETE.match(text)
        if delete is None:
            return None
        number = delete["id"] or delete["hash"]
        return _delete(int(number)) if number else _ASK_NUMBER

    def complete(self, text: str, answer: str) -> Need | Reply | None:
        number = _NUMBER.search(answer)
        if number is not None:
            return _delete(int(number.group()))
        return Reply(
            f"I couldn't delete a note: “{answer.strip()}” has no note number. "
            "Ask me to “list my notes”, then “forget note 2”, for example.",
            "The user's answer has no note number in it.",
        )

    def reply(self, call: Call, result: Any) -> Reply | None:
        return _deleted(result) if isinstance(result, dict) else None


class ListNotesSkill(BaseSkill):
    priority = 12

    def match(self, text: str) -> Need | None:
        return Call({}, "list your notes") if _LIST.search(text) else None

    def reply(self, call: Call, result: Any) -> Reply | None:
        return _listed(result) if isinstance(result, dict) else None


_ASK_NOTE = Question(ASK_NOTE, "what to remember", "save a note")
_ASK_NUMBER = Question(ASK_NUMBER, "which note to delete", "delete a note")


def _save(note: str) -> Call:
    return Call({"text": note}, f"save the note {_quoted(note, 60)}")


def _delete(number: int) -> Call:
    return Call({"id": number}, f"delete note #{number}")


def _saved(data: dict[str, Any]) -> Reply | None:
    note = _note(data.get("saved"))
    if note is None:
        return None
    number, text = note
    return Reply(
        f"Saved note #{number}: “{text}”.", f"The {SAVE} tool saved note #{number}."
    )


def _deleted(data: dict[str, Any]) -> Reply | None:
    note = _note(data.get("deleted"))
    if note is None:
        return None
    number, text = note
    return Reply(
        f"Deleted note #{number}: “{text}”.",
        f"The {DELETE} tool deleted note #{number}.",
    )


def _listed(data: dict[str, Any]) -> Reply | None:
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
        return Reply("You have no notes yet.", f"The {LIST} tool returned no notes.")
    count = f"{len(notes)} note{'' if len(notes) == 1 else 's'}"
    lines = "\n".join(f"- #{number}: {text}" for number, text in notes)
    return Reply(f"You have {count}:\n{lines}", f"The {LIST} tool returned {count}.")


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
