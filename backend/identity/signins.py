"""`SignIns`: browsers' sign-ins, kept in the store so they can be revoked.

Signing in (the login form, or OIDC) makes a record with a random public
id and a random 32-byte secret; the cookie is `<id>.<secret>`, and the
store keeps only a keyed SHA-256 of the secret (keyed with the user's token
for token sign-ins, so a new token signs that user's browsers out).

Every check reads the record, through a cache of `CACHE_S` seconds: a
sign-out or an admin's revocation is refused at once on the instance that
made it, and on every other instance sharing the database within
`CACHE_S`. A sign-in lasts `LOOPWIRE_AUTH_COOKIE_TTL_S` from its start.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

from backend.store.base import Store, StoreError
from backend.store.user_records import SignInMethod, SignInRecord
from backend.users import COOKIE_MAX_CHARS, Identity, Users

log = logging.getLogger(__name__)

CACHE_S = 5.0
"""How long a checked sign-in is believed without reading it again: the
bound on how late another instance sees a revocation."""
CACHED = 10_000
"""Sign-ins held in the cache at once (the least recently used go first)."""
TOUCH_EVERY_S = 60.0
"""`last_seen_at` is written at most this often per sign-in."""
FORGET_AFTER_S = 24 * 3600.0
"""Expired or revoked sign-ins are deleted this long after (when new ones
are made)."""
USER_AGENT_CHARS = 200
SIGNIN_ID = re.compile(r"[0-9a-f]{32}")
SECRET = re.compile(r"[A-Za-z0-9_-]{43}")


class SignIns:
    def __init__(
        self,
        store: Store,
        users: Users,
        *,
        ttl_s: float,
        cache_s: float = CACHE_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """`clock` times the cache, `wall` stamps the records (epoch seconds)."""
        self.store = store
        self.users = users
        self.ttl_s = ttl_s
        self.cache_s = cache_s
        self.clock = clock
        self.wall = wall
        self._cache: OrderedDict[str, tuple[float, SignInRecord | None]] = OrderedDict()
        self._revocations = 0
        """Counts revocations here: a read that a revocation overtook is not
        cached (it may hold the record as it was before)."""
        self._revoked = asyncio.Event()
        """Set (and replaced) at each revocation here: open sockets check
        their sign-in again at once (`revoked`)."""

    async def revoked(self) -> None:
        """Return at the next revocation made on this instance."""
        await self._revoked.wait()

    async def create(
        self, identity: Identity, method: SignInMethod, user_agent: str = ""
    ) -> str:
        """A new sign-in for `identity`; the cookie value that presents it."""
        signin_id = secrets.token_hex(16)
        secret = secrets.token_urlsafe(32)
        secret_hash = self._hash(identity.user, method, secret)
        if secret_hash is None:
            raise ValueError(f"{identity.user!r} has no token to sign in with")
        now = self.wall()
        record = SignInRecord(
            id=signin_id,
            user=identity.user,
            role=identity.role,
            method=method,
            secret_hash=secret_hash,
            created_at=now,
            expires_at=now + self.ttl_s,
            last_seen_at=now,
            user_agent=_printable(user_agent)[:USER_AGENT_CHARS],
        )
        await self.store.add_signin(record, forget_before=now - FORGET_AFTER_S)
        return f"{signin_id}.{secret}"

    async def check(self, cookie: str) -> Identity | None:
        """Who the cookie signs in: None if it is malformed, forged, expired
        or revoked."""
        record = await self._verified(cookie)
        if record is None:
            return None
        if record.method == "token":  # the tokens file says the role now
            return self.users.identity(record.user)
        return Identity(record.user, record.role)

    async def sign_out(self, cookie: str) -> bool:
        """Revoke the sign-in the cookie presents (if it is a live one)."""
        record = await self._verified(cookie)
        return record is not None and await self.revoke(record.id) is not None

    async def revoke(self, signin_id: str) -> SignInRecord | None:
        """Revoke a live sign-in (None: no such live one)."""
        self._forget(lambda cached: cached == signin_id)
        revoked = await self.store.revoke_signin(signin_id, self.wall())
        self._forget(lambda cached: cached == signin_id)
        return revoked

    async def revoke_user(self, user: str) -> list[str]:
        """Revoke every live sign-in of `user`; their ids."""
        self._forget(lambda cached: self._user_of(cached) == user)
        revoked = await self.store.revoke_signins(user, self.wall())
        self._forget(lambda cached: cached in revoked or self._user_of(cached) == user)
        return revoked

    def _forget(self, which: Callable[[str], bool]) -> None:
        """Drop cached sign-ins, before a revocation and after it: a read
        that either overtook is not cached (`_record`); then wake whoever
        waits for a revocation."""
        self._revocations += 1
        for signin_id in [cached for cached in self._cache if which(cached)]:
            del self._cache[signin_id]
        revoked, self._revoked = self._revoked, asyncio.Event()
        revoked.set()

    def _user_of(self, signin_id: str) -> str | None:
        record = self._cache[signin_id][1]
        return None if record is None else record.user

    async def live(self, user: str | None = None) -> list[SignInRecord]:
        return await self.store.live_signins(self.wall(), user=user)

    async def _verified(self, cookie: str) -> SignInRecord | None:
        if len(cookie) > COOKIE_MAX_CHARS:
            return None
        signin_id, _, secret = cookie.partition(".")
        if not SIGNIN_ID.fullmatch(signin_id) or not SECRET.fullmatch(secret):
            return None
        record = await self._record(signin_id)
        now = self.wall()
        if record is None or record.revoked_at is not None or record.expires_at <= now:
            return None
        expected = self._hash(record.user, record.method, secret)
        if expected is None or not hmac.compare_digest(
            expected.encode(), record.secret_hash.encode()
        ):
            return None
        return record

    async def _record(self, signin_id: str) -> SignInRecord | None:
        """The record, from the cache while it is fresh, else the store."""
        now = self.clock()
        cached = self._cache.get(signin_id)
        if cached is not None and now - cached[0] < self.cache_s:
            return cached[1]
        revocations = self._revocations
        record = await self.store.signin(signin_id)
        if revocations == self._revocations:
            self._cache[signin_id] = (now, record)
            self._cache.move_to_end(signin_id)
            while len(self._cache) > CACHED:
                self._cache.popitem(last=False)
        if record is not None and self.wall() - record.last_seen_at >= TOUCH_EVERY_S:
            try:
                await self.store.touch_signin(signin_id, self.wall())
            except StoreError as exc:  # a note of use is not worth a refusal
                log.warning("cannot note the use of sign-in %s: %s", signin_id, exc)
        return record

    def _hash(self, user: str, method: SignInMethod, secret: str) -> str | None:
        """The secret's keyed hash: keyed with the user's token for a token
        sign-in (None: the user has no token any more)."""
        key = b""
        if method == "token":
            user_key = self.users.key(user)
            if user_key is None:
                return None
            key = user_key
        mac = hmac.new(b"loopwire-signin\0" + key, secret.encode(), hashlib.sha256)
        return mac.hexdigest()


def _printable(text: str) -> str:
    return "".join(c for c in text if c.isprintable())
