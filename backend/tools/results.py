"""How tool results are shown to the model: bounded, readable, honest."""

from __future__ import annotations

import json
from typing import Any


def to_json_text(value: Any) -> str:
    """Pretty JSON for structured values; strings pass through as they are."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def compact(value: Any, max_chars: int) -> str:
    """`value` as text of at most about `max_chars`, saying what was cut.

    Long lists keep their first items, long strings their head; the note at
    the end tells the model how much it is not seeing, so it can ask for less.
    """
    text = to_json_text(value)
    if len(text) <= max_chars:
        return text
    if isinstance(value, list) and len(value) > 1:
        return _compact_list(value, max_chars)
    head = text[: max(0, max_chars - 80)]
    return f"{head}\n… [truncated: showing {len(head)} of {len(text)} characters]"


def _compact_list(items: list[Any], max_chars: int) -> str:
    kept: list[Any] = []
    for item in items:
        if len(to_json_text([*kept, item])) > max_chars - 80:
            break
        kept.append(item)
    if not kept:
        return compact(to_json_text(items), max_chars)
    body = to_json_text(kept)
    return f"{body}\n… [truncated: showing {len(kept)} of {len(items)} items]"
