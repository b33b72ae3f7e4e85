"""Fencing: a conversation's epoch, the epoch each frame and run was written
at, 64-bit frame seqs, and tool effects by idempotency key.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _epoch() -> sa.Column[int]:
    return sa.Column("epoch", sa.BigInteger, nullable=False, server_default="0")


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(_epoch())
    with op.batch_alter_table("runs") as batch:
        batch.add_column(_epoch())
    with op.batch_alter_table("frames") as batch:
        batch.alter_column(
            "seq",
            existing_type=sa.Integer,
            type_=sa.BigInteger,
            existing_nullable=False,
        )
        batch.add_column(_epoch())
    op.create_table(
        "tool_effects",
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("conversation_id", sa.String(64), nullable=False),
        sa.Column("tool_name", sa.String(128), nullable=False),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_tool_effects_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("key", name="pk_tool_effects"),
    )
    op.create_index(
        "ix_tool_effects_conversation_id", "tool_effects", ["conversation_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_tool_effects_conversation_id", table_name="tool_effects")
    op.drop_table("tool_effects")
    with op.batch_alter_table("frames") as batch:
        batch.drop_column("epoch")
        batch.alter_column(
            "seq",
            existing_type=sa.BigInteger,
            type_=sa.Integer,
            existing_nullable=False,
        )
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("epoch")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("epoch")
