"""`Users`: who may use the server, by token, and their signed-in browsers.

Authentication is on when `LOOPWIRE_AUTH_TOKEN` (one token, user `local`) or
`LOOPWIRE_AUTH_TOKENS_FILE` (a token per user) is set. Scripts present the
token as `Authorization: Bearer …`; a browser presents it once to the login
form and gets a cookie.

The cookie is `user.expiry.signature`, signed with a key derived from that
user's token: nothing is kept on the server, a cookie outlives a restart and
works on every instance that has the same tokens, and changing a user's token
signs out that user's browsers (and only theirs).

A tokens file has one `user: token` line per user; blank lines and lines
starting with `#` are skipped. User names are 1 to 64 letters, digits and
`_.@-`; tokens are at least 16 visible characters and unique.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from backend.errors import ConfigError

log = logging.getLogger(__name__)

LOCAL_USER = "local"
"""The one user when there is a single token or no authentication at all."""
USER_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
TOKEN = re.compile(r"[!-~]{16,512}")
COOKIE_NAME = "loopwire_session"
COOKIE_MAX_CHARS = 256


class Users:
    """Token → user, and signed session cookies for browsers."""

    def __init__(
        self,
        tokens: Mapping[str, str],
        *,
        cookie_ttl_s: float = 7 * 24 * 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`tokens` maps each user to their token; empty: no authentication."""
        self._by_digest = {_digest(token): user for user, token in tokens.items()}
        self._keys = {
            user: hashlib.sha256(b"loopwire-cookie\0" + token.encode()).digest()
            for user, token in tokens.items()
        }
        self.cookie_ttl_s = cookie_ttl_s
        self._clock = clock

    @classmethod
    def configured(
        cls,
        token: str | None,
        tokens_file: Path | None,
        *,
        cookie_ttl_s: float = 7 * 24 * 3600.0,
    ) -> Users:
        """From the settings: the single token, the tokens file, or both."""
        tokens = read_tokens_file(tokens_file) if tokens_file is not None else {}
        if token is not None:
            if not token.strip():
                raise ConfigError("LOOPWIRE_AUTH_TOKEN is set but empty")
            if LOCAL_USER in tokens:
                raise ConfigError(
                    f"user {LOCAL_USER!r} is in the tokens file and has "
                    "LOOPWIRE_AUTH_TOKEN too; give it one token"
                )
            if len(token) < 16:
                log.warning("LOOPWIRE_AUTH_TOKEN is short; use 16 or more characters")
            tokens[LOCAL_USER] = token.strip()
        return cls(tokens, cookie_ttl_s=cookie_ttl_s)

    @property
    def enabled(self) -> bool:
        return bool(self._by_digest)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._keys)

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
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self.by_token(value.strip())

    def cookie(self, user: str) -> str:
        """A cookie value that signs `user` in until the TTL runs out."""
        expiry = int(self._clock() + self.cookie_ttl_s)
        return f"{user}.{expiry}.{self._sign(user, expiry)}"

    def by_cookie(self, value: str) -> str | None:
        """The user a cookie signs in, if its signature holds and it is fresh."""
        if len(value) > COOKIE_MAX_CHARS:
            return None
        parts = value.rsplit(".", 2)
        if len(parts) != 3:
            return None
        user, expiry_text, signature = parts
        if user not in self._keys or not expiry_text.isdigit():
            return None
        expiry = int(expiry_text)
        if expiry < self._clock():
            return None
        expected = self._sign(user, expiry)
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            return None
        return user

    def _sign(self, user: str, expiry: int) -> str:
        mac = hmac.new(self._keys[user], f"{user}.{expiry}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def read_tokens_file(path: Path) -> dict[str, str]:
    """`user: token` lines → {user: token}; a ConfigError says which line is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the tokens file {path}: {exc}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("the tokens file %s can be read by others; chmod 600 it", path)
    tokens: dict[str, str] = {}
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, colon, token = (part.strip() for part in line.partition(":"))
        where = f"{path}, line {number}"
        if not colon or not USER_NAME.fullmatch(user):
            raise ConfigError(
                f"{where}: expected `user: token` with a user name of letters, "
                "digits and _.@- (at most 64)"
            )
        if not TOKEN.fullmatch(token):
            raise ConfigError(
                f"{where}: the token must be 16 to 512 visible characters, no spaces"
            )
        if user in tokens:
            raise ConfigError(f"{where}: user {user!r} is listed twice")
        if token in seen:
            raise ConfigError(f"{where}: this token is already another user's")
        tokens[user] = token
        seen.add(token)
    if not tokens:
        raise ConfigError(f"the tokens file {path} lists no users")
    return tokens
