"""User settings: each user's own instructions for every run.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_settings",
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("instructions", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("user_name", name="pk_user_settings"),
    )


def downgrade() -> None:
    op.drop_table("user_settings")
