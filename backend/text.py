"""Text for people: what a client sent, quoted back at a bounded length."""

from __future__ import annotations


def shorten(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else its first
    `limit - 1` and `…` (an error never echoes a client's input at length)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


_BLOCK_START = ("-", "*", "+", "#", "|", ">", "```", "    ", "\t")


def unwrap(text: str) -> str:
    """`text` with its paragraphs' hard line breaks joined ("a line wrapped
    at 72\\ncolumns" → one line), keeping blank lines, list items, headings,
    tables, quotes and code as they are."""
    lines = text.splitlines()
    out: list[str] = []
    for line in lines:
        stripped = line.strip()
        starts_block = line.startswith(_BLOCK_START) or _numbered(stripped)
        joinable = (
            out
            and out[-1].strip()
            and stripped
            and not starts_block
            and not out[-1].lstrip().startswith(("#", "|", "```"))
            and not out[-1].startswith(("    ", "\t"))
        )
        if joinable:
            out[-1] = f"{out[-1].rstrip()} {stripped}"
        else:
            out.append(line.rstrip())
    return "\n".join(out)


def _numbered(line: str) -> bool:
    """A numbered list item: `1. …`, `2) …`."""
    digits = len(line) - len(line.lstrip("0123456789"))
    return 0 < digits < len(line) and line[digits] in ".)"
