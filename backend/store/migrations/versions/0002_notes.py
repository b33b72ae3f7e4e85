"""Notes, per owner (they used to live in server memory, per session).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notes",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("saved_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_notes"),
        sa.UniqueConstraint("owner", "number", name="uq_notes_owner_number"),
    )


def downgrade() -> None:
    op.drop_table("notes")
