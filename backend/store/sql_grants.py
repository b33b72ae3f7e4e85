"""The statements behind `SqlStore`'s tool grants, each run on a connection
`SqlStore` holds (in its transaction, or for a read)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.schema import tool_grants
from backend.store.user_records import ToolGrantRecord

g = tool_grants.c


def _record(row: Row[Any]) -> ToolGrantRecord:
    values = row._asdict()
    values["user"] = values.pop("user_name")
    return ToolGrantRecord.model_validate(values)


async def grants(conn: AsyncConnection, user: str) -> list[ToolGrantRecord]:
    query = select(tool_grants).where(g.user_name == user).order_by(g.created_at, g.id)
    return [_record(row) for row in (await conn.execute(query)).all()]


async def add(conn: AsyncConnection, record: ToolGrantRecord) -> None:
    values = record.model_dump()
    values["user_name"] = values.pop("user")
    await conn.execute(insert(tool_grants).values(**values))


async def revoke(
    conn: AsyncConnection, user: str, grant_id: str
) -> ToolGrantRecord | None:
    where = (g.id == grant_id) & (g.user_name == user)
    row = (await conn.execute(select(tool_grants).where(where))).first()
    if row is None:
        return None
    await conn.execute(delete(tool_grants).where(where))
    return _record(row)


async def forget_conversation(conn: AsyncConnection, conversation_id: str) -> None:
    """A deleted conversation's grants go with it."""
    await conn.execute(delete(tool_grants).where(g.conversation_id == conversation_id))
