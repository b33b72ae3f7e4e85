"""The statements behind `SqlStore`'s branches: the versions of a
conversation an edit or a switch set aside (`schema.branches`), their runs,
and the frames those runs sent. (They are written by the owner's batches:
`store/writes.py`.)"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.records import BranchRecord, RunRecord
from backend.store.rows import run_record
from backend.store.schema import branches, frames, runs
from backend.transcript import Frame

b = branches.c


async def branches_of(
    conn: AsyncConnection, conversation_id: str
) -> list[BranchRecord]:
    """The conversation's branches, oldest version first."""
    query = (
        select(branches)
        .where(b.conversation_id == conversation_id)
        .order_by(b.created_at, b.id)
    )
    return [_record(row._asdict()) for row in (await conn.execute(query)).all()]


async def branch(
    conn: AsyncConnection, conversation_id: str, branch_id: str
) -> BranchRecord | None:
    query = select(branches).where(
        b.conversation_id == conversation_id, b.id == branch_id
    )
    row = (await conn.execute(query)).first()
    return None if row is None else _record(row._asdict())


async def runs_in(
    conn: AsyncConnection, conversation_id: str, branch_id: str
) -> list[RunRecord]:
    """The runs set aside with branch `branch_id`, oldest first."""
    query = (
        select(runs)
        .where(runs.c.conversation_id == conversation_id, runs.c.branch_id == branch_id)
        .order_by(runs.c.started_at, runs.c.id)
    )
    return [run_record(row) for row in (await conn.execute(query)).all()]


async def frames_of(
    conn: AsyncConnection, conversation_id: str, run_ids: Sequence[str]
) -> list[Frame]:
    """The frames the runs `run_ids` sent that the store still keeps, in order."""
    if not run_ids:
        return []
    f = frames.c
    query = (
        select(f.seq, f.run_id, f.text)
        .where(f.conversation_id == conversation_id, f.run_id.in_(run_ids))
        .order_by(f.seq)
    )
    rows = (await conn.execute(query)).all()
    return [Frame(int(seq), run_id, text) for seq, run_id, text in rows]


def _record(values: dict[str, object]) -> BranchRecord:
    values.pop("conversation_id", None)
    return BranchRecord.model_validate(values)
