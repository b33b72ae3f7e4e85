"""JSON as models write it: `loads` forgives the slips a parser for people
would, and nothing else.

Forgiven: single-quoted strings, a comma before a closing bracket, Python's
`True` / `False` / `None`, and control characters inside strings. Anything
else is a `ValueError`, as from `json.loads`; too deep a nesting raises
`RecursionError` (callers catch both).
"""

from __future__ import annotations

import json
import re
from typing import Any

_WORDS = {"True": "true", "False": "false", "None": "null"}
_WORD = re.compile(r"[A-Za-z_]+")


def loads(text: str) -> Any:
    """`text` as JSON, the slips above forgiven."""
    try:
        return json.loads(text, strict=False)
    except ValueError:
        repaired = _repair(text)
        if repaired == text:
            raise
    return json.loads(repaired, strict=False)


def _repair(text: str) -> str:
    """One pass: single-quoted strings become double-quoted ones, trailing
    commas go, Python's constants become JSON's."""
    out: list[str] = []
    index, size = 0, len(text)
    while index < size:
        char = text[index]
        if char in "\"'":
            end = _string_end(text, index)
            out.append(_as_double(text[index:end]) if char == "'" else text[index:end])
            index = end
        elif char == ",":
            after = index + 1
            while after < size and text[after].isspace():
                after += 1
            if after >= size or text[after] not in "}]":
                out.append(char)
            index += 1
        elif (word := _WORD.match(text, index)) is not None:
            out.append(_WORDS.get(word.group(), word.group()))
            index = word.end()
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """Where the string opened at `start` ends (after its closing quote; the
    end of `text` when it is never closed)."""
    quote = text[start]
    index = start + 1
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == quote:
            return index + 1
        index += 1
    return len(text)


def _as_double(single: str) -> str:
    """A single-quoted string as a JSON one: `\\'` unescaped, `"` escaped."""
    body = single[1:-1] if len(single) > 1 and single.endswith("'") else single[1:]
    body = body.replace("\\'", "'")
    out: list[str] = []
    escaped = False
    for char in body:
        if escaped:
            out.append(char)
            escaped = False
        elif char == "\\":
            out.append(char)
            escaped = True
        elif char == '"':
            out.append('\\"')
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
