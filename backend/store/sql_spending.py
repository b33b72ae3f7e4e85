"""The usage ledger's sums (`schema.run_usage`): what a user spent since a
time (against their daily budget), per day, user and model (`GET
/api/usage`), and per conversation.

Sums of `cost_usd` add the known costs only (SQL's SUM skips NULLs); the
runs without a price are counted apart, so an unknown cost is never
shown as 0.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.budget import Spent
from backend.store.schema import run_usage
from backend.store.usage_records import SpendingRow, SpendingTotals

u = run_usage.c
_TOTALS: tuple[ColumnElement[Any], ...] = (
    func.count().label("runs"),
    *(
        func.coalesce(func.sum(column), 0).label(column.name)
        for column in (
            u.llm_calls,
            u.estimated_calls,
            u.input_tokens,
            u.output_tokens,
            u.total_tokens,
            u.cached_tokens,
            u.reasoning_tokens,
        )
    ),
    func.sum(u.cost_usd).label("cost_usd"),
    func.coalesce(func.sum(case((u.cost_usd.is_(None), 1), else_=0)), 0).label(
        "unpriced_runs"
    ),
    (func.coalesce(func.sum(u.active_ms), 0.0) / 1000.0).label("active_s"),
)


async def spent_since(conn: AsyncConnection, owner: str, since: float) -> Spent:
    query = select(
        func.coalesce(func.sum(u.total_tokens), 0),
        func.coalesce(func.sum(u.cost_usd), 0.0),
        func.coalesce(func.sum(u.active_ms), 0.0),
    ).where(u.owner == owner, u.started_at >= since)
    tokens, cost, active_ms = (await conn.execute(query)).one()
    return Spent(
        tokens=int(tokens), cost_usd=float(cost), time_s=float(active_ms) / 1000
    )


async def spending(
    conn: AsyncConnection, owner: str | None, since: float, until: float
) -> list[SpendingRow]:
    keys = (u.day, u.owner.label("user"), u.model)
    query: Select[Any] = (
        select(*keys, *_TOTALS)
        .where(u.started_at >= since, u.started_at < until)
        .group_by(*keys)
        .order_by(*keys)
    )
    if owner is not None:
        query = query.where(u.owner == owner)
    return [SpendingRow(**_sums(row._asdict())) for row in await conn.execute(query)]


async def conversation_spending(
    conn: AsyncConnection, conversation_id: str
) -> SpendingTotals:
    query = select(*_TOTALS).where(u.conversation_id == conversation_id)
    row = (await conn.execute(query)).one()
    return SpendingTotals(**_sums(row._asdict()))


def _sums(values: dict[str, Any]) -> dict[str, Any]:
    """A row's sums as Python numbers (PostgreSQL's SUM of integers is a
    Decimal)."""
    cost = values["cost_usd"]
    return {
        **values,
        **{
            name: int(values[name])
            for name in set(SpendingTotals.model_fields) - {"cost_usd", "active_s"}
        },
        "cost_usd": None if cost is None else float(cost),
        "active_s": float(values["active_s"]),
    }
