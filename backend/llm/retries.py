"""Retries of LLM requests: which failures, how many times, how long between.

A provider turns each failed attempt into a `Failure` (what to tell the user,
whether trying again can help, the server's `Retry-After` if it sent one) and
hands it to a `Retrier`, which either waits before the next attempt or raises
the `LLMError` that ends the call. One `Retrier` per call, so a call makes at
most `1 + max_retries` attempts, whatever fails.

The wait before retry n (1-based) is the server's `Retry-After` when given,
else `backoff_s * 2 ** (n - 1)`; either way never more than `max_wait_s`
(a server asking for an hour gets `max_wait_s`, then one more attempt).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from backend.errors import LLMError

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 2
    backoff_s: float = 0.5
    """The wait before the first retry (without `Retry-After`); it doubles."""
    max_wait_s: float = 30.0
    """No wait between attempts is longer, `Retry-After` included."""

    def wait_s(self, retry: int, retry_after_s: float | None) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        if retry_after_s is not None:
            wanted = retry_after_s
        else:
            wanted = self.backoff_s * 2 ** min(retry - 1, 32)
        return min(max(wanted, 0.0), self.max_wait_s)


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt."""

    message: str
    """For the user: a plain sentence, no URL, key or traceback."""
    retryable: bool
    retry_after_s: float | None = None
    detail: str = ""
    """For the server log (may name the server)."""


class Retrier:
    """Counts one call's attempts; waits between them or gives up."""

    def __init__(self, policy: RetryPolicy, sleep: Sleep = asyncio.sleep) -> None:
        self.policy = policy
        self.attempts = 1
        self._sleep = sleep

    async def after(self, failure: Failure) -> None:
        """Wait before the next attempt, or raise the `LLMError` ending the call."""
        retries = self.attempts - 1
        if not failure.retryable or retries >= self.policy.max_retries:
            log.warning(
                "LLM request failed (attempt %d, giving up): %s",
                self.attempts,
                failure.detail or failure.message,
            )
            raise LLMError(self._final_message(failure))
        wait = self.policy.wait_s(retries + 1, failure.retry_after_s)
        log.warning(
            "LLM request failed (attempt %d of %d): %s; retrying in %.2fs",
            self.attempts,
            self.policy.max_retries + 1,
            failure.detail or failure.message,
            wait,
        )
        await self._sleep(wait)
        self.attempts += 1

    def _final_message(self, failure: Failure) -> str:
        if self.attempts == 1:
            return failure.message
        return f"{failure.message} (gave up after {self.attempts} attempts)"


def retry_after_s(headers: Mapping[str, str], now: float) -> float | None:
    """The server's requested wait: `retry-after-ms` (OpenAI's), else the
    standard `Retry-After` in seconds or as an HTTP date; None if absent or
    unreadable. `now` is the epoch time, for dates."""
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - now, 0.0)


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None
