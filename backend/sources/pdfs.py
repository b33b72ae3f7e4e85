"""PDF documents: their text, page by page, through `pypdf`.

A PDF's page contents are usually compressed, and a small file can expand
into gigabytes (a "zip bomb"). So the expanded content streams and the text
are counted as they are read, and the file is refused (`bomb`) once either
passes `expansion_cap(size)`: `MAX_EXPANSION` times the file's size, and
never more than `MAX_TEXT_BYTES`. `pypdf` bounds each stream's inflation
itself as well. Encrypted files (unless they open with an empty password),
corrupt ones and those of more than `MAX_PAGES` pages are refused too.
"""

from __future__ import annotations

import io
import re

import pypdf
from pypdf.errors import FileNotDecryptedError, LimitReachedError

from backend.sources.documents import Block, Document, DocumentRefused

MAX_EXPANSION = 50
MAX_TEXT_BYTES = 20 * 1024 * 1024
MAX_PAGES = 5000
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def expansion_cap(size: int) -> int:
    """The most text (and expanded page content) a PDF of `size` bytes may hold."""
    return min(MAX_EXPANSION * size, MAX_TEXT_BYTES)


def read_pdf(data: bytes, *, default_title: str) -> Document:
    try:
        return _read(data, default_title)
    except DocumentRefused:
        raise
    except LimitReachedError:
        raise _bomb(len(data)) from None
    except FileNotDecryptedError:
        raise DocumentRefused("unreadable", "is an encrypted PDF") from None
    except Exception as exc:  # pypdf raises many kinds on a broken file
        raise DocumentRefused("invalid", f"is not a valid PDF ({_what(exc)})") from None


def _read(data: bytes, default_title: str) -> Document:
    reader = pypdf.PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise DocumentRefused("unreadable", "is an encrypted PDF")
    if len(reader.pages) > MAX_PAGES:
        raise DocumentRefused(
            "too_large", f"has {len(reader.pages):,} pages, over {MAX_PAGES:,}"
        )
    cap = expansion_cap(len(data))
    expanded = 0
    blocks: list[Block] = []
    for number, page in enumerate(reader.pages, start=1):
        contents = page.get_contents()
        expanded += len(contents.get_data()) if contents is not None else 0
        if expanded > cap:
            raise _bomb(len(data))
        text = page.extract_text() or ""
        expanded += len(text)
        if expanded > cap:
            raise _bomb(len(data))
        for paragraph in _PARAGRAPH_BREAK.split(text):
            lines = [" ".join(line.split()) for line in paragraph.splitlines()]
            joined = "\n".join(line for line in lines if line)
            if joined:
                blocks.append(Block(joined, (), number, number))
    return Document("pdf", _title(reader) or default_title, tuple(blocks))


def _title(reader: pypdf.PdfReader) -> str:
    try:
        metadata = reader.metadata
        title = metadata.title if metadata is not None else None
    except Exception:  # a broken info dictionary only loses the title
        return ""
    return " ".join(str(title).split()) if title else ""


def _bomb(size: int) -> DocumentRefused:
    return DocumentRefused(
        "bomb",
        f"expands to more than {expansion_cap(size):,} bytes of content from "
        f"{size:,} bytes (a compressed bomb?)",
    )


def _what(exc: Exception) -> str:
    message = " ".join(str(exc).split())[:120]
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
