"""Rate limits: a token bucket per socket and per user, and a cap on each
user's open sockets.

A user's limits apply when authentication is on; without it everyone is
the same user (`local`) and only the per-socket bucket applies.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from backend.settings import Settings


class TokenBucket:
    """`rate` messages per second on average, bursts of `burst`."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def peek(self) -> float:
        """Tokens available now (none is spent)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        return self._tokens

    def take(self) -> bool:
        if self.peek() >= 1:
            self._tokens -= 1
            return True
        return False


@dataclass(slots=True)
class _User:
    bucket: TokenBucket
    sockets: int = 0


class UserLimits:
    """Each signed-in user's open sockets and shared message bucket.

    `admit` a socket (None: the user is at the cap), `leave` when it closes;
    a user with no socket is forgotten, bucket and all."""

    def __init__(
        self, settings: Settings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_sockets = settings.max_connections_per_user
        self._rate = settings.user_messages_per_s
        self._burst = settings.user_message_burst
        self._clock = clock
        self._users: dict[str, _User] = {}

    def admit(self, user: str) -> TokenBucket | None:
        entry = self._users.get(user)
        if entry is None:
            bucket = TokenBucket(self._rate, self._burst, self._clock)
            entry = self._users[user] = _User(bucket)
        if entry.sockets >= self.max_sockets:
            return None
        entry.sockets += 1
        return entry.bucket

    def leave(self, user: str) -> None:
        entry = self._users.get(user)
        if entry is None:
            return
        entry.sockets -= 1
        if entry.sockets <= 0:
            del self._users[user]

    def sockets(self, user: str) -> int:
        entry = self._users.get(user)
        return entry.sockets if entry is not None else 0
