"""What the store keeps per user, besides conversations: sign-ins, usage
figures, and the tools a user allowed to run without asking."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


SignInMethod = Literal["token", "oidc"]


class SignInRecord(_Record):
    """A browser's sign-in, as stored (`identity/signins.py`)."""

    id: str
    """Random, public (admins name it to revoke it); not the cookie's secret."""
    user: str
    role: Literal["admin", "user"]
    """The role it was made with (a token user's role is read from the
    tokens file again at each check)."""
    method: SignInMethod
    secret_hash: str
    """A keyed SHA-256 of the cookie's secret: the database holds nothing a
    browser could present."""
    created_at: float
    expires_at: float
    last_seen_at: float
    revoked_at: float | None = None
    user_agent: str = ""


class UsageRecord(_Record):
    """What one user keeps: conversations, stored runs, bytes of files."""

    user: str
    conversations: int = 0
    runs: int = 0
    file_bytes: int = 0


class ToolGrantRecord(_Record):
    """A tool the user allowed to run without asking: in one conversation,
    or (`conversation_id` None) in all of theirs (`chat/tool_grants.py`)."""

    id: str
    user: str
    tool: str
    conversation_id: str | None
    created_at: float
