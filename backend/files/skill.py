"""What `read_file` teaches the offline model: a request about a file named
in it, and how to answer from the file's text.

Recognised, case-insensitively (NAME is a file name with an extension, such
as `shopping.txt` or "Q3 report.pdf" in quotes):

- "what does|did NAME say|contain", "what is in NAME", "what's in NAME"
- "read|open|show (me)|summari[sz]e|quote NAME"
- "what NAME says|contains"
"""

from __future__ import annotations

import re
from typing import Any

from backend.llm.offline_skill import BaseSkill, Call, Capability, Need, Reply

TOOL = "read_file"
SHOWN_CHARS = 1_500
"""Of the file's text, shown in the answer."""

_OPEN = "\"\u201c'\u2018"
_CLOSE = "\"\u201d'\u2019"
_NAME = (
    rf"(?:[{_OPEN}](?P<quoted>[^{_CLOSE}]{{1,120}}\.\w{{1,8}})[{_CLOSE}]"
    r"|(?P<bare>[\w\-.]{1,120}\.\w{1,8}))"
)
_FLAGS = re.IGNORECASE
_PATTERNS = (
    re.compile(
        rf"\bwhat\s+(?:does|did|do)\s+(?:the\s+file\s+)?{_NAME}\s+(?:say|contain|hold)",
        _FLAGS,
    ),
    re.compile(
        rf"\bwhat(?:'s|\u2019s|\s+is)\s+(?:written\s+)?in\s+(?:the\s+file\s+)?{_NAME}",
        _FLAGS,
    ),
    re.compile(
        rf"\b(?:read|open|show(?:\s+me)?|summari[sz]e|quote)\s+(?:the\s+file\s+)?{_NAME}",
        _FLAGS,
    ),
    re.compile(rf"\bwhat\s+{_NAME}\s+(?:says|contains)", _FLAGS),
)


class ReadFileSkill(BaseSkill):
    priority = 14
    capabilities = (
        Capability(
            "read the files you attach",
            ("what does notes.txt say",),
            qualifier=", with tools on",
            in_greeting=False,
        ),
    )

    def match(self, text: str) -> Need | None:
        for pattern in _PATTERNS:
            found = pattern.search(text)
            if found is not None:
                name = (found["quoted"] or found["bare"]).strip()
                return Call({"file_id": name}, f"read {name}")
        return None

    def reply(self, call: Call, result: Any) -> Reply | None:
        if not isinstance(result, dict) or not isinstance(result.get("text"), str):
            return None
        name = str(result.get("name") or call.arguments.get("file_id", "the file"))
        text = result["text"].strip()
        if not text:
            return Reply(f"{name} is empty.", f"{name} has no text.")
        shown = text[:SHOWN_CHARS]
        more = len(text) > SHOWN_CHARS or bool(result.get("truncated"))
        tail = "\n\n(That is the beginning; the file goes on.)" if more else ""
        quoted = "\n".join(f"> {line}" if line else ">" for line in shown.splitlines())
        return Reply(
            f"{name} says:\n\n{quoted}{tail}",
            f"Read {name} ({len(text)} characters).",
        )
