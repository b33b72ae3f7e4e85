"""JSON from clients, parsed within bounds.

`json.loads` alone raises `RecursionError` on deep nesting and `ValueError`
on integers over 4,300 digits, neither a `JSONDecodeError`; a caller that
catches only that drops the connection. `load_json` bounds depth and number
size first and raises `InvalidMessage` for every problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from backend.errors import InvalidMessage

MAX_DEPTH = 32
"""How deeply a client's JSON may nest (client messages need 3 levels)."""
MAX_DIGITS = 30
"""The longest number a client may send (int() of 4,300 digits raises)."""


def load_json(text: str | bytes) -> Any:
    """Parse a client's JSON within bounds; anything else is `InvalidMessage`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidMessage(f"invalid UTF-8: {exc}") from exc
    if text.count("[") + text.count("{") > MAX_DEPTH:  # else it cannot be deeper
        _check_depth(text)
    try:
        return json.loads(
            text,
            parse_int=_bounded_int,
            parse_float=_bounded_float,
            parse_constant=_no_constant,
        )
    except json.JSONDecodeError as exc:
        raise InvalidMessage(f"invalid JSON: {exc}") from exc


def nesting(
    text: str, *, brackets: str = "[]{}", strings_at_top: bool = True
) -> Iterator[tuple[int, int]]:
    """The one scanner of JSON text's structure: `(index, depth after it)` at
    every bracket of `brackets` (pairs: opening, closing) outside strings,
    in one linear pass. Without `strings_at_top`, a quote outside every
    bracket is prose, not a string (for JSON found inside prose); a closing
    bracket outside every one is then ignored too."""
    opening, closing = brackets[0::2], brackets[1::2]
    depth = 0
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = strings_at_top or depth > 0
        elif char in opening:
            depth += 1
            yield index, depth
        elif char in closing and (strings_at_top or depth > 0):
            depth -= 1
            yield index, depth


def _check_depth(text: str) -> None:
    """Refuse JSON nested deeper than `MAX_DEPTH` (brackets inside strings
    do not count); run only when there are many brackets."""
    for _, depth in nesting(text):
        if depth > MAX_DEPTH:
            raise InvalidMessage(f"JSON nested deeper than {MAX_DEPTH} levels")


def _bounded_int(digits: str) -> int:
    if len(digits) > MAX_DIGITS:
        raise InvalidMessage(f"a number has more than {MAX_DIGITS} digits")
    return int(digits)


def _bounded_float(digits: str) -> float:
    if len(digits) > MAX_DIGITS + 10:
        raise InvalidMessage(f"a number has more than {MAX_DIGITS} digits")
    return float(digits)


def _no_constant(name: str) -> Any:
    raise InvalidMessage(f"{name} is not valid JSON")
