"""`SqlStore`'s share links on SQLite and on a real PostgreSQL: a snapshot
is kept and read back whole, listed newest first, deleted only by its
owner, and deleted with its conversation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from backend.store.base import Batch
from backend.store.records import ConversationRecord
from backend.store.share_records import (
    SharedCall,
    SharedMessage,
    ShareRecord,
    Snapshot,
)
from backend.store.sql import SqlStore

SNAPSHOT = Snapshot(
    messages=(
        SharedMessage(role="user", text="what is 2+3? «café»"),
        SharedMessage(
            role="assistant",
            text="2 + 3 = 5",
            tools=(
                SharedCall(name="add", arguments='{"expression": "2+3"}', status="ok"),
            ),
        ),
    ),
    files=("notes.txt",),
)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[SqlStore]:
    opened = SqlStore(database_url)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def link(share_id: str, at: float, conversation_id: str = "c1") -> ShareRecord:
    return ShareRecord(
        id=share_id,
        conversation_id=conversation_id,
        owner="ann",
        title="Sums",
        snapshot=SNAPSHOT,
        created_at=at,
    )


async def test_a_share_is_kept_listed_and_deleted_by_its_owner_only(
    store: SqlStore,
) -> None:
    """The snapshot reads back equal; the list is newest first; bob cannot delete."""
    record = ConversationRecord(id="c1", owner="ann", created_at=1, updated_at=1)
    await store.write(Batch("c1", 1.0, create=record))
    await store.add_share(link("s1", 10.0))
    await store.add_share(link("s2", 20.0))

    assert await store.share("s1") == link("s1", 10.0)
    assert [s.id for s in await store.shares("c1")] == ["s2", "s1"]
    assert await store.delete_share("s1", "bob") is False
    assert await store.delete_share("s1", "ann") is True
    assert await store.share("s1") is None
    assert await store.delete_share("s1", "ann") is False

    assert await store.delete_conversation("c1") is True
    assert await store.share("s2") is None
