"""The statements behind `SqlStore`'s share links (table `shares`), each
run on a connection `SqlStore` holds. A conversation's shares go with it
(the foreign key cascades)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.schema import shares
from backend.store.share_records import ShareRecord, Snapshot

s = shares.c


def _record(row: Row[Any]) -> ShareRecord:
    values = row._asdict()
    values["snapshot"] = Snapshot.model_validate(values.pop("messages"))
    return ShareRecord.model_validate(values)


async def add(conn: AsyncConnection, record: ShareRecord) -> None:
    values = record.model_dump(mode="json", exclude={"snapshot"})
    values["messages"] = record.snapshot.model_dump(mode="json")
    await conn.execute(insert(shares).values(**values))


async def share(conn: AsyncConnection, share_id: str) -> ShareRecord | None:
    row = (await conn.execute(select(shares).where(s.id == share_id))).first()
    return None if row is None else _record(row)


async def of_conversation(
    conn: AsyncConnection, conversation_id: str
) -> list[ShareRecord]:
    query = (
        select(shares)
        .where(s.conversation_id == conversation_id)
        .order_by(s.created_at.desc(), s.id)
    )
    return [_record(row) for row in (await conn.execute(query)).all()]


async def remove(conn: AsyncConnection, share_id: str, owner: str) -> bool:
    where = (s.id == share_id) & (s.owner == owner)
    return bool((await conn.execute(delete(shares).where(where))).rowcount)
