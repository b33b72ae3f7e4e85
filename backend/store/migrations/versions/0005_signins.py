"""Sign-ins: a browser's session, kept so that it can be revoked.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signins",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("last_seen_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float, nullable=True),
        sa.Column("user_agent", sa.String(200), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_signins"),
    )
    op.create_index("ix_signins_user_name", "signins", ["user_name"])
    op.create_index("ix_signins_expires_at", "signins", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_signins_expires_at", table_name="signins")
    op.drop_index("ix_signins_user_name", table_name="signins")
    op.drop_table("signins")
