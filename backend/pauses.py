"""`Pauses`: time a run spends waiting for a person inside timed work.

Most waits for a person sit between a run's phases, where no clock runs.
One does not: an MCP server asking the user something in the middle of a
tool call (elicitation). While it waits, the bounds on the work around it —
the tool's timeout, the run's active time — must not count, or a person who
takes a minute to answer would time the call out. The asker opens a pause
(`with pauses.paused():`) and the timers wait with `wait_unpaused`, which
counts only time outside pauses.

One per run: a pause stops every clock of the run, as the run waits anyway.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from backend.aio import Interrupt

T = TypeVar("T")


class Pauses:
    def __init__(self) -> None:
        self._open = 0
        self._since = 0.0
        self._total_s = 0.0
        self._changed: asyncio.Future[None] | None = None

    @property
    def active(self) -> bool:
        return self._open > 0

    def total_s(self) -> float:
        """Seconds spent in pauses so far (an open one counted up to now)."""
        if self._open:
            return self._total_s + time.perf_counter() - self._since
        return self._total_s

    @contextmanager
    def paused(self) -> Iterator[None]:
        """A wait for a person: the run's clocks stop until it ends."""
        if self._open == 0:
            self._since = time.perf_counter()
            self._signal()
        self._open += 1
        try:
            yield
        finally:
            self._open -= 1
            if self._open == 0:
                self._total_s += time.perf_counter() - self._since
                self._signal()

    def changed(self) -> asyncio.Future[None]:
        """A future resolved when the next pause opens or the last one ends."""
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        return self._changed

    def _signal(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None and not changed.done():
            changed.set_result(None)


async def wait_unpaused(
    work: asyncio.Future[Any], limit_s: float | None, pauses: Pauses | None
) -> bool:
    """Wait until `work` is done (True) or `limit_s` seconds outside pauses
    have passed (False, by its `Deadline`); `work` is left as it is either
    way."""
    expired: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def expire() -> None:
        if not expired.done():
            expired.set_result(None)

    deadline = Deadline(expire, limit_s, pauses)
    try:
        await asyncio.wait({work, expired}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        deadline.cancel()
        expired.cancel()
    return work.done()


async def within(
    coro: Coroutine[Any, Any, T], limit_s: float | None, pauses: Pauses | None
) -> tuple[T] | None:
    """`coro`'s result (in a 1-tuple) if it ends within `limit_s` seconds
    outside pauses; None (it is cancelled) if not. Its exception propagates;
    a cancelled caller cancels it too.

    It runs in the caller's task, as `asyncio.timeout` runs its block: a
    timer (`Deadline`) cuts it where it waits. No task of its own, no
    `asyncio.wait`: an agent run's every phase goes through here."""
    interrupt = Interrupt()
    deadline = Deadline(interrupt.interrupt, limit_s, pauses)
    with interrupt:
        try:
            result = await coro
        finally:
            deadline.cancel()
    return None if interrupt.interrupted else (result,)


class Deadline:
    """Calls `due` once `limit_s` seconds outside `pauses` have passed
    (never if `limit_s` is None). Looked at only when the time is
    up: a pause then moves the deadline on by what it took, and one still
    open holds it until it ends."""

    __slots__ = ("_before", "_began", "_due_call", "_handle", "_limit_s", "_pauses")

    def __init__(
        self, due: Callable[[], object], limit_s: float | None, pauses: Pauses | None
    ) -> None:
        self._due_call, self._limit_s, self._pauses = due, limit_s, pauses
        loop = asyncio.get_running_loop()
        self._began = loop.time()
        self._before = pauses.total_s() if pauses is not None else 0.0
        self._handle: asyncio.TimerHandle | None = None
        if limit_s is not None:
            self._handle = loop.call_at(self._began + limit_s, self._due)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None

    def _due(self, _changed: object = None) -> None:
        if self._handle is None or self._limit_s is None:
            return  # cancelled meanwhile (a pause ended after the work)
        pauses = self._pauses
        if pauses is None:
            self._due_call()
            return
        if pauses.active:
            pauses.changed().add_done_callback(self._due)
            return
        loop = asyncio.get_running_loop()
        used = loop.time() - self._began - (pauses.total_s() - self._before)
        left = self._limit_s - used
        if left <= 0:
            self._due_call()
        else:
            self._handle = loop.call_later(left, self._due)
