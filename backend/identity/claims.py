"""From a verified token's claims to an `Identity`: which claim names the
user, which lists their roles, and which role makes an admin."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from backend.users import ADMIN, USER, Identity

MAX_USER_CHARS = 128
"""The longest user name an identity provider may give (an owner's column)."""


@dataclass(frozen=True, slots=True)
class ClaimMap:
    user_claim: str = "sub"
    roles_claim: str = "roles"
    """A claim, or a dotted path into nested ones (`realm_access.roles`);
    its value is a list of role names or one space-separated string."""
    admin_role: str = "admin"

    def identity(self, claims: Mapping[str, Any]) -> Identity | None:
        """The user and role the claims name; None if no usable user name."""
        user = claims.get(self.user_claim)
        if not usable_name(user):
            return None
        assert isinstance(user, str)
        admin = self.admin_role in roles(claims, self.roles_claim)
        return Identity(user, ADMIN if admin else USER)


def usable_name(value: object) -> bool:
    """1 to 128 printable characters, no spaces."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_USER_CHARS
        and value.isprintable()
        and not any(c.isspace() for c in value)
    )


def roles(claims: Mapping[str, Any], path: str) -> frozenset[str]:
    value: Any = claims
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(v for v in value if isinstance(v, str))
    return frozenset()
