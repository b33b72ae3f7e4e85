"""Rate limits and caps per client, across WebSockets, event streams and
HTTP runs alike.

A client is a signed-in user when authentication is on; without it, the
address the connection comes from (`LOOPWIRE_TRUSTED_PROXIES` says whose
`X-Forwarded-For` names it), except loopback addresses: a server without
sign-in is one person's, on their own machine. What is counted per client:

- **connections** open at once — WebSockets and event streams (SSE, or an
  HTTP run waited for) together — at most `max_connections_per_user`;
- **new connections** per second (`connects_per_s`, bursts of
  `connect_burst`): a client that reconnects in a loop is refused at the
  handshake (HTTP 429 with `Retry-After`) before any session is touched,
  and that refusal is held until its next connection is due (`hold`, at
  most `HOLD_MAX_S`, counted among its open connections): a handshake costs
  the server far more than the refusal itself, and a loop that waits for
  its answers makes a few a second instead of a thousand;
- **frames** over all its sockets (`user_messages_per_s`, bursts of
  `user_message_burst`; each socket has its own bucket too);
- **runs started** (`runs_per_minute`, bursts of `run_burst`): a `chat` frame
  and `POST /api/agent` spend the same bucket.

And server-wide: at most `max_connections` connections at once.

A client's counts outlive its connections: its entry is forgotten only once
it has no connection and every bucket has refilled (when a new one would be
the same), so closing and reopening sockets resets nothing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import Scope

from backend.errors import LoopwireError
from backend.settings import Settings
from backend.telemetry.metrics import NO_METRICS, Metrics

PRUNE_EVERY = 1024
"""Admissions between two passes that forget clients with nothing to remember."""
HOLD_MAX_S = 2.0
"""The longest a refused connection is held before its answer."""


def client_address(scope: Scope) -> str:
    """The address a request came from, as the server knows it."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


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

    @property
    def full(self) -> bool:
        return self.peek() >= self.burst

    def wait_s(self) -> float:
        """Seconds until a token is due."""
        return max(0.0, (1 - self.peek()) / self.rate)


class Limited(LoopwireError):
    """A client is past one of its limits: `error_type` and the message say
    which; `retry_after_s` when waiting helps."""

    def __init__(
        self, error_type: str, message: str, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.retry_after_s = retry_after_s

    @property
    def retry_after(self) -> str | None:
        """The `Retry-After` header's value (whole seconds, at least 1)."""
        if self.retry_after_s is None:
            return None
        return str(max(1, math.ceil(self.retry_after_s)))


@dataclass(slots=True)
class Client:
    connects: TokenBucket
    frames: TokenBucket
    runs: TokenBucket
    open: int = 0

    @property
    def forgettable(self) -> bool:
        return (
            self.open == 0
            and self.connects.full
            and self.frames.full
            and self.runs.full
        )


class ClientLimits:
    def __init__(
        self,
        settings: Settings,
        *,
        signed_in: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`signed_in`: clients are users (authentication is on), not addresses."""
        self.settings = settings
        self.signed_in = signed_in
        self.max_open = settings.max_connections_per_user
        self.max_total = settings.max_connections
        self._clock = clock
        self._clients: dict[str, Client] = {}
        self.metrics: Metrics = NO_METRICS
        """Where refusals are counted (the app's)."""
        self.open_total = 0
        self._admitted = 0

    # ------------------------------------------------------------ who

    def key(self, scope: Scope, user: str) -> str | None:
        """Whom a request counts against: `user:<name>`, `address:<ip>`, or
        None (a loopback client of a server without sign-in: not limited)."""
        if self.signed_in:
            return f"user:{user}"
        host = client_address(scope)
        try:
            if ipaddress.ip_address(host).is_loopback:
                return None
        except ValueError:
            pass  # a unix socket or a test client: counted by that name
        return f"address:{host}"

    def client(self, key: str) -> Client:
        entry = self._clients.get(key)
        if entry is None:
            s, clock = self.settings, self._clock
            entry = self._clients[key] = Client(
                connects=TokenBucket(s.connects_per_s, s.connect_burst, clock),
                frames=TokenBucket(s.user_messages_per_s, s.user_message_burst, clock),
                runs=TokenBucket(s.runs_per_minute / 60, s.run_burst, clock),
            )
        return entry

    # ------------------------------------------------------------ connections

    def connect(self, key: str | None) -> Client | None:
        """Admit a new connection (`leave` when it closes): the client's
        entry (None for an unlimited client), or `Limited`."""
        if self.open_total >= self.max_total:
            raise self._limited(
                "connections",
                "too_many_connections",
                f"the server has {self.open_total} connections open, its limit "
                "(LOOPWIRE_MAX_CONNECTIONS); try again later",
                1.0,
            )
        if key is None:
            self.open_total += 1
            return None
        entry = self.client(key)
        if entry.open >= self.max_open:
            raise self._limited(
                "connections",
                "too_many_connections",
                f"you have {entry.open} connections open, the most allowed; "
                "close one first",
            )
        if not entry.connects.take():
            raise self._limited(
                "connects",
                "rate_limited",
                "too many new connections; wait before connecting again",
                entry.connects.wait_s(),
            )
        entry.open += 1
        self.open_total += 1
        self._admitted += 1
        if self._admitted % PRUNE_EVERY == 0:
            self.prune()
        return entry

    def leave(self, key: str | None) -> None:
        self.open_total = max(0, self.open_total - 1)
        entry = self._clients.get(key) if key is not None else None
        if entry is not None:
            entry.open = max(0, entry.open - 1)

    async def hold(self, key: str | None, refusal: Limited) -> None:
        """Before answering a connection refused for coming too fast: wait
        until the client's next one is due (it counts as open meanwhile;
        a client with all its connections open, or held, is answered at
        once)."""
        entry = self._clients.get(key) if key is not None else None
        wait_s = refusal.retry_after_s
        if (
            entry is None
            or wait_s is None
            or refusal.error_type != "rate_limited"
            or entry.open >= self.max_open
        ):
            return
        entry.open += 1
        self.open_total += 1
        try:
            await asyncio.sleep(min(wait_s, HOLD_MAX_S))
        finally:
            self.leave(key)

    def open_of(self, key: str) -> int:
        entry = self._clients.get(key)
        return entry.open if entry is not None else 0

    # ------------------------------------------------------------ runs

    def start_run(self, key: str | None) -> None:
        """Spend one of the client's runs, or `Limited`."""
        if key is None:
            return
        runs = self.client(key).runs
        if not runs.take():
            raise self._limited(
                "runs",
                "rate_limited",
                f"too many runs started (at most {self.settings.runs_per_minute:g} "
                "a minute); wait before starting another",
                runs.wait_s(),
            )

    # ------------------------------------------------------------ memory

    def prune(self) -> int:
        """Forget the clients a new entry would equal; how many."""
        gone = [key for key, entry in self._clients.items() if entry.forgettable]
        for key in gone:
            del self._clients[key]
        return len(gone)

    def __len__(self) -> int:
        return len(self._clients)

    def _limited(
        self,
        limit: str,
        error_type: str,
        message: str,
        retry_after_s: float | None = None,
    ) -> Limited:
        """A refusal by `limit` (connections, connects, runs), counted."""
        self.metrics.rate_limited(limit)
        return Limited(error_type, message, retry_after_s)
