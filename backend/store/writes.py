"""The write side of `SqlStore`: its statements (built once per dialect), a
flush of `Batch`es (each kind of change one statement over all of them),
the fence that ends every owner's write, and the tool effects written with
what they did."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Connection,
    Executable,
    String,
    Table,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.base import Batch, EffectKey, Fenced, SetAside
from backend.store.cursor_plans import CursorPlans
from backend.store.rows import frame_row, message_row, run_row
from backend.store.schema import (
    branches,
    conversations,
    frames,
    messages,
    pending_inputs,
    run_usage,
    runs,
    tool_effects,
)

Rows = list[dict[str, Any]]


def _upsert(dialect: Any, table: Table, key: list[str], kept: Sequence[str]) -> Any:
    """Insert, or update every column but `kept` of the row at `key`."""
    upsert = dialect.insert(table)
    return upsert.on_conflict_do_update(
        index_elements=key,
        set_={
            column.name: upsert.excluded[column.name]
            for column in table.c
            if column.name not in kept
        },
    )


class Statements:
    """The statements a flush, a take-over and a let-go run, built once
    (each is executed with a list of rows: one round trip for any number
    of conversations).

    Every insert is idempotent by its natural key (a conversation's id, a
    message's position, a frame's seq, a run's id), so a batch applied twice
    (its first COMMIT was lost on the way back) ends as if applied once."""

    def __init__(self, dialect_name: str) -> None:
        # the other database's dialect is not imported (2.4 MB for PostgreSQL's)
        dialect = importlib.import_module(f"sqlalchemy.dialects.{dialect_name}")
        self.plans = CursorPlans()
        """How a flush runs them on SQLite's cursor (`cursor_plans.py`)."""
        self._ownership()
        self.create = dialect.insert(conversations).on_conflict_do_nothing(
            index_elements=["id"]
        )
        self.frames = dialect.insert(frames).on_conflict_do_nothing(
            index_elements=["conversation_id", "seq"]
        )
        position = ["conversation_id", "position"]
        self.messages = _upsert(dialect, messages, position, position)
        self.save_run = _upsert(
            dialect, runs, ["id"], ("id", "started_at", "branch_id")
        )
        self.save_usage = _upsert(
            dialect, run_usage, ["run_id"], ("run_id", "owner", "started_at", "day")
        )
        """A run's row of the usage ledger: its sums as they are now."""
        self.add_branch = dialect.insert(branches).on_conflict_do_nothing(
            index_elements=["id"]
        )
        self.add_input = dialect.insert(pending_inputs).on_conflict_do_nothing(
            index_elements=["id"]
        )
        self._deletes()

    def _ownership(self) -> None:
        c = conversations.c
        self.fence = (
            update(conversations)
            .where(tuple_(c.id, c.epoch).in_(bindparam("owned", expanding=True)))
            .values(epoch=c.epoch)
            .returning(c.id)
        )
        """Lock the rows of the conversations still at the writers' epochs
        (and say which): a take-over's raise of the epoch waits for this
        transaction, or this finds the epoch moved."""
        self.held = select(c.epoch).where(c.id == bindparam("cid")).with_for_update()
        self.take = (
            update(conversations)
            .where(c.id == bindparam("cid"))
            .values(epoch=func.abs(c.epoch) + 1)
            .returning(*conversations.c)
        )
        owned = and_(c.id == bindparam("cid"), c.epoch == bindparam("held"))
        self.release = update(conversations).where(owned).values(epoch=-c.epoch)
        """A clean let-go: the epoch's sign says the owner stored all it sent
        (a take-over then needs no gap in the seqs); its writes are fenced
        off from then on like any stale owner's."""
        self.fence_one = update(conversations).where(owned).values(epoch=c.epoch)
        self.touch = (
            update(conversations)
            .where(c.id == bindparam("cid"))
            .values(
                updated_at=bindparam("at"),
                title=case(
                    (
                        and_(
                            bindparam("title", type_=String) != None,  # noqa: E711
                            c.title.in_([bindparam("was", type_=String), ""]),
                        ),
                        bindparam("title", type_=String),
                    ),
                    else_=c.title,
                ),
            )
        )
        self.touch_fenced = self.touch.where(c.epoch == bindparam("held"))
        """A flush of one conversation: the touch is its fence too."""

    def _deletes(self) -> None:
        f, m = frames.c, messages.c
        self.window = delete(frames).where(
            f.conversation_id == bindparam("cid"), f.seq < bindparam("below")
        )
        self.truncate = delete(messages).where(
            m.conversation_id == bindparam("cid"), m.position >= bindparam("at")
        )
        self._branches()
        i = pending_inputs.c
        self.delete_input = delete(pending_inputs).where(
            i.conversation_id == bindparam("cid"), i.id == bindparam("iid")
        )

    def _branches(self) -> None:
        b, r = branches.c, runs.c
        cid = bindparam("cid", type_=String)
        bid = bindparam("bid", type_=String)
        self.adopt = (
            update(branches)
            .where(
                b.conversation_id == cid,
                b.parent.is_(None),
                b.fork_at > bindparam("at"),
                b.id != bid,
            )
            .values(parent=bid)
        )
        """A tail set aside takes the branches that forked from it."""
        self.set_aside_run = (
            update(runs)
            .where(r.conversation_id == cid, r.id == bindparam("rid"))
            .values(branch_id=bid)
        )
        self.restore_runs = (
            update(runs)
            .where(r.conversation_id == cid, r.branch_id == bid)
            .values(branch_id=None)
        )
        self.free_children = (
            update(branches)
            .where(b.conversation_id == cid, b.parent == bid)
            .values(parent=None)
        )
        self.drop_branch = delete(branches).where(b.conversation_id == cid, b.id == bid)
        self.drop_branches = delete(branches).where(b.conversation_id == cid)
        self.drop_branch_runs = delete(runs).where(
            r.conversation_id == cid, r.branch_id.is_not(None)
        )


def _touches(batch: Batch) -> bool:
    """The batch changes what the conversation list shows (its time, title)."""
    return bool(
        batch.messages
        or batch.truncate_history_at is not None
        or batch.set_aside
        or batch.restore
        or batch.drop_branches
        or batch.title is not None
    )


def _touch(b: Batch) -> dict[str, Any]:
    return {
        "cid": b.conversation_id,
        "at": b.updated_at,
        "title": b.title,
        "was": b.title_was,
    }


def _created(b: Batch) -> Rows:
    return [] if b.create is None else [{**b.create.model_dump(), "epoch": b.epoch}]


def _touched(b: Batch) -> Rows:
    return [_touch(b)] if _touches(b) else []


def _cut(b: Batch) -> Rows:
    at = b.truncate_history_at
    return [] if at is None else [{"cid": b.conversation_id, "at": at}]


def _messages(b: Batch) -> Rows:
    return [message_row(b.conversation_id, pos, m) for pos, m in b.messages]


def _frames(b: Batch) -> Rows:
    return [frame_row(b.conversation_id, f, b.epoch) for f in b.frames]


def _window(b: Batch) -> Rows:
    below = b.keep_frames_from
    return [] if below is None else [{"cid": b.conversation_id, "below": below}]


def _runs(b: Batch) -> Rows:
    return [run_row(run, b.epoch) for run in b.runs]


def _usage(b: Batch) -> Rows:
    return [{**row.model_dump(), "day": row.day} for row in b.usage]


def _branch_row(cid: str, tail: SetAside) -> dict[str, Any]:
    return {
        "id": tail.branch_id,
        "conversation_id": cid,
        "parent": None,
        "fork_at": tail.fork_at,
        "messages": [
            m.model_dump(mode="json", exclude={"reasoning"}) for m in tail.messages
        ],
        "created_at": tail.created_at,
    }


def _tails(b: Batch) -> Rows:
    return [_branch_row(b.conversation_id, tail) for tail in b.set_aside]


def _adopted(b: Batch) -> Rows:
    cid = b.conversation_id
    return [{"cid": cid, "bid": t.branch_id, "at": t.fork_at} for t in b.set_aside]


def _aside(b: Batch) -> Rows:
    cid = b.conversation_id
    return [
        {"cid": cid, "bid": tail.branch_id, "rid": rid}
        for tail in b.set_aside
        for rid in tail.run_ids
    ]


def _restored(b: Batch) -> Rows:
    return [{"cid": b.conversation_id, "bid": bid} for bid in b.restore]


def _dropped(b: Batch) -> Rows:
    return [{"cid": b.conversation_id}] if b.drop_branches else []


def _inputs(b: Batch) -> Rows:
    return [
        {**record.model_dump(), "conversation_id": b.conversation_id}
        for record in b.inputs
    ]


def _used(b: Batch) -> Rows:
    return [{"cid": b.conversation_id, "iid": iid} for iid in b.delete_inputs]


@dataclass(frozen=True, slots=True)
class _Kind:
    """One kind of change: its statement, and its rows from one batch."""

    statement: Callable[[Statements], Executable]
    rows: Callable[[Batch], Rows]
    several_only: bool = False
    """A single batch's touch is its fence instead, last (`write`)."""


KINDS = (
    _Kind(lambda s: s.create, _created),
    _Kind(lambda s: s.touch, _touched, several_only=True),
    _Kind(lambda s: s.truncate, _cut),
    _Kind(lambda s: s.messages, _messages),
    _Kind(lambda s: s.frames, _frames),
    _Kind(lambda s: s.window, _window),
    _Kind(lambda s: s.save_run, _runs),
    _Kind(lambda s: s.save_usage, _usage),
    _Kind(lambda s: s.add_branch, _tails),
    _Kind(lambda s: s.adopt, _adopted),
    _Kind(lambda s: s.set_aside_run, _aside),
    _Kind(lambda s: s.restore_runs, _restored),
    _Kind(lambda s: s.free_children, _restored),
    _Kind(lambda s: s.drop_branch, _restored),
    _Kind(lambda s: s.drop_branch_runs, _dropped),
    _Kind(lambda s: s.drop_branches, _dropped),
    _Kind(lambda s: s.add_input, _inputs),
    _Kind(lambda s: s.delete_input, _used),
)
"""The changes a flush makes, in the order it makes them: the history is cut
before the new messages are added; a tail is set aside after the run
records are saved (a late record of one of its runs is set aside too),
and before a branch is brought back (a switch does both: the tail set
aside forks where the branch brought back does, so neither takes the
other's children); a pending input used in the batch that added it is gone
after it."""


def write(conn: Connection, statements: Statements, batches: Sequence[Batch]) -> None:
    """Each kind of change as one statement for all the batches (one
    round trip each, however many conversations the batches touch),
    then the fence: a batch whose epoch is not its conversation's any
    more fails the whole transaction (`Fenced`), so nothing is written.
    An `unfenced` batch (usage rows of a conversation never stored) has
    no fence. Synchronous: run whole by `Database.transact`."""
    several = len(batches) > 1
    for kind in KINDS:
        if kind.several_only and not several:
            continue
        rows = [row for b in batches for row in kind.rows(b)]
        if rows:
            statements.plans.execute(conn, kind.statement(statements), rows)
    if not several and _touches(batches[0]) and not batches[0].unfenced:
        batch = batches[0]
        touch = {**_touch(batch), "held": batch.epoch}
        if statements.plans.execute(conn, statements.touch_fenced, [touch]) != 1:
            raise Fenced([batch.conversation_id])
        return
    owned = [(b.conversation_id, b.epoch) for b in batches if not b.unfenced]
    if owned:
        fence(conn, statements, owned)


def fence(
    conn: Connection, statements: Statements, owned: list[tuple[str, int]]
) -> None:
    """The last statement before COMMIT: lock the conversations' rows if
    their epochs are still the writer's (a take-over's raise then waits
    for this COMMIT), else `Fenced` (the transaction rolls back). Last,
    so the lock is held for no more than the COMMIT."""
    if len(owned) == 1:
        ((cid, epoch),) = owned
        one = [{"cid": cid, "held": epoch}]
        if statements.plans.execute(conn, statements.fence_one, one) != 1:
            raise Fenced([cid])
        return
    result = conn.execute(statements.fence, {"owned": owned})
    current = {str(row[0]) for row in result}
    stale = [cid for cid, _epoch in owned if cid not in current]
    if stale:
        raise Fenced(stale)


async def effect_done(conn: AsyncConnection, key: str) -> str | None:
    """What the tool call with idempotency key `key` did (None: not done)."""
    query = select(tool_effects.c.result).where(tool_effects.c.key == key)
    value = (await conn.execute(query)).scalar()
    return None if value is None else str(value)


async def record_effect(
    conn: AsyncConnection,
    statements: Statements,
    effect: EffectKey,
    result: str,
    at: float,
) -> None:
    """Keep what a tool call did, then fence its conversation (last)."""
    await conn.execute(
        insert(tool_effects).values(
            key=effect.key,
            conversation_id=effect.conversation_id,
            tool_name=effect.tool_name,
            result=result,
            created_at=at,
        )
    )
    await conn.run_sync(fence, statements, [(effect.conversation_id, effect.epoch)])
