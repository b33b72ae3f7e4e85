"""`BlobCollector`: file contents no file record names any more, removed.

A blob (`BlobStore`) is shared by every file with its content, so deleting a
conversation deletes its file records (the database cascades) but not the
blobs: a pass of the collector does. It lists the blobs on disk older than
its grace, asks the store which of them some record still names, and
removes the others. Leftovers of writes cut off (`.part-*` temporary files)
and of passes cut off (`.gc-*`) older than the grace go too.

Why a blob it removes is not one an upload is about to name:

- an upload writes its content before it inserts its record; content it
  wrote is younger than the grace, so it is not even looked at;
- an upload whose content is kept already touches the blob instead
  (`BlobStore.put`), making it young again;
- the collector first renames a blob it means to remove out of the way
  (`.gc-…`), then looks at its time once more: touched meanwhile, it is put
  back; touched later, the touch finds no blob and the upload writes it
  afresh. Only a blob no upload touched since the store was asked is removed.

So the grace must exceed the time between an upload's content landing and
its record being inserted (a moment; a database that hangs for longer
than the grace could lose a file), and on a shared filesystem the clock
skew between the machines (a file's time is the file server's).

`LOOPWIRE_FILES_DIR` belongs to one database: a server on another database
would find every blob unnamed and remove it.

Passes run every `every_s` seconds (the first one `every_s` after start)
and soon after `wake()` (a conversation was deleted; passes after wakes
are at least `wake_gap_s` apart), inside `async with` (the app's
lifespan). Disk work runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from backend.aio import cancel_all, stop_if_cancelled
from backend.files.blobs import DIGEST, BlobStore
from backend.store.base import Store, shown_bytes

log = logging.getLogger("loopwire.files")

LEFTOVERS = (".part-", ".gc-")
"""Name prefixes of a write cut off (`BlobStore._put`) and of a removal cut
off (`BlobCollector._discard`)."""
SHARD = len("ab")
WAKE_GAP_S = 60.0


@dataclass(slots=True)
class Collected:
    """What one pass removed (and kept)."""

    blobs: int = 0
    bytes: int = 0
    leftovers: int = 0
    kept: int = 0
    """Old blobs some record still names."""


@dataclass(slots=True)
class _Scan:
    old: dict[str, int] = field(default_factory=dict)
    """Blobs older than the grace: digest → size."""
    leftovers: list[Path] = field(default_factory=list)


class BlobCollector:
    def __init__(
        self,
        blobs: BlobStore,
        store: Store,
        *,
        grace_s: float,
        every_s: float = 0.0,
        wake_gap_s: float = WAKE_GAP_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`every_s` 0: no passes but those `collect()` is called for."""
        self.blobs = blobs
        self.store = store
        self.grace_s = grace_s
        self.every_s = every_s
        self.wake_gap_s = wake_gap_s
        self.clock = clock
        self.passes = 0
        """Passes finished (run by the task or not)."""
        self._passed = asyncio.Condition()
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ running

    async def __aenter__(self) -> BlobCollector:
        if self.every_s > 0:
            self._task = asyncio.create_task(self._run(), name="blob-collector")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        if task is not None:
            await cancel_all([task])

    def wake(self) -> None:
        """A pass soon (file records were deleted); none if not running."""
        if self._task is not None:
            self._woken.set()

    async def wait_for_pass(self, after: int) -> None:
        """Return once more than `after` passes have finished."""
        async with self._passed:
            await self._passed.wait_for(lambda: self.passes > after)

    async def _run(self) -> None:
        last = -float("inf")
        while True:
            woken = await self._wait_for_wake(self.every_s)
            if woken and (gap := last + self.wake_gap_s - time.monotonic()) > 0:
                await asyncio.sleep(gap)
            self._woken.clear()
            last = time.monotonic()
            try:
                await self.collect()
            except Exception:  # the next pass tries again
                stop_if_cancelled()
                log.exception("collecting unused files failed")

    async def _wait_for_wake(self, seconds: float) -> bool:
        """Wait until `wake()` or `seconds` pass; whether woken."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._woken.wait()
        return self._woken.is_set()

    # ------------------------------------------------------------ one pass

    async def collect(self) -> Collected:
        """One pass: remove the old blobs no record names, and old leftovers."""
        cutoff = self.clock() - self.grace_s
        scan = await asyncio.to_thread(self._scan, cutoff)
        named = await self.store.referenced_blobs(scan.old)
        done = Collected(kept=len(named))
        unnamed = {d: size for d, size in scan.old.items() if d not in named}
        if unnamed or scan.leftovers:
            await asyncio.to_thread(self._remove, unnamed, scan.leftovers, cutoff, done)
        if done.blobs or done.leftovers:
            log.info(
                "removed %d unused files (%s) and %d leftovers of cut-off writes",
                done.blobs,
                shown_bytes(done.bytes),
                done.leftovers,
            )
        async with self._passed:
            self.passes += 1
            self._passed.notify_all()
        return done

    def _scan(self, cutoff: float) -> _Scan:
        scan = _Scan()
        if not self.blobs.root.is_dir():
            return scan
        with os.scandir(self.blobs.root) as shards:
            for shard in shards:
                if len(shard.name) == SHARD and shard.is_dir(follow_symlinks=False):
                    self._scan_shard(shard, cutoff, scan)
        return scan

    def _scan_shard(self, shard: os.DirEntry[str], cutoff: float, scan: _Scan) -> None:
        with os.scandir(shard.path) as entries:
            for entry in entries:
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    stat = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # removed meanwhile
                    continue
                if stat.st_mtime >= cutoff:
                    continue
                name = entry.name
                if DIGEST.fullmatch(name) and name.startswith(shard.name):
                    scan.old[name] = stat.st_size
                elif name.startswith(LEFTOVERS):
                    scan.leftovers.append(Path(entry.path))

    def _remove(
        self,
        unnamed: dict[str, int],
        leftovers: list[Path],
        cutoff: float,
        done: Collected,
    ) -> None:
        for digest, size in unnamed.items():
            if self._discard(self.blobs.path_of(digest), cutoff):
                done.blobs += 1
                done.bytes += size
        for path in leftovers:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                done.leftovers += 1

    def _discard(self, path: Path, cutoff: float) -> bool:
        """Remove the blob at `path` unless an upload touched it since the
        scan (see the module's docstring); whether it was removed."""
        aside = path.with_name(f".gc-{path.name}-{secrets.token_hex(4)}")
        try:
            path.rename(aside)
            if aside.stat().st_mtime >= cutoff:  # touched: named again
                aside.replace(path)
                return False
            aside.unlink()
        except FileNotFoundError:  # another instance's pass took it first
            return False
        return True
