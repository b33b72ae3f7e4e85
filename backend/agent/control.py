"""Tolerant parsing of the JSON control block in reason / observe replies.

Models write prose and a JSON object. We look for a fenced ```json block
first, else the last balanced `{…}` span that parses as an object. Whatever
we find is removed from the prose shown to the user. Anything malformed means
"no control": the whole text is prose, and the loop carries on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from backend.bounded_json import nesting

C = TypeVar("C", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Parsed(Generic[C]):
    prose: str
    control: C | None


def parse_control(text: str, model: type[C]) -> Parsed[C]:
    """Split `text` into prose and a validated control block (or None)."""
    found = _find_object(text)
    if found is None:
        return Parsed(text.strip(), None)
    data, (start, end) = found
    try:
        control = model.model_validate(_normalise(data))
    except ValidationError:
        return Parsed(text.strip(), None)
    prose = (text[:start] + text[end:]).strip()
    return Parsed(prose, control)


def _find_object(text: str) -> tuple[dict[str, Any], tuple[int, int]] | None:
    for match in reversed(list(_FENCE.finditer(text))):
        data = _loads_object(match.group(1))
        if data is not None:
            return data, match.span()
    for start, end in _balanced_spans(text):
        data = _loads_object(text[start:end])
        if data is not None:
            return data, (start, end)
    return None


def _loads_object(candidate: str) -> dict[str, Any] | None:
    try:
        value = json.loads(candidate.strip())
    except (ValueError, RecursionError):  # malformed, too deep, huge numbers
        return None
    return value if isinstance(value, dict) else None


def _balanced_spans(text: str) -> list[tuple[int, int]]:
    """Top-level balanced `{…}` spans, last first (strings are respected;
    quotes in the prose around them are not strings)."""
    spans: list[tuple[int, int]] = []
    start = -1
    for index, depth in nesting(text, brackets="{}", strings_at_top=False):
        if depth == 1 and text[index] == "{":
            start = index
        elif depth == 0:
            spans.append((start, index + 1))
    return spans[::-1]


_FLAGS = frozenset({"finish", "should_continue"})


def _normalise(data: dict[str, Any]) -> dict[str, Any]:
    """Forgive the usual slips: "true"/"false" strings for flags, nulls."""
    fixed: dict[str, Any] = {}
    for key, value in data.items():
        if key in _FLAGS and isinstance(value, str):
            value = {"true": True, "false": False}.get(value.strip().lower(), value)
        if value is not None:
            fixed[key] = value
    return fixed
