"""Which files a conversation takes, told by name and by content.

A file's kind comes from its extension and must agree with its first bytes:
text must be UTF-8 without NUL bytes, a PDF must start as one, an image must
carry its format's signature. Anything else (archives included: a zip is
never unpacked here) is refused with a reason people can act on.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from backend.errors import LoopwireError

NAME_CHARS = 120
"""A stored name's length at most (its extension kept)."""

TEXT_KINDS = {
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".json": "application/json",
    ".html": "text/html",
    ".htm": "text/html",
    ".xml": "application/xml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".log": "text/plain",
    ".py": "text/x-python",
}
BINARY_KINDS = {
    ".pdf": ("application/pdf", (b"%PDF-",)),
    ".png": ("image/png", (b"\x89PNG\r\n\x1a\n",)),
    ".jpg": ("image/jpeg", (b"\xff\xd8\xff",)),
    ".jpeg": ("image/jpeg", (b"\xff\xd8\xff",)),
    ".gif": ("image/gif", (b"GIF87a", b"GIF89a")),
    ".webp": ("image/webp", (b"RIFF",)),
}
ARCHIVE_SIGNATURES = (b"PK\x03\x04", b"\x1f\x8b", b"7z\xbc\xaf", b"Rar!", b"BZh")
ACCEPTED = ", ".join(sorted({*TEXT_KINDS, *BINARY_KINDS}))


class FileRefused(LoopwireError, ValueError):
    """The file is not taken; the message says why and what would be."""


class FileTooLarge(FileRefused):
    """The file is over the size a conversation takes."""


@dataclass(frozen=True, slots=True)
class Kind:
    media_type: str
    text: bool


def clean_name(raw: str) -> str:
    """A name safe to show and to put in a header: the last path component,
    no control or separator characters, no leading dots, at most
    `NAME_CHARS` characters with the extension kept; never empty."""
    name = unicodedata.normalize("NFC", raw).replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(
        c for c in name if unicodedata.category(c)[0] != "C" and c not in '"<>:|?*'
    )
    name = re.sub(r"\s+", " ", name).strip().lstrip(".").strip()
    if len(name) > NAME_CHARS:
        stem, dot, ext = name.rpartition(".")
        if dot and 0 < len(ext) <= 10 and stem:
            name = stem[: NAME_CHARS - len(ext) - 1].rstrip() + "." + ext
        else:
            name = name[:NAME_CHARS]
    return name or "file"


def extension(name: str) -> str:
    _, dot, ext = name.rpartition(".")
    return f".{ext.lower()}" if dot else ""


def kind_of(name: str, head: bytes) -> Kind:
    """The kind of file `name` whose content starts with `head` (its first
    KiB or so), or `FileRefused`."""
    ext = extension(name)
    if any(head.startswith(signature) for signature in ARCHIVE_SIGNATURES):
        raise FileRefused(
            f"{name!r} is an archive; archives are not taken (send the files in it)"
        )
    if ext in TEXT_KINDS:
        if b"\x00" in head:
            raise FileRefused(f"{name!r} is not text (it holds NUL bytes)")
        return Kind(TEXT_KINDS[ext], text=True)
    if ext in BINARY_KINDS:
        media_type, signatures = BINARY_KINDS[ext]
        if not any(head.startswith(signature) for signature in signatures):
            raise FileRefused(f"{name!r} is not a {ext[1:].upper()} file")
        return Kind(media_type, text=False)
    shown = ext or "no extension"
    raise FileRefused(f"{name!r}: files of type {shown} are not taken; take {ACCEPTED}")


def check_text(name: str, content: bytes) -> None:
    """Text must be UTF-8 throughout (checked once the whole file is in)."""
    try:
        content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(
            f"{name!r} is not UTF-8 text (byte {exc.start} cannot be read)"
        ) from None
