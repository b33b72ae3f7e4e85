"""`Users`: who may use the server by token, and with which role.

Authentication is on when `LOOPWIRE_AUTH_TOKEN` (one token, user `local`),
`LOOPWIRE_AUTH_TOKENS_FILE` (a token per user), or an identity provider
(OIDC sign-in, JWT bearer tokens: `backend/identity/`) is configured.
Scripts present a token as `Authorization: Bearer …`; a browser presents it
once to the login form and gets a sign-in (`backend/identity/signins.py`).

A tokens file has one `user: token` line per user, or `user: token role`
with the role `admin` or `user` (the default), then optionally the user's
own daily budget as `tokens=N`, `cost_usd=X` and `time_s=S` (in place of
`LOOPWIRE_DAILY_BUDGET_*`; `0` is no bound); blank lines and lines
starting with `#` are skipped. User names are 1 to 64 letters, digits and
`_.@-`; tokens are at least 16 visible characters and unique. The single
token's user, `local`, is an admin, and so is everyone when there is no
authentication at all (only loopback can reach such a server).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple, get_args

from backend.budget import Budget
from backend.errors import ConfigError

log = logging.getLogger(__name__)

LOCAL_USER = "local"
"""The one user when there is a single token or no authentication at all."""
USER_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
TOKEN = re.compile(r"[!-~]{16,512}")
COOKIE_NAME = "loopwire_session"
COOKIE_MAX_CHARS = 256

Role = Literal["admin", "user"]
ADMIN: Role = "admin"
USER: Role = "user"
ROLES: tuple[Role, ...] = get_args(Role)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a request is from: a user name (the owner of what they make) and
    their role."""

    user: str
    role: Role

    @property
    def admin(self) -> bool:
        return self.role == ADMIN


class Account(NamedTuple):
    """A tokens file's line: the user's token, role and own daily budget."""

    token: str
    role: Role
    daily: Budget | None = None


class Users:
    """Token → user, and each user's role."""

    def __init__(
        self,
        tokens: Mapping[str, str],
        *,
        admins: Collection[str] = (),
        external: bool = False,
        daily: Mapping[str, Budget] | None = None,
    ) -> None:
        """`tokens` maps each user to their token; `admins` have the admin
        role; `external`: users also come from an identity provider, so
        authentication is on even without tokens; `daily`: the users
        whose daily budget is their own."""
        self._by_digest = {_digest(token): user for user, token in tokens.items()}
        self._keys = {
            user: hashlib.sha256(b"loopwire-cookie\0" + token.encode()).digest()
            for user, token in tokens.items()
        }
        self._admins = frozenset(admins)
        self.external = external
        self.daily_budgets: dict[str, Budget] = dict(daily or {})
        """User → their own budget per day (`chat/daily_budgets.py`)."""

    @classmethod
    def configured(
        cls,
        token: str | None,
        tokens_file: Path | None,
        *,
        external: bool = False,
    ) -> Users:
        """From the settings: the single token, the tokens file, or both."""
        accounts = read_tokens_file(tokens_file) if tokens_file is not None else {}
        if token is not None:
            if not token.strip():
                raise ConfigError("LOOPWIRE_AUTH_TOKEN is set but empty")
            if LOCAL_USER in accounts:
                raise ConfigError(
                    f"user {LOCAL_USER!r} is in the tokens file and has "
                    "LOOPWIRE_AUTH_TOKEN too; give it one token"
                )
            if len(token) < 16:
                log.warning("LOOPWIRE_AUTH_TOKEN is short; use 16 or more characters")
            accounts[LOCAL_USER] = Account(token.strip(), ADMIN)
        return cls(
            {user: account.token for user, account in accounts.items()},
            admins=[
                user for user, account in accounts.items() if account.role == ADMIN
            ],
            external=external,
            daily={
                user: account.daily
                for user, account in accounts.items()
                if account.daily is not None
            },
        )

    @property
    def enabled(self) -> bool:
        """Whether requests must say who they are from."""
        return bool(self._by_digest) or self.external

    @property
    def has_tokens(self) -> bool:
        return bool(self._by_digest)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def role(self, user: str) -> Role | None:
        """The role of a user of the tokens (None: not one of them)."""
        if user not in self._keys:
            return None
        return ADMIN if user in self._admins else USER

    def identity(self, user: str) -> Identity | None:
        role = self.role(user)
        return None if role is None else Identity(user, role)

    def key(self, user: str) -> bytes | None:
        """A key derived from the user's token (None: no such user): what
        their sign-ins are bound to, so that a new token signs them out."""
        return self._keys.get(user)

    def by_token(self, token: str) -> str | None:
        """The user whose token this is (compared as digests, in constant time
        with respect to the token's content)."""
        if not token:
            return None
        digest = _digest(token)
        for known, user in self._by_digest.items():
            if hmac.compare_digest(digest, known):
                return user
        return None

    def by_authorization(self, header: str) -> str | None:
        """The user an `Authorization: Bearer …` header names."""
        return self.by_token(bearer_value(header) or "")


