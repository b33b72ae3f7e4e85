"""Passages: the pieces of a document that search returns.

A document's blocks are packed in order into passages of at most
`MAX_CHARS` characters (600 to 1,000 when the blocks allow), never
across a heading (Markdown, HTML) or a page (PDF); a block longer than
`MAX_CHARS` is cut between its lines, else between words. Each passage
says where it is in words people use: its heading path
(`SEPARATOR` between headings), `page 3`, or `lines 10-24` (an en dash).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from backend.sources.documents import Block, Document, Kind

MAX_CHARS = 1000
SEPARATOR = " \u203a "
"""Between the headings of a heading path: `Setup › Installing`."""  # noqa: RUF001
DASH = "\u2013"
"""Between the first and last line (or page) of a passage."""


@dataclass(frozen=True, slots=True)
class Passage:
    ordinal: int
    """Its place in the document, from 0."""
    text: str
    location: str
    heading: str
    """The heading path (Markdown, HTML), else ""."""


def split_passages(document: Document) -> list[Passage]:
    passages: list[Passage] = []
    current: list[Block] = []

    def flush() -> None:
        if current:
            passages.append(_passage(document.kind, len(passages), current))
            current.clear()

    for block in document.blocks:
        for piece in _pieces(block, line_numbers=document.kind in LINE_KINDS):
            if current and (
                _section(current[0], document.kind) != _section(piece, document.kind)
                or _size(current) + 2 + len(piece.text) > MAX_CHARS
            ):
                flush()
            current.append(piece)
    flush()
    return passages


LINE_KINDS: frozenset[Kind] = frozenset({"markdown", "text"})


def location(kind: Kind, headings: tuple[str, ...], first: int, last: int) -> str:
    """Where a passage is, for people."""
    if kind == "pdf":
        return f"page {first}" if first == last else f"pages {first}{DASH}{last}"
    if headings:
        return SEPARATOR.join(headings)
    if kind in LINE_KINDS and first:
        return f"line {first}" if first == last else f"lines {first}{DASH}{last}"
    return "start"


def _passage(kind: Kind, ordinal: int, blocks: list[Block]) -> Passage:
    headings = blocks[0].headings
    text = "\n\n".join(block.text for block in blocks)
    where = location(kind, headings, blocks[0].first, blocks[-1].last)
    return Passage(ordinal, text, where, SEPARATOR.join(headings))


def _section(block: Block, kind: Kind) -> tuple[object, ...]:
    return (block.first,) if kind == "pdf" else block.headings


def _size(blocks: list[Block]) -> int:
    return sum(len(block.text) for block in blocks) + 2 * (len(blocks) - 1)


def _pieces(block: Block, *, line_numbers: bool) -> Iterator[Block]:
    """`block` in pieces of at most `MAX_CHARS`: whole lines when they fit,
    words otherwise. With `line_numbers`, each piece keeps its own lines'."""
    if len(block.text) <= MAX_CHARS:
        yield block
        return
    lines: list[tuple[int, str]] = []
    for offset, line in enumerate(block.text.split("\n")):
        number = block.first + offset if line_numbers else block.first
        lines.extend((number, part) for part in _words(line))
    chunk: list[tuple[int, str]] = []
    size = 0
    for number, line in lines:
        if chunk and size + 1 + len(line) > MAX_CHARS:
            yield _piece(block, chunk, line_numbers)
            chunk, size = [], 0
        size += len(line) + (1 if chunk else 0)
        chunk.append((number, line))
    if chunk:
        yield _piece(block, chunk, line_numbers)


def _piece(block: Block, chunk: list[tuple[int, str]], line_numbers: bool) -> Block:
    text = "\n".join(line for _, line in chunk)
    if not line_numbers:
        return Block(text, block.headings, block.first, block.last)
    return Block(text, block.headings, chunk[0][0], chunk[-1][0])


def _words(line: str) -> Iterator[str]:
    """`line` whole if it fits in a passage, else cut between words (a word
    longer than a passage is cut where it must)."""
    if len(line) <= MAX_CHARS:
        yield line
        return
    part = ""
    for word in line.split():
        while len(word) > MAX_CHARS:
            if part:
                yield part
                part = ""
            yield word[:MAX_CHARS]
            word = word[MAX_CHARS:]
        if part and len(part) + 1 + len(word) > MAX_CHARS:
            yield part
            part = ""
        part = f"{part} {word}" if part else word
    if part:
        yield part
