"""Tool grants: the tools a user allowed to run without asking.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool_grants",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("conversation_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tool_grants"),
    )
    op.create_index("ix_tool_grants_user_name", "tool_grants", ["user_name"])


def downgrade() -> None:
    op.drop_index("ix_tool_grants_user_name", table_name="tool_grants")
    op.drop_table("tool_grants")
