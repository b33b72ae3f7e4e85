"""Tool-call policies that need state: approval decisions and rate limits."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

ApprovalStatus = Literal["approved", "rejected", "timeout", "withdrawn"]


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """What became of an approval request. `withdrawn`: the run is stopping."""

    status: ApprovalStatus
    reason: str | None = None


class RateLimiter:
    """At most `max_calls` per `window_s` seconds per key (a sliding window)."""

    def __init__(
        self,
        max_calls: int,
        window_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_calls = max_calls
        self.window_s = window_s
        self._clock = clock
        self._calls: dict[str, deque[float]] = {}

    def acquire(self, key: str) -> float | None:
        """Record a call and return None, or refuse: seconds until a slot frees."""
        now = self._clock()
        calls = self._calls.setdefault(key, deque())
        while calls and calls[0] <= now - self.window_s:
            calls.popleft()
        if len(calls) >= self.max_calls:
            return calls[0] + self.window_s - now
        calls.append(now)
        return None

    def forget(self, key: str) -> None:
        self._calls.pop(key, None)

    @property
    def tracked(self) -> int:
        """How many keys it holds state for."""
        return len(self._calls)
