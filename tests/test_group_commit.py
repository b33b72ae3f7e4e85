"""Group commit (`store/group_commit.py`): batches that arrive while a
commit is under way are written together in the next one; a fenced batch
fails only its writer; a cancelled writer loses nobody else's write. Then
on the real store, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from backend.llm.base import Message
from backend.store.base import Batch, Fenced, StoreError
from backend.store.group_commit import GroupCommit
from backend.store.records import ConversationRecord
from backend.store.sql import SqlStore


class Database:
    """`write_all` that records each group and holds each commit until
    the test lets it go (`release`), failing the ones it is told to."""

    def __init__(self) -> None:
        self.groups: list[list[str]] = []
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()
        self.fenced: set[str] = set()
        self.broken = False
        self.after_commit: Callable[[], object] | None = None
        """Called once, in the loop's next turn after a commit returns."""

    async def write_all(self, batches: Sequence[Batch]) -> None:
        self.groups.append([b.conversation_id + f"@{b.updated_at:g}" for b in batches])
        self.entered.set()
        await self.gate.wait()
        if self.after_commit is not None:
            asyncio.get_running_loop().call_soon(self.after_commit)
            self.after_commit = None
        if self.broken:
            raise StoreError("the database is down")
        stale = [b.conversation_id for b in batches if b.conversation_id in self.fenced]
        if stale:
            raise Fenced(stale)

    async def next_commit(self) -> None:
        """Wait until a commit has started, and hold the next one."""
        await self.entered.wait()
        self.entered.clear()


def batch(cid: str, at: float = 1.0) -> Batch:
    return Batch(cid, at)


async def queued(group: GroupCommit, count: int) -> None:
    """One turn of the loop: the tasks just made run their first step, in
    which each joins the queue; then `count` writers wait in `group`."""
    await asyncio.sleep(0)
    assert len(group._waiting) == count


async def settle(tasks: Sequence[asyncio.Task[None]]) -> list[BaseException | None]:
    done = await asyncio.gather(*tasks, return_exceptions=True)
    return [x if isinstance(x, BaseException) else None for x in done]


async def test_a_lone_write_commits_at_once_and_later_ones_go_together() -> None:
    """The first write commits alone and at once; the writes that arrive
    during its commit wait, then go in one commit together, in order."""
    db = Database()
    group = GroupCommit(db.write_all)
    first = asyncio.create_task(group.write(batch("a")))
    await db.next_commit()
    later = [asyncio.create_task(group.write(batch(c))) for c in "bcd"]
    await queued(group, 3)
    db.gate.set()
    assert await settle([first, *later]) == [None] * 4
    assert db.groups == [["a@1"], ["b@1", "c@1", "d@1"]]
    assert group.commits == 2


async def test_two_batches_of_one_conversation_go_in_order_in_two_commits() -> None:
    """A conversation's second batch waits for the next commit, so its
    rows are written after its first batch's."""
    db = Database()
    group = GroupCommit(db.write_all)
    first = asyncio.create_task(group.write(batch("x", 1)))
    await db.next_commit()
    waiting = [
        asyncio.create_task(group.write(b))
        for b in (batch("a", 2), batch("a", 3), batch("b", 4))
    ]
    await queued(group, 3)
    db.gate.set()
    assert await settle([first, *waiting]) == [None] * 4
    assert db.groups == [["x@1"], ["a@2", "b@4"], ["a@3"]]


async def test_a_fenced_batch_fails_only_its_writer() -> None:
    """The fence refuses one conversation of a group: its writer gets
    `Fenced`, the group is written again without it, the others succeed."""
    db = Database()
    group = GroupCommit(db.write_all)
    first = asyncio.create_task(group.write(batch("x")))
    await db.next_commit()
    db.fenced = {"b"}
    waiting = [asyncio.create_task(group.write(batch(c))) for c in "abc"]
    await queued(group, 3)
    db.gate.set()
    results = await settle([first, *waiting])
    assert [type(r).__name__ if r else None for r in results] == [
        None,
        None,
        "Fenced",
        None,
    ]
    fenced = results[2]
    assert isinstance(fenced, Fenced) and fenced.conversation_ids == ("b",)
    assert db.groups == [["x@1"], ["a@1", "b@1", "c@1"], ["a@1", "c@1"]]


async def test_a_failed_commit_fails_each_writer_of_its_group() -> None:
    """A database failure fails every writer of the group, each with an
    error of its own; the next write goes through once it is back."""
    db = Database()
    db.broken = True
    group = GroupCommit(db.write_all)
    first = asyncio.create_task(group.write(batch("x")))
    await db.next_commit()
    waiting = [asyncio.create_task(group.write(batch(c))) for c in "ab"]
    await queued(group, 2)
    db.gate.set()
    results = await settle([first, *waiting])
    assert all(isinstance(r, StoreError) for r in results)
    assert results[1] is not results[2]
    assert str(results[1]) == "the database is down"
    db.broken = False
    await group.write(batch("y"))
    assert db.groups[-1] == ["y@1"]


async def test_a_cancelled_writer_leaves_and_the_others_are_written() -> None:
    """A writer cancelled while it waits leaves the queue; the one handed
    the lead and cancelled before it led passes it on: nobody waits for
    ever and every other batch is written."""
    db = Database()
    group = GroupCommit(db.write_all)
    first = asyncio.create_task(group.write(batch("x")))
    await db.next_commit()
    waiting = [asyncio.create_task(group.write(batch(c))) for c in "abcd"]
    await queued(group, 4)
    waiting[1].cancel()  # "b", while it waits
    db.after_commit = waiting[0].cancel  # "a", just handed the lead
    db.gate.set()
    results = await settle([first, *waiting])
    assert [type(r).__name__ if r else None for r in results] == [
        None,
        "CancelledError",
        "CancelledError",
        None,
        None,
    ]
    assert db.groups == [["x@1"], ["c@1", "d@1"]]


async def test_concurrent_checkpoints_share_commits_on_a_real_store(
    store: SqlStore,
) -> None:
    """Fifty conversations written at once: every message is stored, in
    fewer commits than writes, and the one written by a stale owner is
    refused alone (nothing of it stored)."""
    epochs: dict[str, int] = {}
    for n in range(50):
        cid = f"c{n}"
        await store.create_conversation(
            ConversationRecord(id=cid, owner="ann", created_at=1.0, updated_at=1.0)
        )
        taken = await store.take(cid, max_frame_bytes=1000)
        assert taken is not None
        epochs[cid] = taken.epoch
    epochs["c7"] -= 1  # c7's writer is a stale owner
    before = store._group.commits
    writes = [
        asyncio.create_task(
            store.write(
                Batch(
                    cid,
                    2.0,
                    messages=[(0, Message.user(f"to {cid}"))],
                    epoch=epoch,
                )
            )
        )
        for cid, epoch in epochs.items()
    ]
    results = await settle(writes)
    refused = [cid for cid, r in zip(epochs, results, strict=True) if r is not None]
    assert refused == ["c7"]
    assert isinstance(results[7], Fenced)
    assert store._group.commits - before < 50
    for cid in epochs:
        stored = [m.content for m in await store.messages(cid)]
        assert stored == ([] if cid == "c7" else [f"to {cid}"])
