"""`BlobStore`: file contents on disk, named by their SHA-256.

A blob lives at `<root>/<first two hex digits>/<the whole hex digest>`; the
same content is kept once however many conversations hold it. A blob is
written to a temporary file in the same folder, flushed, then renamed into
place, so a reader never sees half of one. No client-chosen name or path
is ever part of a blob's path. Disk work runs in a worker thread.

Content kept already is touched (its modification time set to now) rather
than written again: `BlobCollector` (`collector.py`) removes only blobs
older than its grace that no file record names, so a blob an upload is
about to name again is young, or gone and written afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path

DIGEST = re.compile(r"[0-9a-f]{64}")


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, sha256: str) -> Path:
        if not DIGEST.fullmatch(sha256):
            raise ValueError(f"not a SHA-256 hex digest: {sha256[:80]!r}")
        return self.root / sha256[:2] / sha256

    async def put(self, content: bytes) -> str:
        """Keep `content`; its SHA-256 (hex), by which it is read back."""
        return await asyncio.to_thread(self._put, content)

    async def get(self, sha256: str) -> bytes:
        return await asyncio.to_thread(self.path_of(sha256).read_bytes)

    def _put(self, content: bytes) -> str:
        sha256 = hashlib.sha256(content).hexdigest()
        target = self.path_of(sha256)
        with contextlib.suppress(FileNotFoundError):  # kept already: touched,
            os.utime(target)  # so the collector leaves it alone
            return sha256
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".part-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(content)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return sha256
