"""Alembic's environment: runs on the connection `store/migrate.py` hands it.

loopwire applies migrations itself at start-up (and `loopwire db upgrade`),
so there is no alembic.ini: the connection comes in `config.attributes`.
"""

from __future__ import annotations

from alembic import context

from backend.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
