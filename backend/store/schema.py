"""The tables, as SQLAlchemy Core metadata (the migrations' target).

Times are epoch seconds (floats), as everywhere else in loopwire. JSON
columns hold small structured values; a run's `RunState` checkpoint is kept
as the JSON text it serialises to, so it is read back byte for byte.
Changing a table here needs a new migration in `store/migrations/versions/`
(a test compares the migrated schema with this metadata).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

ID = String(64)

conversations = Table(
    "conversations",
    metadata,
    Column("id", ID, primary_key=True),
    Column("owner", String(128), nullable=False),
    Column("title", String(200), nullable=False, default=""),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("settings", JSON, nullable=False),
    Column("epoch", BigInteger, nullable=False, server_default="0"),
    Column("origin", String(32), nullable=False, server_default="unknown"),
    Index("ix_conversations_owner_updated", "owner", "updated_at"),
)
"""`epoch` is the fencing token: raised by every take-over (in the
transaction that loads the conversation); every write of its owner is
conditional on the epoch it loaded (`store/writes.py`, docs/scaling.md).
`origin`: the kind of client that started it (`page`, `python`, `cli`,
`api`, …), so the page can list its own apart from scripts'."""


def _conversation_id(*, key: bool) -> Column[str]:
    """The column tying a row to its conversation (deleted with it); `key`:
    part of the primary key, else an indexed column."""
    target = ForeignKey("conversations.id", ondelete="CASCADE")
    if key:
        return Column("conversation_id", ID, target, primary_key=True)
    return Column("conversation_id", ID, target, nullable=False, index=True)


