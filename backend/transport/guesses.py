"""`Guesses`: failed credentials per client address, a token bucket each.

The login form allows 10 wrong tokens a minute per address; bearer tokens,
JWTs and session cookies share another bucket per address
(`LOOPWIRE_AUTH_FAILURES_PER_MINUTE`), checked before any comparison. The
address is the connection's (`scope["client"]`), or the one a trusted proxy
names (uvicorn's `forwarded_allow_ips`); the oldest of `TRACKED_ADDRESSES`
are forgotten first.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

from backend.transport.limits import TokenBucket

TRACKED_ADDRESSES = 10_000


class Guesses:
    """`per_minute` failures per address on average, bursts of as many."""

    def __init__(
        self, per_minute: int = 10, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_minute = per_minute
        self.clock = clock
        """Times the buckets made from now on."""
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def allowed(self, address: str) -> bool:
        """May `address` try again? (Its bucket is only spent on failures.)"""
        bucket = self._buckets.get(address)
        return bucket is None or bucket.peek() >= 1

    def retry_after(self, address: str) -> int:
        """Whole seconds until `address` may try again (0: now)."""
        bucket = self._buckets.get(address)
        if bucket is None:
            return 0
        return math.ceil(bucket.wait_s())

    def failed(self, address: str) -> None:
        bucket = self._buckets.get(address)
        if bucket is None:
            rate = self.per_minute / 60
            bucket = TokenBucket(rate, self.per_minute, self.clock)
            self._buckets[address] = bucket
            if len(self._buckets) > TRACKED_ADDRESSES:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(address)
        bucket.take()
