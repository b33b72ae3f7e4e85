"""Readers: which files are documents, and what reads each kind.

`KINDS` maps a file name's extension to its kind (`kind_of`), and
`parse_document` hands a file's bytes to its kind's reader: Markdown and
text (`documents.py`), HTML (`html_pages.py`), PDF (`pdfs.py`, `pypdf` only
imported when a PDF is read). The readers build on `documents.py` alone,
and none imports this registry.
"""

from __future__ import annotations

import os

from backend.sources.documents import (
    Document,
    Kind,
    decode_text,
    read_markdown,
    read_text,
)
from backend.sources.html_pages import read_html

KINDS: dict[str, Kind] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".rst": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}


def kind_of(name: str) -> Kind | None:
    """The kind of document a file name says, if any."""
    return KINDS.get(os.path.splitext(name)[1].lower())


def parse_document(kind: Kind, data: bytes, *, name: str) -> Document:
    """`data` as a `Document` of `kind`; `name` (the file's) gives a default title."""
    stem = os.path.splitext(os.path.basename(name))[0]
    if kind == "pdf":
        from backend.sources.pdfs import read_pdf  # pypdf only when needed

        return read_pdf(data, default_title=stem)
    text = decode_text(data)
    if kind == "html":
        return read_html(text, default_title=stem)
    if kind == "markdown":
        return read_markdown(text, default_title=stem)
    return read_text(text, default_title=stem)
