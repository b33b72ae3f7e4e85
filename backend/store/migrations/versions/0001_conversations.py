"""Conversations, their messages, runs and frame log.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(64)


def _conversation_fk(table: str) -> sa.Column[str]:
    return sa.Column(
        "conversation_id",
        ID,
        sa.ForeignKey(
            "conversations.id",
            name=f"fk_{table}_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        nullable=False,
    )


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", ID, nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_conversations"),
    )
    op.create_index(
        "ix_conversations_owner_updated", "conversations", ["owner", "updated_at"]
    )
    op.create_table(
        "messages",
        _conversation_fk("messages"),
        sa.Column("position", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=True),
        sa.Column("tool_calls", sa.JSON, nullable=True),
        sa.Column("tool_call_id", sa.String(128), nullable=True),
        sa.Column("name", sa.String(128), nullable=True),
        sa.Column("status", sa.String(16), nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", "position", name="pk_messages"),
    )
    op.create_table(
        "runs",
        sa.Column("id", ID, nullable=False),
        _conversation_fk("runs"),
        sa.Column("strategy", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("request", sa.Text, nullable=False),
        sa.Column("steps", sa.Integer, nullable=False),
        sa.Column("usage", sa.JSON, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float, nullable=True),
        sa.Column("active_ms", sa.Float, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("state", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
    )
    op.create_index("ix_runs_conversation_id", "runs", ["conversation_id"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_table(
        "frames",
        _conversation_fk("frames"),
        sa.Column("seq", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("run_id", ID, nullable=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "seq", name="pk_frames"),
    )


def downgrade() -> None:
    op.drop_table("frames")
    op.drop_index("ix_runs_status", "runs")
    op.drop_index("ix_runs_conversation_id", "runs")
    op.drop_table("runs")
    op.drop_table("messages")
    op.drop_index("ix_conversations_owner_updated", "conversations")
    op.drop_table("conversations")
