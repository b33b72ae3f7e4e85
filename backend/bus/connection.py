"""How `RedisBus` talks to Redis: its keys and channels, its clients'
timeouts and retries, and how it words and throttles its complaints."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from backend.bus.base import BusError
from backend.redaction import bare_urls

log = logging.getLogger(__name__)

PREFIX = "loopwire:"
DEFAULT_REDIS_TIMEOUT_S = 2.0
RETRY_MIN_S = 0.05
"""The first pause before trying Redis again (it doubles); also how close to
its safe expiry a lease is given up rather than renewed once more."""
RECONNECT_MAX_S = 2.0


def lease_key(session_id: str) -> str:
    return f"{PREFIX}lease:{session_id}"


def instance_key(instance_id: str) -> str:
    return f"{PREFIX}instance:{instance_id}"


def inbox(instance_id: str) -> str:
    return f"{PREFIX}inbox:{instance_id}"


FRAMES = f"{PREFIX}frames:"


def frames(session_id: str) -> str:
    return f"{FRAMES}{session_id}"


def client(url: str, timeout_s: float, **options: Any) -> aioredis.Redis:
    """A client whose commands give up after `timeout_s` (connecting, reading,
    writing), tried once more on a new connection, no more: the callers have
    their own deadlines and retries."""
    return aioredis.Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=timeout_s,
        socket_timeout=timeout_s,
        retry=Retry(NoBackoff(), 1),
        **options,
    )


async def check_reachable(
    url: str, *, timeout_s: float = DEFAULT_REDIS_TIMEOUT_S
) -> None:
    """Raise `BusError` (the URL without its password) unless Redis answers."""
    redis = client(url, timeout_s)
    try:
        await redis.ping()
    except (RedisError, OSError) as exc:
        raise BusError(f"cannot reach Redis at {bare_urls(url)}: {exc}") from exc
    finally:
        await redis.aclose()


def unreachable(url: str, exc: BaseException, waited_s: float = 0.0) -> str:
    """Why Redis cannot be used (for `trouble`), without the URL's password."""
    detail = str(exc) or f"no answer within {waited_s:.1f} s"
    return f"cannot reach Redis at {bare_urls(url)}: {detail}"


class Warnings:
    """Warnings logged at most once a second each, with how many times they
    happened since (the last argument)."""

    def __init__(self) -> None:
        self._warned_at: dict[str, float] = {}
        self._unwarned: dict[str, int] = {}

    def warn(self, what: str, message: str, *args: object) -> None:
        self._unwarned[what] = self._unwarned.get(what, 0) + 1
        now = time.monotonic()
        if now - self._warned_at.get(what, -math.inf) >= 1.0:
            log.warning(message, *args, self._unwarned.pop(what))
            self._warned_at[what] = now
