"""Text for people: what a client sent, quoted back at a bounded length."""

from __future__ import annotations


def shorten(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else its first
    `limit - 1` and `…` (an error never echoes a client's input at length)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
