"""Branches: the versions of a conversation an edit or a retry set aside.

`branches` keeps each set-aside tail: its messages; its runs stay in
`runs`, marked with the branch's id (`runs.branch_id`), so that every
query of the conversation as it stands leaves them out. A plain `ADD
COLUMN` (no table rebuild).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "branches",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("conversation_id", sa.String(64), nullable=False),
        sa.Column("parent", sa.String(64), nullable=True),
        sa.Column("fork_at", sa.Integer, nullable=False),
        sa.Column("messages", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_branches_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_branches"),
    )
    op.create_index("ix_branches_conversation_id", "branches", ["conversation_id"])
    op.add_column("runs", sa.Column("branch_id", sa.String(64), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE runs DROP COLUMN branch_id")  # no rebuild either
    op.drop_index("ix_branches_conversation_id", table_name="branches")
    op.drop_table("branches")
