"""The statements behind `SqlStore`'s conversations and what they hold
(messages, runs, frames), each run on a connection `SqlStore` holds (in
its transaction, or for a read)."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from backend.store import sql_files
from backend.store.base import Loaded
from backend.store.records import (
    LIVE_STATUSES,
    ConversationRecord,
    Page,
    PendingInputRecord,
    RunRecord,
)
from backend.store.rows import (
    conversation_record,
    encode_cursor,
    message,
    rowcount,
    run_record,
)
from backend.store.schema import conversations, frames, messages, pending_inputs, runs
from backend.store.writes import Statements
from backend.transcript import Frame, Message

c = conversations.c


async def create(conn: AsyncConnection, record: ConversationRecord) -> None:
    await conn.execute(insert(conversations).values(**record.model_dump()))


async def take(
    conn: AsyncConnection,
    statements: Statements,
    conversation_id: str,
    max_frame_bytes: int,
) -> Loaded | None:
    """Raise the conversation's epoch and read all it holds (None: no such
    conversation)."""
    held = await conn.execute(statements.held, {"cid": conversation_id})
    before = held.scalar()
    taken = await conn.execute(statements.take, {"cid": conversation_id})
    row = taken.first()
    if row is None or before is None:
        return None
    return Loaded(
        record=conversation_record(row),
        epoch=int(row.epoch),
        released=int(before) <= 0,
        messages=await history(conn, conversation_id),
        frames=await last_frames(conn, conversation_id, max_frame_bytes),
        last_seq=await last_seq(conn, conversation_id),
        files=await sql_files.files_of(conn, conversation_id),
        inputs=await pending_of(conn, conversation_id),
    )


async def pending_of(
    conn: AsyncConnection, conversation_id: str
) -> list[PendingInputRecord]:
    """The conversation's pending inputs, in order."""
    i = pending_inputs.c
    query = (
        select(pending_inputs)
        .where(i.conversation_id == conversation_id)
        .order_by(i.position, i.created_at, i.id)
    )
    return [
        PendingInputRecord.model_validate(
            {k: v for k, v in row._asdict().items() if k != "conversation_id"}
        )
        for row in (await conn.execute(query)).all()
    ]


async def conversation(
    conn: AsyncConnection, conversation_id: str
) -> ConversationRecord | None:
    query = select(conversations).where(c.id == conversation_id)
    row = (await conn.execute(query)).first()
    return conversation_record(row) if row is not None else None


async def page(
    conn: AsyncConnection,
    owner: str,
    limit: int,
    after: tuple[float, str] | None,
    origins: Collection[str] | None = None,
) -> Page:
    """`owner`'s conversations, the latest updated first, from `after` (the
    decoded cursor of the page before); only those started by one of
    `origins` if given."""
    query = select(conversations).where(c.owner == owner)
    if origins is not None:
        query = query.where(c.origin.in_(sorted(origins)))
    if after is not None:
        updated_at, last_id = after
        query = query.where(
            or_(
                c.updated_at < updated_at,
                and_(c.updated_at == updated_at, c.id < last_id),
            )
        )
    query = query.order_by(c.updated_at.desc(), c.id.desc()).limit(limit + 1)
    rows = (await conn.execute(query)).all()
    items = [conversation_record(row) for row in rows[:limit]]
    more = len(rows) > limit and items
    return Page(items=items, next=encode_cursor(items[-1]) if more else None)


async def rename(conn: AsyncConnection, conversation_id: str, title: str) -> bool:
    query = update(conversations).where(c.id == conversation_id).values(title=title)
    return rowcount(await conn.execute(query)) > 0


async def remove(conn: AsyncConnection, conversation_id: str) -> bool:
    query = delete(conversations).where(c.id == conversation_id)
    return rowcount(await conn.execute(query)) > 0


async def history(conn: AsyncConnection, conversation_id: str) -> list[Message]:
    query = (
        select(messages)
        .where(messages.c.conversation_id == conversation_id)
        .order_by(messages.c.position)
    )
    rows = (await conn.execute(query)).all()
    return [message(row) for row in rows]


async def runs_of(conn: AsyncConnection, conversation_id: str) -> list[RunRecord]:
    """The conversation's runs as it stands (not those set aside), oldest first."""
    query = (
        select(runs)
        .where(runs.c.conversation_id == conversation_id, runs.c.branch_id.is_(None))
        .order_by(runs.c.started_at, runs.c.id)
    )
    rows = (await conn.execute(query)).all()
    return [run_record(row) for row in rows]


async def live_runs(
    conn: AsyncConnection, conversation_id: str | None, parked: bool
) -> list[RunRecord]:
    query = select(runs).where(_live(parked))
    if conversation_id is not None:
        query = query.where(runs.c.conversation_id == conversation_id)
    query = query.order_by(runs.c.started_at, runs.c.id)
    rows = (await conn.execute(query)).all()
    return [run_record(row) for row in rows]


async def live_conversations(conn: AsyncConnection, parked: bool) -> list[str]:
    """Conversations with a live run, or with inputs waiting to be used
    (without `parked`: not those whose inputs wait with a parked run for
    its user)."""
    live = select(runs.c.conversation_id).where(_live(parked))
    i = pending_inputs.c
    waiting = select(i.conversation_id)
    if not parked:
        parked_run = select(runs.c.id).where(
            runs.c.conversation_id == i.conversation_id,
            runs.c.status == "waiting",
            select(c.id).where(c.id == i.conversation_id, c.epoch < 0).exists(),
        )
        waiting = waiting.where(~parked_run.exists())
    query = live.union(waiting)
    return [str(row[0]) for row in (await conn.execute(query)).all()]


def _live(parked: bool) -> ColumnElement[bool]:
    """Runs in a `LIVE_STATUSES` state; without `PARKED` ones (waiting, in a
    conversation let go cleanly: its epoch negative) unless `parked`."""
    live = runs.c.status.in_(LIVE_STATUSES)
    if parked:
        return live
    released = select(c.id).where(c.id == runs.c.conversation_id, c.epoch < 0).exists()
    return and_(live, or_(runs.c.status != "waiting", ~released))


async def last_frames(
    conn: AsyncConnection, conversation_id: str, max_bytes: int
) -> list[Frame]:
    """The conversation's last frames, at most `max_bytes` of text, in order."""
    f = frames.c
    query = (
        select(f.seq, f.run_id, f.text)
        .where(f.conversation_id == conversation_id)
        .order_by(f.seq.desc())
    )
    kept: list[Frame] = []
    total = 0
    result = await conn.stream(query)
    async for seq, run_id, body in result:
        total += len(body.encode())
        if total > max_bytes:
            break
        kept.append(Frame(seq, run_id, body))
    await result.close()
    kept.reverse()
    return kept


async def last_seq(conn: AsyncConnection, conversation_id: str) -> int:
    query = select(func.max(frames.c.seq)).where(
        frames.c.conversation_id == conversation_id
    )
    value = (await conn.execute(query)).scalar()
    return int(value or 0)