messages = Table(
    "messages",
    metadata,
    _conversation_id(key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("role", String(16), nullable=False),
    Column("content", Text, nullable=True),
    Column("tool_calls", JSON, nullable=True),
    Column("tool_call_id", String(128), nullable=True),
    Column("name", String(128), nullable=True),
    Column("status", String(16), nullable=True),
    Column("error", Text, nullable=True),
)

runs = Table(
    "runs",
    metadata,
    Column("id", ID, primary_key=True),
    _conversation_id(key=False),
    Column("strategy", String(64), nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("request", Text, nullable=False),
    Column("steps", Integer, nullable=False),
    Column("usage", JSON, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("ended_at", Float, nullable=True),
    Column("active_ms", Float, nullable=False),
    Column("error", Text, nullable=True),
    Column("state", Text, nullable=False),
    Column("epoch", BigInteger, nullable=False, server_default="0"),
    Column("branch_id", ID, nullable=True),
    Column("model", String(200), nullable=False, server_default=""),
    Column("cost_usd", Float, nullable=True),
)

pending_inputs = Table(
    "pending_inputs",
    metadata,
    Column("id", ID, primary_key=True),
    _conversation_id(key=False),
    Column("mode", String(16), nullable=False),
    Column("message", JSON, nullable=False),
    Column("position", Float, nullable=False),
    Column("created_at", Float, nullable=False),
)
"""Messages sent while a run worked, until used: queued to run next, or to
be told to the running run (`chat/inbox.py`); written and deleted in the
owner's fenced batches."""

frames = Table(
    "frames",
    metadata,
    _conversation_id(key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("run_id", ID, nullable=True),
    Column("text", Text, nullable=False),
    Column("epoch", BigInteger, nullable=False, server_default="0"),
)
"""`runs.epoch` and `frames.epoch`: the epoch of the owner that wrote the row.
`runs.branch_id`: NULL for the conversation as it stands; a branch's id
when an edit or a switch set the run aside (`branches`). A set-aside run's
frames stay where they are: the replay log is the conversation's story,
and a switch sends them again (`chat/branches.py`)."""

branches = Table(
    "branches",
    metadata,
    Column("id", ID, primary_key=True),
    _conversation_id(key=False),
    Column("parent", ID, nullable=True),
    Column("fork_at", Integer, nullable=False),
    Column("messages", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
)
"""A version of a conversation set aside by an edit or a retry: the history
from message `fork_at` on (`messages`), its runs and frames marked with its
id. `parent`: the branch whose messages it forks from, NULL when it forks
from the conversation as it stands (`store/sql_branches.py`)."""


files = Table(
    "files",
    metadata,
    Column("id", ID, primary_key=True),
    _conversation_id(key=False),
    Column("name", String(200), nullable=False),
    Column("media_type", String(100), nullable=False),
    Column("size", Integer, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("origin", String(16), nullable=False),
    Column("description", Text, nullable=False),
    Column("run_id", ID, nullable=True),
    Column("created_at", Float, nullable=False),
)

notes = Table(
    "notes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("owner", String(128), nullable=False),
    Column("number", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("saved_at", Float, nullable=False),
    UniqueConstraint("owner", "number", name="uq_notes_owner_number"),
)

tool_effects = Table(
    "tool_effects",
    metadata,
    Column("key", String(200), primary_key=True),
    _conversation_id(key=False),
    Column("tool_name", String(128), nullable=False),
    Column("result", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)
"""What a data-changing tool call did, by its idempotency key (`<run id>:<tool
call id>`), written in the transaction that made the change: a second
execution with the same key changes nothing and returns this result, and
`reconcile` reads it to tell whether a call cut off by a crash took effect."""

signins = Table(
    "signins",
    metadata,
    Column("id", ID, primary_key=True),
    Column("user_name", String(128), nullable=False, index=True),
    Column("role", String(16), nullable=False),
    Column("method", String(16), nullable=False),
    Column("secret_hash", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
    Column("last_seen_at", Float, nullable=False),
    Column("revoked_at", Float, nullable=True),
    Column("user_agent", String(200), nullable=False),
)
"""A browser's sign-in (the login form or OIDC): its cookie carries the id
and a secret whose keyed hash only is kept here (`identity/signins.py`).
Revoked (`revoked_at`) by signing out or by an admin; past `expires_at` it
is refused, and old rows are deleted when new sign-ins are made."""

tool_grants = Table(
    "tool_grants",
    metadata,
    Column("id", ID, primary_key=True),
    Column("user_name", String(128), nullable=False, index=True),
    Column("tool", String(128), nullable=False),
    Column("conversation_id", ID, nullable=True),
    Column("created_at", Float, nullable=False),
)
"""A tool a user allowed to run without asking ("always allow"), in one
conversation or (`conversation_id` NULL) in all of theirs; deleted with its
conversation, or when the user revokes it (`chat/tool_grants.py`)."""

user_settings = Table(
    "user_settings",
    metadata,
    Column("user_name", String(128), primary_key=True),
    Column("instructions", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)
"""A user's own settings: their instructions, given to every run of theirs."""

shares = Table(
    "shares",
    metadata,
    Column("id", ID, primary_key=True),
    _conversation_id(key=False),
    Column("owner", String(128), nullable=False),
    Column("title", String(200), nullable=False),
    Column("messages", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
)
"""A read-only link to a conversation as it was when shared: `id` is the
link's secret, `messages` the snapshot; deleted when its owner revokes it
or deletes the conversation."""

run_usage = Table(
    "run_usage",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("owner", String(128), nullable=False),
    Column("conversation_id", ID, nullable=False, index=True),
    Column("model", String(200), nullable=False),
    Column("started_at", Float, nullable=False),
    Column("day", String(10), nullable=False, index=True),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("total_tokens", BigInteger, nullable=False),
    Column("cached_tokens", BigInteger, nullable=False),
    Column("reasoning_tokens", BigInteger, nullable=False),
    Column("llm_calls", Integer, nullable=False),
    Column("estimated_calls", Integer, nullable=False),
    Column("cost_usd", Float, nullable=True),
    Column("active_ms", Float, nullable=False),
    Index("ix_run_usage_owner_started", "owner", "started_at"),
)
"""The usage ledger: what each run used, saved or not (a `save_chat:
false` run keeps no `runs` row, but is counted here), written with the
run's record (`store/writes.py`). No foreign key: deleting a conversation
leaves what its runs spent counted. `day` is the UTC day the run started
(`YYYY-MM-DD`), what usage is summed by; `cost_usd` NULL: the model had no
price (`store/sql_spending.py`). A saved run's record has its `model` and
`cost_usd` too (`runs`; '' and NULL for runs stored before migration 0013)."""

ENGINE_ONLY = "search_"
"""Objects named with this prefix belong to one database engine (migration
0008: SQLite's FTS5 tables, PostgreSQL's GIN expression indexes, for
`store/sql_search.py`): they are not in `metadata`, and the comparison of
the migrated schema with it leaves them out."""
