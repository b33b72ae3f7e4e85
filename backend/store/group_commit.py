"""Group commit: batches written while a commit is under way go together
in the next one.

Every run writes its checkpoints as they come (before a tool runs, before
a wait, at its end), each a transaction of its own: with a thousand runs
under way, a thousand commits where a few would do. `GroupCommit` keeps
one commit under way at a time; the batches that arrive meanwhile wait,
and the next commit writes all of them in one transaction
(`Store.write_all`: each kind of row one statement for all). A write that
finds nothing under way starts at once, so a lone write (a stopped run's
outcome) waits for nothing but its own commit, and under load no write
waits for more than the commit ahead of it.

No task of its own: the first writer to find the way free leads (writes
the group it finds, its own batch in it), and hands the lead to the
oldest writer still waiting when its commit is done. A batch refused by
the fence (another instance owns its conversation now) fails only its
writer: the group is written again without it. Any other failure fails
the whole group, each writer keeping its batch (`Journal.give_back`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from backend.store.base import Batch, Fenced, StoreError

GROUP_LIMIT = 256
"""Batches in one commit, at most (a bound on one transaction's size)."""


@dataclass(eq=False)
class _Writer:
    """One `write` waiting: its batch, and how its wait ended."""

    batch: Batch
    wake: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    """Done when the batch is written or failed, or when its writer leads."""
    settled: bool = False
    failure: BaseException | None = None
    leads: bool = False
    """Handed the lead: it writes the next group."""

    def settle(self, failure: BaseException | None = None) -> None:
        self.settled, self.failure = True, failure
        if not self.wake.done():
            self.wake.set_result(None)

    def outcome(self) -> None:
        if self.failure is not None:
            raise self.failure


class GroupCommit:
    """`write(batch)` for many writers, through `write_all` one group at a time."""

    def __init__(self, write_all: Callable[[Sequence[Batch]], Awaitable[None]]) -> None:
        self._write_all = write_all
        self._waiting: list[_Writer] = []
        self._busy = False
        self.commits = 0
        """Transactions tried (what the tests count)."""

    async def write(self, batch: Batch) -> None:
        """Write `batch`, with whatever other batches wait for the same
        commit; raises what its own write failed with."""
        writer = _Writer(batch)
        self._waiting.append(writer)
        if self._busy:
            try:
                await writer.wake
            except asyncio.CancelledError:
                self._leave(writer)
                raise
            if writer.settled:  # written (or failed) in a leader's group
                return writer.outcome()
        await self._lead()
        writer.outcome()

    def _leave(self, writer: _Writer) -> None:
        """A writer cancelled while it waited: out of the queue; handed the
        lead, it passes it on, so the ones behind it are not left waiting."""
        if writer in self._waiting:
            self._waiting.remove(writer)
            if writer.leads:
                self._busy = False
                self._hand_on()

    async def _lead(self) -> None:
        """Write the waiting group (the leader's batch first in it), then
        hand the lead on."""
        self._busy = True
        try:
            await self._commit(self._group())
        finally:
            self._busy = False
            self._hand_on()

    def _group(self) -> list[_Writer]:
        """The oldest waiting writers, one batch per conversation (a
        second batch of one waits for the next commit: rows in order)."""
        group: list[_Writer] = []
        seen: set[str] = set()
        for writer in self._waiting:
            if len(group) == GROUP_LIMIT:
                break
            if writer.batch.conversation_id not in seen:
                seen.add(writer.batch.conversation_id)
                group.append(writer)
        chosen = {id(writer) for writer in group}
        self._waiting = [w for w in self._waiting if id(w) not in chosen]
        return group

    async def _commit(self, group: list[_Writer]) -> None:
        """One transaction for `group`; the fenced ones out, then again.
        Every writer of the group is settled when this returns or raises."""
        while group:
            self.commits += 1
            try:
                await self._write_all([writer.batch for writer in group])
            except Fenced as exc:
                stale = set(exc.conversation_ids)
                for writer in group:
                    cid = writer.batch.conversation_id
                    if cid in stale or not stale:
                        writer.settle(Fenced([cid]))
                group = [w for w in group if not w.settled]
                continue
            except StoreError as exc:
                for writer in group:
                    writer.settle(StoreError(str(exc)))
                return
            except BaseException as exc:  # a cancelled leader: unknown, redo
                for writer in group:
                    writer.settle(StoreError(f"the write was interrupted: {exc!r}"))
                raise
            for writer in group:
                writer.settle()
            return

    def _hand_on(self) -> None:
        """The lead to the oldest writer still waiting, if any."""
        while self._waiting and self._waiting[0].wake.done():
            self._waiting.pop(0)  # cancelled while it waited: gone
        if self._waiting:
            self._busy = True
            leader = self._waiting[0]
            leader.leads = True
            leader.wake.set_result(None)
