"""Folders: what a data source's folder holds that can be indexed.

`scan_folder` walks the folder (sorted, so reports come out the same way
every time) and stats each file, reading none. Hidden files and folders
(`.git`, `.DS_Store`) are passed over. Links are looked through: one that
leads outside the folder is refused (`outside_folder`), as is any path
that resolves there; a linked folder inside it is not walked twice.
Anything else that cannot be indexed is refused with its reason (see
`documents.py`): an unknown type, a file over the size limit, files past
the source's count limit (one problem for all of them).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from backend.sources.documents import (
    DocumentRefused,
    Kind,
    Problem,
    inside,
    too_large,
)
from backend.sources.readers import kind_of


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A document of the folder, as the walk found it (nothing read yet)."""

    relative: str
    """Its path in the folder, `/`-separated: what the index and people see."""
    kind: Kind
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Scan:
    root: Path
    """The folder, resolved."""
    files: tuple[FileEntry, ...]
    problems: tuple[Problem, ...]


def scan_folder(folder: Path, *, max_files: int, max_file_bytes: int) -> Scan:
    """The documents of `folder`; a `DocumentRefused` if it cannot be walked."""
    try:
        root = folder.resolve(strict=True)
    except (OSError, RuntimeError):
        raise DocumentRefused("unreadable", f"the folder {folder} is missing") from None
    if not root.is_dir():
        raise DocumentRefused("unreadable", f"{folder} is not a folder")
    walk = _Walk(root, max_files, max_file_bytes)
    walk.directory(root, "")
    if walk.overflow:
        walk.problems.append(
            Problem(
                ".",
                "too_many_files",
                f"{walk.overflow:,} more documents past the limit of "
                f"{max_files:,} per source are not indexed",
            )
        )
    return Scan(root, tuple(walk.files), tuple(walk.problems))


class _Walk:
    def __init__(self, root: Path, max_files: int, max_file_bytes: int) -> None:
        self.root = root
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.files: list[FileEntry] = []
        self.problems: list[Problem] = []
        self.overflow = 0

    def directory(self, path: Path, prefix: str) -> None:
        try:
            with os.scandir(path) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            where = prefix.rstrip("/") or "."
            self.problems.append(Problem(where, "unreadable", _unlisted(exc)))
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            relative = prefix + entry.name
            try:
                self._entry(entry, relative)
            except DocumentRefused as exc:
                self.problems.append(Problem(relative, exc.reason, str(exc)))
            except OSError as exc:
                message = f"cannot be read: {exc.strerror or type(exc).__name__}"
                self.problems.append(Problem(relative, "unreadable", message.lower()))

    def _entry(self, entry: os.DirEntry[str], relative: str) -> None:
        if entry.is_symlink():
            try:
                target = Path(entry.path).resolve(strict=True)
            except (OSError, RuntimeError):
                raise DocumentRefused("unreadable", "is a broken link") from None
            if not inside(target, self.root):
                raise DocumentRefused(
                    "outside_folder", "is a link that leads outside the source's folder"
                )
            if target.is_dir():
                return  # inside the folder: its documents are walked where they are
            info = target.stat()
        elif entry.is_dir(follow_symlinks=False):
            self.directory(Path(entry.path), relative + "/")
            return
        else:
            info = entry.stat(follow_symlinks=False)
        self._file(relative, info)

    def _file(self, relative: str, info: os.stat_result) -> None:
        if not stat.S_ISREG(info.st_mode):
            raise DocumentRefused("unknown_type", "is not a regular file")
        kind = kind_of(relative)
        if kind is None:
            suffix = os.path.splitext(relative)[1] or "(none)"
            raise DocumentRefused(
                "unknown_type",
                f"is of a type that is not indexed ({suffix}); indexed: "
                ".md, .markdown, .txt, .rst, .html, .htm, .pdf",
            )
        if info.st_size > self.max_file_bytes:
            raise too_large(info.st_size, self.max_file_bytes)
        if len(self.files) >= self.max_files:
            self.overflow += 1
            return
        self.files.append(FileEntry(relative, kind, info.st_size, info.st_mtime_ns))


def _unlisted(exc: OSError) -> str:
    return f"cannot be listed: {(exc.strerror or type(exc).__name__).lower()}"
