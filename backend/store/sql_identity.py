"""The statements behind `SqlStore`'s sign-ins and usage figures, each run
on a connection `SqlStore` holds (in its transaction, or for a read)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, and_, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.schema import conversations, files, runs, signins
from backend.store.user_records import SignInRecord, UsageRecord

s = signins.c


def _record(row: Row[Any]) -> SignInRecord:
    values = row._asdict()
    values["user"] = values.pop("user_name")
    return SignInRecord.model_validate(values)


def _live(now: float) -> Any:
    return and_(s.revoked_at.is_(None), s.expires_at > now)


async def add_signin(
    conn: AsyncConnection, record: SignInRecord, forget_before: float
) -> None:
    values = record.model_dump()
    values["user_name"] = values.pop("user")
    await conn.execute(
        delete(signins).where(
            or_(s.expires_at < forget_before, s.revoked_at < forget_before)
        )
    )
    await conn.execute(insert(signins).values(**values))


async def signin(conn: AsyncConnection, signin_id: str) -> SignInRecord | None:
    row = (await conn.execute(select(signins).where(s.id == signin_id))).first()
    return None if row is None else _record(row)


async def live_signins(
    conn: AsyncConnection, now: float, user: str | None, limit: int
) -> list[SignInRecord]:
    query = select(signins).where(_live(now))
    if user is not None:
        query = query.where(s.user_name == user)
    query = query.order_by(s.created_at.desc(), s.id).limit(limit)
    return [_record(row) for row in (await conn.execute(query)).all()]


async def revoke(
    conn: AsyncConnection, at: float, *, signin_id: str | None, user: str | None
) -> list[SignInRecord]:
    """Revoke the live sign-in `signin_id`, or all of `user`'s; the revoked."""
    where = _live(at)
    if signin_id is not None:
        where = and_(where, s.id == signin_id)
    if user is not None:
        where = and_(where, s.user_name == user)
    query = update(signins).where(where).values(revoked_at=at).returning(*signins.c)
    return [_record(row) for row in (await conn.execute(query)).all()]


async def touch(conn: AsyncConnection, signin_id: str, at: float) -> None:
    await conn.execute(update(signins).where(s.id == signin_id).values(last_seen_at=at))


async def usage(conn: AsyncConnection) -> list[UsageRecord]:
    """Three aggregates by owner (conversations, runs, file bytes), merged."""
    c, r, f = conversations.c, runs.c, files.c
    counts: dict[str, dict[str, int]] = {}

    async def gather(field: str, query: Any) -> None:
        for owner, value in (await conn.execute(query)).all():
            counts.setdefault(str(owner), {})[field] = int(value or 0)

    await gather("conversations", select(c.owner, func.count()).group_by(c.owner))
    await gather(
        "runs",
        select(c.owner, func.count(r.id))
        .select_from(runs.join(conversations, r.conversation_id == c.id))
        .group_by(c.owner),
    )
    await gather(
        "file_bytes",
        select(c.owner, func.coalesce(func.sum(f.size), 0))
        .select_from(files.join(conversations, f.conversation_id == c.id))
        .group_by(c.owner),
    )
    return [UsageRecord(user=user, **fields) for user, fields in sorted(counts.items())]
