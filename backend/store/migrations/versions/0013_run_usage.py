"""The usage ledger: what each run used, saved or not (`schema.run_usage`),
and a run's model and cost on its record (`runs.model`, `runs.cost_usd`:
plain `ADD COLUMN`s; empty and NULL for the runs stored before).

Backfilled from the stored runs: their `usage` JSON, their conversation's
owner, the model their checkpoint names (the run's, else the one its
request asked for; unknown: empty). Their cost stays unknown (NULL): the
price table is the server's setting, not the database's.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

CHUNK = 500


def upgrade() -> None:
    op.create_table(
        "run_usage",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("conversation_id", sa.String(64), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        *(sa.Column(name, sa.BigInteger, nullable=False) for name in _TOKENS.values()),
        sa.Column("llm_calls", sa.Integer, nullable=False),
        sa.Column("estimated_calls", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=True),
        sa.Column("active_ms", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_usage"),
    )
    op.create_index("ix_run_usage_conversation_id", "run_usage", ["conversation_id"])
    op.create_index("ix_run_usage_day", "run_usage", ["day"])
    op.create_index("ix_run_usage_owner_started", "run_usage", ["owner", "started_at"])
    _backfill(op.get_bind())
    op.add_column(
        "runs", sa.Column("model", sa.String(200), nullable=False, server_default="")
    )
    op.add_column("runs", sa.Column("cost_usd", sa.Float, nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE runs DROP COLUMN cost_usd")  # no rebuild
    op.execute("ALTER TABLE runs DROP COLUMN model")
    op.drop_table("run_usage")


_TOKENS = {
    "prompt_tokens": "input_tokens",
    "completion_tokens": "output_tokens",
    "total_tokens": "total_tokens",
    "cached_tokens": "cached_tokens",
    "reasoning_tokens": "reasoning_tokens",
}
_RUNS = sa.table(
    "runs",
    sa.column("id", sa.String),
    sa.column("conversation_id", sa.String),
    sa.column("usage", sa.JSON),
    sa.column("started_at", sa.Float),
    sa.column("active_ms", sa.Float),
    sa.column("state", sa.Text),
)
_CONVERSATIONS = sa.table(
    "conversations", sa.column("id", sa.String), sa.column("owner", sa.String)
)


def _backfill(connection: sa.Connection) -> None:
    r, c = _RUNS.c, _CONVERSATIONS.c
    query = (
        sa.select(r.id, r.conversation_id, c.owner, r.usage, r.started_at)
        .add_columns(r.active_ms, r.state)
        .select_from(_RUNS.join(_CONVERSATIONS, r.conversation_id == c.id))
        .order_by(r.id)
    )
    ledger = sa.table("run_usage", *(sa.column(name) for name in _COLUMNS))
    rows: list[dict[str, Any]] = []
    for run in connection.execute(query).mappings():
        rows.append(_row(run))
        if len(rows) == CHUNK:
            connection.execute(sa.insert(ledger), rows)
            rows = []
    if rows:
        connection.execute(sa.insert(ledger), rows)


_COLUMNS = (
    "run_id",
    "owner",
    "conversation_id",
    "model",
    "started_at",
    "day",
    *_TOKENS.values(),
    "llm_calls",
    "estimated_calls",
    "cost_usd",
    "active_ms",
)


def _row(run: Any) -> dict[str, Any]:
    usage = run["usage"]
    if isinstance(usage, str):
        usage = json.loads(usage)
    usage = usage if isinstance(usage, dict) else {}
    started_at = float(run["started_at"])
    return {
        "run_id": run["id"],
        "owner": run["owner"],
        "conversation_id": run["conversation_id"],
        "model": _model(run["state"]),
        "started_at": started_at,
        "day": datetime.fromtimestamp(started_at, UTC).strftime("%Y-%m-%d"),
        **{column: int(usage.get(key) or 0) for key, column in _TOKENS.items()},
        "llm_calls": int(usage.get("llm_calls") or 0),
        "estimated_calls": int(usage.get("estimated_calls") or 0),
        "cost_usd": None,
        "active_ms": float(run["active_ms"] or 0.0),
    }


def _model(state: str | None) -> str:
    """The model a checkpoint names: the run's, else its request's; ''."""
    try:
        value = json.loads(state or "{}")
    except ValueError:
        return ""
    if not isinstance(value, dict):
        return ""
    request = value.get("request")
    asked = request.get("model") if isinstance(request, dict) else None
    model = value.get("model") or asked or ""
    return str(model)[:200]
