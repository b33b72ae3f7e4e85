"""The statements behind `SqlStore`'s notes, each run on a connection
`SqlStore` holds; a change a tool call makes is kept with its effect key,
in the same transaction, so a second call with that key returns the first
one's note."""

from __future__ import annotations

from sqlalchemy import and_, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.base import EffectKey, LimitReached
from backend.store.records import NoteRecord
from backend.store.schema import notes
from backend.store.writes import Statements, effect_done, record_effect

n = notes.c


async def add_note(
    conn: AsyncConnection,
    statements: Statements,
    owner: str,
    text: str,
    saved_at: float,
    limit: int,
    effect: EffectKey | None,
) -> NoteRecord:
    if effect is not None:
        done = await _done_before(conn, effect)
        if done is not None:
            return done
    note = await _insert(conn, owner, text, saved_at, limit)
    if effect is not None:
        await record_effect(conn, statements, effect, note.model_dump_json(), saved_at)
    return note


async def _insert(
    conn: AsyncConnection, owner: str, text: str, saved_at: float, limit: int
) -> NoteRecord:
    count, top = (
        await conn.execute(
            select(func.count(), func.max(n.number)).where(n.owner == owner)
        )
    ).one()
    if count >= limit:
        raise LimitReached(f"{limit} notes are saved already; delete some first")
    number = int(top or 0) + 1
    await conn.execute(
        insert(notes).values(owner=owner, number=number, text=text, saved_at=saved_at)
    )
    return NoteRecord(id=number, text=text, saved_at=saved_at)


async def notes_of(conn: AsyncConnection, owner: str) -> list[NoteRecord]:
    query = (
        select(n.number, n.text, n.saved_at).where(n.owner == owner).order_by(n.number)
    )
    rows = (await conn.execute(query)).all()
    return [NoteRecord(id=r.number, text=r.text, saved_at=r.saved_at) for r in rows]


async def delete_note(
    conn: AsyncConnection,
    statements: Statements,
    owner: str,
    note_id: int,
    effect: EffectKey | None,
) -> NoteRecord | None:
    if effect is not None:
        done = await _done_before(conn, effect)
        if done is not None:
            return done
    where = and_(n.owner == owner, n.number == note_id)
    row = (
        await conn.execute(select(n.number, n.text, n.saved_at).where(where))
    ).first()
    if row is None:
        return None
    await conn.execute(delete(notes).where(where))
    note = NoteRecord(id=row.number, text=row.text, saved_at=row.saved_at)
    if effect is not None:
        made = note.model_dump_json()
        await record_effect(conn, statements, effect, made, note.saved_at)
    return note


async def _done_before(conn: AsyncConnection, effect: EffectKey) -> NoteRecord | None:
    """The note of the call with this key, if it was applied before."""
    done = await effect_done(conn, effect.key)
    return None if done is None else NoteRecord.model_validate_json(done)
