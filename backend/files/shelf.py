"""`FileShelf`: a conversation's files, kept and read back.

An upload and a tool's artifact come in the same way: the name is cleaned,
the size and the kind checked (`backend/files/kinds.py`), the content kept
by its SHA-256 (`BlobStore`), the record stored (at most
`max_files_per_conversation` per conversation). Then `on_added` tells
whoever shows the conversation (the `ChatService` sends `files_update`).
Nothing here takes a path from a client: files are named by their ids.

A user holds at most `max_user_bytes` of files (the sizes of the files of
all their conversations, added up). A file that would take its owner past
that is refused before its content is written (`QuotaExceeded`), as is one
past the conversation's count; one owner's files are added one at a time
on this instance, so two uploads cannot both pass the checks and write
their contents only for one to be refused. The store checks again in the
transaction that inserts the record: across instances it is the referee
(content a refused record leaves on disk is collected by `BlobCollector`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from backend.files.blobs import BlobStore
from backend.files.kinds import (
    FileRefused,
    FileTooLarge,
    check_text,
    clean_name,
    kind_of,
)
from backend.protocol import FileInfo
from backend.store.base import (
    EffectKey,
    QuotaExceeded,
    Store,
    StoreError,
    files_full,
    shown_bytes,
)
from backend.store.records import FileOrigin, FileRecord

HEAD_BYTES = 64
"""What `kind_of` looks at (every signature it knows is shorter)."""
DESCRIPTION_CHARS = 300


def info(record: FileRecord) -> FileInfo:
    """The record as clients and the model see it."""
    return FileInfo.model_validate(
        record.model_dump(exclude={"conversation_id", "sha256"})
    )


@dataclass(frozen=True, slots=True)
class Room:
    """An owner's files against their quota: `used` of `quota` bytes held
    (`quota` None: no quota)."""

    used: int
    quota: int | None

    @property
    def left(self) -> int | None:
        """Bytes they may still add (None: no bound)."""
        return None if self.quota is None else max(0, self.quota - self.used)

    def check(self, what: str, size: int) -> None:
        """`QuotaExceeded` (naming `what`) if `size` more bytes do not fit."""
        if self.quota is not None and self.used + size > self.quota:
            raise QuotaExceeded(what, self.used, self.quota)


class OwnerLocks:
    """One lock per owner, kept while someone holds it or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, owner: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(owner, (asyncio.Lock(), 0))
        self._locks[owner] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[owner]
            if users == 1:
                del self._locks[owner]
            else:
                self._locks[owner] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)


class FileShelf:
    def __init__(
        self,
        store: Store,
        blobs: BlobStore,
        *,
        max_bytes: int,
        max_files: int,
        clock: Callable[[], float],
        max_user_bytes: int | None = None,
    ) -> None:
        self.store = store
        self.blobs = blobs
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.max_user_bytes = max_user_bytes
        """The bytes of files one user may hold (None: no quota)."""
        self.clock = clock
        self.on_added: Callable[[FileRecord], None] = lambda _record: None
        self._owners = OwnerLocks()

    async def room(self, owner: str) -> Room:
        """What `owner` holds against their quota."""
        if self.max_user_bytes is None:
            return Room(0, None)
        return Room(await self.store.file_bytes(owner), self.max_user_bytes)

    def check_size(self, name: str, size: int) -> None:
        if size > self.max_bytes:
            raise FileTooLarge(
                f"{name!r} is {size} bytes; the largest file taken is "
                f"{self.max_bytes} bytes"
            )
        if size == 0:
            raise FileRefused(f"{name!r} is empty")

    async def add(
        self,
        conversation_id: str,
        name: str,
        content: bytes,
        *,
        origin: FileOrigin,
        owner: str | None = None,
        description: str = "",
        run_id: str | None = None,
        effect: EffectKey | None = None,
    ) -> FileRecord:
        """Keep `content` as a file of the conversation; `FileRefused` (why
        not), `LimitReached` (too many files) or its `QuotaExceeded` (past
        the owner's quota), with nothing kept. `owner` is the
        conversation's (None: looked up). With `effect` (a tool call's key
        and fence), the file's id comes from the key: a second call with it
        returns the first one's file, unchanged."""
        shown = clean_name(name)
        self.check_size(shown, len(content))
        kind = kind_of(shown, content[:HEAD_BYTES])
        if kind.text:
            check_text(shown, content)
        if effect is not None:
            made = await self.made(conversation_id, effect.key)
            if made is not None:  # a second execution: the first one's file
                return made
        record = FileRecord(
            id=uuid.uuid4().hex if effect is None else keyed_id(effect.key),
            conversation_id=conversation_id,
            name=shown,
            media_type=kind.media_type,
            size=len(content),
            sha256="",  # once the content is kept
            origin=origin,
            description=" ".join(description.split())[:DESCRIPTION_CHARS],
            run_id=run_id,
            created_at=self.clock(),
        )
        if owner is None:
            found = await self.store.conversation(conversation_id)
            if found is None:
                raise StoreError(f"no conversation {conversation_id!r}")
            owner = found.owner
        async with self._owners.hold(owner):
            room = await self.room(owner)
            room.check(f"{shown!r} ({shown_bytes(record.size)})", record.size)
            if len(await self.store.files(conversation_id)) >= self.max_files:
                raise files_full(self.max_files)  # before its content is kept
            record = record.model_copy(update={"sha256": await self.blobs.put(content)})
            kept = await self.store.add_file(
                record, limit=self.max_files, quota=self.max_user_bytes, effect=effect
            )
        if kept is record:  # new, not one made before under the same key
            self.on_added(record)
        return kept

    async def made(self, conversation_id: str, key: str) -> FileRecord | None:
        """The file a tool call with idempotency key `key` made, if any."""
        return await self.store.file(conversation_id, keyed_id(key))

    async def files(self, conversation_id: str) -> list[FileRecord]:
        return await self.store.files(conversation_id)

    async def read(
        self, conversation_id: str, file_id: str
    ) -> tuple[FileRecord, bytes] | None:
        """The file and its content (None: the conversation has no such file)."""
        record = await self.store.file(conversation_id, file_id)
        if record is None:
            return None
        return record, await self.blobs.get(record.sha256)


def keyed_id(key: str) -> str:
    """The id of the file a tool call makes: the same for every execution
    of the call (its idempotency key), like any other file id in shape."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]