def bearer_value(header: str) -> str | None:
    """The credential of an `Authorization: Bearer …` header (None: another
    scheme)."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def read_tokens_file(path: Path) -> dict[str, Account]:
    """`user: token [role]` lines → {user: Account}; a ConfigError says which
    line is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the tokens file {path}: {exc}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("the tokens file %s can be read by others; chmod 600 it", path)
    accounts: dict[str, Account] = {}
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, account = _line(line, f"{path}, line {number}")
        if user in accounts:
            raise ConfigError(f"{path}, line {number}: user {user!r} is listed twice")
        if account.token in seen:
            raise ConfigError(
                f"{path}, line {number}: this token is already another user's"
            )
        accounts[user] = account
        seen.add(account.token)
    if not accounts:
        raise ConfigError(f"the tokens file {path} lists no users")
    return accounts


def _line(line: str, where: str) -> tuple[str, Account]:
    user, colon, rest = (part.strip() for part in line.partition(":"))
    if not colon or not USER_NAME.fullmatch(user):
        raise ConfigError(
            f"{where}: expected `user: token` with a user name of letters, "
            "digits and _.@- (at most 64)"
        )
    token, *extra = rest.split() if rest else ("",)
    options = [item for item in extra if "=" in item]
    extra = [item for item in extra if "=" not in item]
    if not TOKEN.fullmatch(token) or len(extra) > 1:
        raise ConfigError(
            f"{where}: the token must be 16 to 512 visible characters, no spaces "
            "(then, optionally, the role: admin or user, and the daily budget: "
            "tokens=N cost_usd=X time_s=S)"
        )
    role = extra[0] if extra else USER
    if role not in ROLES:
        raise ConfigError(f"{where}: the role must be admin or user, not {role!r}")
    daily = _daily_budget(options, where) if options else None
    return user, Account(token, USER if role == USER else ADMIN, daily)


_BUDGET_KEYS = {"tokens": int, "cost_usd": float, "time_s": float}


def _daily_budget(options: list[str], where: str) -> Budget:
    """`tokens=N cost_usd=X time_s=S` (any of them; 0: no bound)."""
    values: dict[str, float | None] = {}
    for option in options:
        key, _, text = option.partition("=")
        kind = _BUDGET_KEYS.get(key)
        if kind is None or key in values:
            raise ConfigError(
                f"{where}: {key!r} is not a daily budget's bound (or is given "
                "twice); use tokens=N, cost_usd=X and time_s=S"
            )
        try:
            value = kind(text)
        except ValueError:
            value = -1
        if value < 0 or value != value:  # negative, not a number, NaN
            raise ConfigError(
                f"{where}: {key}={text!r} must be a number, 0 or more (0: no bound)"
            )
        values[key] = value or None
    return Budget.model_validate(values)
