"""`FileShelf`: a conversation's files, kept and read back.

An upload and a tool's artifact come in the same way: the name is cleaned,
the size and the kind checked (`backend/files/kinds.py`), the content kept
by its SHA-256 (`BlobStore`), the record stored (at most
`max_files_per_conversation` per conversation). Then `on_added` tells
whoever shows the conversation (the `ChatService` sends `files_update`).
Nothing here takes a path from a client: files are named by their ids.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable

from backend.files.blobs import BlobStore
from backend.files.kinds import (
    FileRefused,
    FileTooLarge,
    check_text,
    clean_name,
    kind_of,
)
from backend.protocol import FileInfo
from backend.store.base import EffectKey, FileOrigin, FileRecord, Store

HEAD_BYTES = 64
"""What `kind_of` looks at (every signature it knows is shorter)."""
DESCRIPTION_CHARS = 300


def info(record: FileRecord) -> FileInfo:
    """The record as clients and the model see it."""
    return FileInfo.model_validate(
        record.model_dump(exclude={"conversation_id", "sha256"})
    )


class FileShelf:
    def __init__(
        self,
        store: Store,
        blobs: BlobStore,
        *,
        max_bytes: int,
        max_files: int,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.blobs = blobs
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.clock = clock
        self.on_added: Callable[[FileRecord], None] = lambda _record: None

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
        description: str = "",
        run_id: str | None = None,
        effect: EffectKey | None = None,
    ) -> FileRecord:
        """Keep `content` as a file of the conversation; `FileRefused` (why
        not) or `LimitReached` (too many files), with nothing kept. With
        `effect` (a tool call's key and fence), the file's id comes from the
        key: a second call with it returns the first one's file, unchanged."""
        shown = clean_name(name)
        self.check_size(shown, len(content))
        kind = kind_of(shown, content[:HEAD_BYTES])
        if kind.text:
            check_text(shown, content)
        sha256 = await self.blobs.put(content)
        record = FileRecord(
            id=uuid.uuid4().hex if effect is None else keyed_id(effect.key),
            conversation_id=conversation_id,
            name=shown,
            media_type=kind.media_type,
            size=len(content),
            sha256=sha256,
            origin=origin,
            description=" ".join(description.split())[:DESCRIPTION_CHARS],
            run_id=run_id,
            created_at=self.clock(),
        )
        kept = await self.store.add_file(record, limit=self.max_files, effect=effect)
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
