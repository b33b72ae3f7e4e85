"""`BlobCollector`: the contents of deleted conversations' files leave the
disk; content another file still names, content younger than the grace,
and content an upload names again while a pass runs stay. Times are set
with `os.utime`, never waited for."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import AsyncIterator, Collection
from pathlib import Path

import httpx
import pytest

from backend.files.blobs import BlobStore
from backend.files.collector import BlobCollector, Collected
from backend.store.records import ConversationRecord, FileRecord
from backend.store.sql import SqlStore
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM
from tests.test_files import live, upload

GRACE_S = 600.0


def age(path: Path, seconds: float = 2 * GRACE_S) -> None:
    """Make `path` look written `seconds` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


async def test_a_deleted_conversations_content_goes_and_the_rest_stays(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A pass removes only old, unnamed blobs and stale part files; the rest stays."""
    files_dir = tmp_path / "files"
    harness = await start_server(ScriptedLLM(), files_dir=files_dir, blob_gc_s=0)
    state = harness.server.app.state
    blobs: BlobStore = state.files.blobs
    _, deleted = await live(harness)
    _, kept = await live(harness)
    unique, shared, fresh = b"only in the deleted one", b"in both", b"not yet named"
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        for conversation, name, content in (
            (deleted, "unique.txt", unique),
            (deleted, "shared.txt", shared),
            (kept, "shared.txt", shared),
        ):
            added = await upload(http, conversation, name, content)
            assert added.status_code == 201, added.text
        await blobs.put(fresh)  # an upload whose record is not in yet
        for content in (unique, shared):
            age(blobs.path_of(digest(content)))
        old_part = blobs.path_of(digest(unique)).with_name(".part-cut-off")
        new_part = blobs.path_of(digest(unique)).with_name(".part-writing")
        old_part.write_bytes(b"half")
        new_part.write_bytes(b"half")
        age(old_part)
        stranger = files_dir / "README"  # not a blob: never touched
        stranger.write_text("keep")
        age(stranger)

        assert (await http.delete(f"/api/conversations/{deleted}")).status_code == 204
        collected = await state.blob_collector.collect()
        listed = (await http.get(f"/api/conversations/{kept}/files")).json()
        got = await http.get(
            f"/api/conversations/{kept}/files/{listed['items'][0]['id']}"
        )

    assert collected == Collected(blobs=1, bytes=len(unique), leftovers=1, kept=1)
    assert not blobs.path_of(digest(unique)).exists()
    assert blobs.path_of(digest(shared)).read_bytes() == shared
    assert blobs.path_of(digest(fresh)).read_bytes() == fresh
    assert (old_part.exists(), new_part.exists(), stranger.exists()) == (
        False,
        True,
        True,
    )
    assert got.content == shared
    assert await state.blob_collector.collect() == Collected(kept=1)


async def test_a_deletion_wakes_the_collector_of_a_running_server(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Deleting a conversation triggers a pass that removes its unused blob."""
    harness = await start_server(ScriptedLLM(), files_dir=tmp_path / "files")
    state = harness.server.app.state
    collector: BlobCollector = state.blob_collector
    _, conversation = await live(harness)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        added = await upload(http, conversation, "a.txt", b"soon unused")
        assert added.status_code == 201, added.text
        path = state.files.blobs.path_of(digest(b"soon unused"))
        age(path)
        before = collector.passes
        deleted = await http.delete(f"/api/conversations/{conversation}")
    assert deleted.status_code == 204
    await collector.wait_for_pass(before)
    assert not path.exists()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    store = SqlStore(f"sqlite:///{tmp_path / 'loopwire.db'}")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def test_content_named_again_during_a_pass_is_kept(
    sqlite_store: SqlStore, tmp_path: Path
) -> None:
    """An upload of content kept already (and unnamed, and old) arrives
    while a pass runs: after the pass listed the blob and asked the store,
    before its record is in. Its touch makes the pass put the blob back."""
    blobs = BlobStore(tmp_path / "files")
    content = b"deduplicated"
    path = blobs.path_of(await blobs.put(content))
    age(path)

    class RacingStore:
        """The store, with an upload of `content` landing as it answers."""

        async def referenced_blobs(self, digests: Collection[str]) -> set[str]:
            named = await sqlite_store.referenced_blobs(digests)
            assert await blobs.put(content) == digest(content)
            return named

    collector = BlobCollector(blobs, RacingStore(), grace_s=GRACE_S)  # type: ignore[arg-type]
    assert await collector.collect() == Collected()
    assert path.read_bytes() == content
    assert [p.name for p in path.parent.iterdir()] == [path.name]


async def test_file_bytes_and_referenced_blobs(database_url: str) -> None:
    """On SQLite and PostgreSQL: a user's bytes are their files' sizes,
    a file in two conversations counted twice; which digests are named."""
    store = SqlStore(database_url)
    await store.open()
    try:
        for cid, owner in (("c1", "ann"), ("c2", "ann"), ("c3", "bob")):
            await store.create_conversation(
                ConversationRecord(id=cid, owner=owner, created_at=1, updated_at=1)
            )
        for fid, cid, size, sha in (
            ("f1", "c1", 100, "a"),
            ("f2", "c2", 100, "a"),
            ("f3", "c2", 50, "b"),
            ("f4", "c3", 7, "c"),
        ):
            record = FileRecord(
                id=fid,
                conversation_id=cid,
                name="x.txt",
                media_type="text/plain",
                size=size,
                sha256=sha * 64,
                origin="upload",
                created_at=1,
            )
            await store.add_file(record, limit=10, quota=1000)
        assert [await store.file_bytes(o) for o in ("ann", "bob", "eve")] == [
            250,
            7,
            0,
        ]
        asked = ["a" * 64, "c" * 64, "d" * 64]
        assert await store.referenced_blobs(asked) == {"a" * 64, "c" * 64}
        assert await store.referenced_blobs([]) == set()
        await store.delete_conversation("c2")
        assert await store.file_bytes("ann") == 100
        assert await store.referenced_blobs(["b" * 64]) == set()
    finally:
        await store.close()


async def test_the_collector_task_ends_with_its_context() -> None:
    """Entered, it runs a task; left, the task is cancelled and awaited."""
    collector = BlobCollector(
        BlobStore(Path("/nonexistent")),
        None,  # type: ignore[arg-type]  # never asked: no pass runs
        grace_s=GRACE_S,
        every_s=3600,
    )
    async with collector:
        task = collector._task
        assert task is not None and not task.done()
    assert task.done() and task.cancelled()
    assert collector._task is None
