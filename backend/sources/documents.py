"""Documents: reading one file of a data source into text blocks.

A document is Markdown (`.md`, `.markdown`), text (`.txt`, `.rst`), HTML
(`.html`, `.htm`) or PDF (`.pdf`); `read_document` reads its bytes (within
the source's folder, within the size limit) and `readers.parse_document`
turns them into `Block`s: paragraphs with the headings in force (Markdown,
HTML), their line numbers (Markdown, text) or their page (PDF). Markdown
and text are read here (`read_markdown`, `read_text`), HTML in
`html_pages.py`, PDF in `pdfs.py`. `passages.py` groups the blocks into
passages.

Every file that cannot be indexed is refused with a `DocumentRefused` whose
`reason` says why, in a word a report can count:

| reason | what |
| --- | --- |
| `unknown_type` | not one of the types above, or not a regular file |
| `too_large` | over the size limit (or a PDF of too many pages) |
| `outside_folder` | a link (or any path) that leads outside the source's folder |
| `bomb` | a compressed PDF whose text expands far past its size |
| `invalid` | not what its name says: binary "text", a corrupt PDF |
| `unreadable` | the system would not read it, or the PDF is encrypted |
| `too_many_files` | past the source's limit of documents |
| `embeddings` | its passages could not be embedded (BM25 still finds them) |
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from backend.errors import LoopwireError

Kind = Literal["markdown", "text", "html", "pdf"]
RefusalReason = Literal[
    "unknown_type",
    "too_large",
    "outside_folder",
    "bomb",
    "invalid",
    "unreadable",
    "too_many_files",
    "embeddings",
]


class DocumentRefused(LoopwireError):
    """A file that is not indexed, and why (`reason`, a `RefusalReason`)."""

    def __init__(self, reason: RefusalReason, message: str) -> None:
        super().__init__(message)
        self.reason: RefusalReason = reason


@dataclass(frozen=True, slots=True)
class Problem:
    """A file of a source that is not indexed: its path in the folder, why."""

    path: str
    reason: RefusalReason
    message: str


@dataclass(frozen=True, slots=True)
class Block:
    """A paragraph (or a code block, a list, a page's text) of a document."""

    text: str
    headings: tuple[str, ...] = ()
    """The headings in force, outermost first (Markdown, HTML)."""
    first: int = 0
    """Its first line (Markdown, text) or its page (PDF), from 1; 0: none."""
    last: int = 0


@dataclass(frozen=True, slots=True)
class Document:
    kind: Kind
    title: str
    blocks: tuple[Block, ...]


def inside(path: Path, root: Path) -> bool:
    """Whether the resolved `path` is `root` or below it (both resolved)."""
    return path == root or path.is_relative_to(root)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def read_document(root: Path, relative: str, max_bytes: int) -> bytes:
    """The bytes of `root/relative`, refused when the path resolves outside
    `root` (a link, `..`), when it is no regular file or over `max_bytes`.

    `root` is resolved already. The check is made again here, at the time of
    reading, whatever the folder walk found."""
    try:
        real = (root / relative).resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of links
        raise DocumentRefused("unreadable", f"cannot be opened: {_why(exc)}") from None
    if not inside(real, root):
        raise DocumentRefused("outside_folder", "leads outside the source's folder")
    try:
        descriptor = os.open(real, os.O_RDONLY | _NOFOLLOW)
        with os.fdopen(descriptor, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise DocumentRefused("unknown_type", "is not a regular file")
            if info.st_size > max_bytes:
                raise too_large(info.st_size, max_bytes)
            data = file.read(max_bytes + 1)
    except OSError as exc:
        raise DocumentRefused("unreadable", f"cannot be read: {_why(exc)}") from None
    if len(data) > max_bytes:
        raise too_large(len(data), max_bytes)
    return data


def too_large(size: int, limit: int) -> DocumentRefused:
    return DocumentRefused(
        "too_large", f"is {size:,} bytes, over the limit of {limit:,} bytes"
    )


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without a BOM), else Windows-1252; binary data is refused."""
    if b"\x00" in data[:8192]:
        raise DocumentRefused("invalid", "holds binary data, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


# --- Markdown ------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_THEMATIC = re.compile(r"^ {0,3}(?:(?:\*[ \t]*){3,}|(?:_[ \t]*){3,}|(?:-[ \t]*){3,})$")
_INLINE = re.compile(r"[*_`]+|\[([^\]]*)\]\([^)]*\)")


def read_markdown(text: str, *, default_title: str) -> Document:
    lines = text.splitlines()
    start = _front_matter_end(lines)
    headings: list[tuple[int, str]] = []
    blocks: list[Block] = []
    paragraph: list[tuple[int, str]] = []
    fence: str | None = None
    title = ""

    def flush() -> None:
        path = tuple(h for _, h in headings)
        blocks.extend(_paragraph_block(paragraph, path))
        paragraph.clear()

    def heading(level: int, words: str) -> None:
        nonlocal title
        words = plain_heading(words)
        while headings and headings[-1][0] >= level:
            headings.pop()
        if words:
            headings.append((level, words))
            title = title or (words if level == 1 else "")

    for number, line in enumerate(lines[start:], start=start + 1):
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
                flush()
            else:
                paragraph.append((number, line.rstrip()))
            continue
        opening = _FENCE.match(line)
        if opening:
            flush()
            fence = opening.group(1)
            continue
        atx = _ATX.match(line)
        if atx:
            flush()
            heading(len(atx.group(1)), atx.group(2) or "")
            continue
        underline = _SETEXT.match(line)
        if underline and len(paragraph) == 1:
            words = paragraph.pop()[1]
            heading(1 if underline.group(1).startswith("=") else 2, words)
            continue
        if not line.strip() or _THEMATIC.match(line):
            flush()
            continue
        paragraph.append((number, line.rstrip()))
    flush()
    return Document("markdown", title or default_title, tuple(blocks))


def plain_heading(text: str) -> str:
    """A heading's words, without inline Markdown (emphasis, code, links)."""
    text = _INLINE.sub(lambda m: m.group(1) or "", text)
    return " ".join(text.split())


def _front_matter_end(lines: list[str]) -> int:
    """The first line after a leading `---` … `---` block (0 if none)."""
    if not lines or lines[0].strip() != "---":
        return 0
    for index in range(1, min(len(lines), 200)):
        if lines[index].strip() in {"---", "..."}:
            return index + 1
    return 0


# --- text ----------------------------------------------------------------------


def read_text(text: str, *, default_title: str) -> Document:
    return Document("text", default_title, tuple(_paragraphs(text.splitlines(), ())))


def _paragraphs(lines: list[str], headings: tuple[str, ...]) -> list[Block]:
    """Paragraphs (runs of non-blank lines) with their line numbers."""
    blocks: list[Block] = []
    paragraph: list[tuple[int, str]] = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            paragraph.append((number, line.rstrip()))
            continue
        blocks.extend(_paragraph_block(paragraph, headings))
        paragraph.clear()
    blocks.extend(_paragraph_block(paragraph, headings))
    return blocks


def _paragraph_block(
    lines: list[tuple[int, str]], headings: tuple[str, ...]
) -> list[Block]:
    if not lines:
        return []
    text = "\n".join(line for _, line in lines).strip("\n")
    if not text.strip():
        return []
    return [Block(text, headings, lines[0][0], lines[-1][0])]


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return type(exc).__name__
