"""Origin: which kind of client started a conversation (the page, a script).

A plain `ADD COLUMN` with a default (no table rebuild, so SQLite's search
triggers on `conversations` stay); conversations made before it are
`unknown`.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "conversations",
        sa.Column("origin", sa.String(32), nullable=False, server_default="unknown"),
    )


def downgrade() -> None:
    op.execute("ALTER TABLE conversations DROP COLUMN origin")  # no rebuild either
