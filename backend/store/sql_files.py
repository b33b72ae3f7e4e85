"""The statements behind `SqlStore`'s files: their records, the limits an
upload is checked against (files per conversation, bytes per owner), and
which blobs the records still refer to."""

from __future__ import annotations

from sqlalchemy import and_, func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.base import QuotaExceeded, StoreError, files_full, shown_bytes
from backend.store.records import FileRecord
from backend.store.schema import conversations, files

QUOTA_LOCK = text("SELECT pg_advisory_xact_lock(1903521652, hashtext(:owner))")
"""The PostgreSQL advisory lock (`quot`, the owner's hash) an insert under
a quota holds until its transaction ends (the two-key space: no clash with
`engine.MIGRATION_LOCK`; two owners that share a hash merely take turns)."""

f, c = files.c, conversations.c


async def add_file(
    conn: AsyncConnection,
    record: FileRecord,
    limit: int,
    quota: int | None,
    *,
    postgresql: bool,
) -> None:
    """Insert `record` if its conversation has fewer than `limit` files and
    (with a `quota`) its owner's files stay within `quota` bytes."""
    owner = (
        await conn.execute(select(c.owner).where(c.id == record.conversation_id))
    ).scalar()
    if owner is None:
        raise StoreError(f"no conversation {record.conversation_id!r}")
    if quota is not None and postgresql:
        # every quota-checked insert of this owner's takes turns, on any
        # instance (SQLite writes one at a time anyway): the sum below,
        # read after the lock, counts the files the one before inserted
        await conn.execute(QUOTA_LOCK, {"owner": owner})
    # the conversation's row is locked (PostgreSQL), so two uploads
    # cannot both take its last place
    await conn.execute(
        select(c.id).where(c.id == record.conversation_id).with_for_update()
    )
    count = (
        await conn.execute(
            select(func.count()).where(f.conversation_id == record.conversation_id)
        )
    ).scalar_one()
    if count >= limit:
        raise files_full(limit)
    if quota is not None:
        used = await file_bytes(conn, owner)
        if used + record.size > quota:
            shown = f"{record.name!r} ({shown_bytes(record.size)})"
            raise QuotaExceeded(shown, used, quota)
    await conn.execute(insert(files).values(**record.model_dump()))


async def file_bytes(conn: AsyncConnection, owner: str) -> int:
    query = (
        select(func.coalesce(func.sum(f.size), 0))
        .select_from(files.join(conversations))
        .where(c.owner == owner)
    )
    return int((await conn.execute(query)).scalar_one())


async def referenced(conn: AsyncConnection, wanted: set[str]) -> set[str]:
    """The digests of `wanted` some file has, in one pass over the files'
    digests (streamed, not held: the collector asks about nearly every blob
    on disk, which an `IN` list per chunk would answer with as many scans of
    the table)."""
    found: set[str] = set()
    result = await conn.stream(select(f.sha256).distinct())
    async for (sha256,) in result:
        if sha256 in wanted:
            found.add(sha256)
    await result.close()
    return found


async def files_of(conn: AsyncConnection, conversation_id: str) -> list[FileRecord]:
    query = (
        select(files)
        .where(f.conversation_id == conversation_id)
        .order_by(f.created_at, f.id)
    )
    rows = (await conn.execute(query)).mappings().all()
    return [FileRecord.model_validate(dict(row)) for row in rows]


async def file(
    conn: AsyncConnection, conversation_id: str, file_id: str
) -> FileRecord | None:
    query = select(files).where(
        and_(f.conversation_id == conversation_id, f.id == file_id)
    )
    row = (await conn.execute(query)).mappings().first()
    return None if row is None else FileRecord.model_validate(dict(row))
