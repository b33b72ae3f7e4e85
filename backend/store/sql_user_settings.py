"""The statements behind `SqlStore`'s custom instructions, each run on a
connection `SqlStore` holds: the user's own (table `user_settings`) and a
conversation's (`conversations.settings["instructions"]`). Empty text
clears them (`chat/instructions.py`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.schema import conversations, user_settings

u = user_settings.c
c = conversations.c
KEY = "instructions"
"""The key of a conversation's instructions in its `settings`."""


async def user_instructions(conn: AsyncConnection, user: str) -> str:
    query = select(u.instructions).where(u.user_name == user)
    return (await conn.execute(query)).scalar_one_or_none() or ""


async def set_user_instructions(
    conn: AsyncConnection, user: str, text: str, at: float
) -> None:
    await conn.execute(delete(user_settings).where(u.user_name == user))
    if text:
        values = {"user_name": user, "instructions": text, "updated_at": at}
        await conn.execute(insert(user_settings).values(**values))


async def set_conversation_instructions(
    conn: AsyncConnection, conversation_id: str, text: str
) -> bool:
    """False: there is no such conversation."""
    query = select(c.settings).where(c.id == conversation_id)
    row = (await conn.execute(query)).first()
    if row is None:
        return False
    settings: dict[str, Any] = dict(row.settings or {})
    if text:
        settings[KEY] = text
    else:
        settings.pop(KEY, None)
    change = update(conversations).where(c.id == conversation_id)
    await conn.execute(change.values(settings=settings))
    return True


_RUN_INSTRUCTIONS = select(
    select(u.instructions).where(u.user_name == bindparam("user")).scalar_subquery(),
    select(c.settings).where(c.id == bindparam("cid")).scalar_subquery(),
)
"""Built once: read at every run's start, its cache key is computed once."""


def run_instructions(
    conn: Connection, user: str, conversation_id: str
) -> tuple[str, str]:
    """The user's and the conversation's, read in one statement (at every
    run's start: synchronous, in one trip with `Database.read`)."""
    params = {"user": user, "cid": conversation_id}
    row = conn.execute(_RUN_INSTRUCTIONS, params).one()
    settings = row[1] or {}
    text = settings.get(KEY, "") if isinstance(settings, dict) else ""
    return row[0] or "", text if isinstance(text, str) else ""
