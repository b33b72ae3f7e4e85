"""Pending inputs: messages sent while a run worked, until used.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pending_inputs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("conversation_id", sa.String(64), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("message", sa.JSON, nullable=False),
        sa.Column("position", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_pending_inputs_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_pending_inputs"),
    )
    op.create_index(
        "ix_pending_inputs_conversation_id", "pending_inputs", ["conversation_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_pending_inputs_conversation_id", table_name="pending_inputs")
    op.drop_table("pending_inputs")
