"""Small asyncio helpers. Every task created here is awaited before return."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


async def race(
    *coros: Coroutine[Any, Any, Any], limit_s: float | None = None
) -> tuple[int, Any] | None:
    """Run `coros` concurrently; return (index, result) of the first to finish.

    The others are cancelled and awaited before returning. Returns None when
    `limit_s` seconds pass first. If the winner raised, its exception propagates;
    if the caller is cancelled, every child is cancelled too and the
    cancellation propagates.
    """
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, _ = await asyncio.wait(
            tasks, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            return None
        index = next(i for i, task in enumerate(tasks) if task in done)
        return index, tasks[index].result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def finished(coro: Coroutine[Any, Any, T]) -> T:
    """`coro` run to its end even if the caller is cancelled meanwhile; the
    cancellation is raised once it has ended.

    For work that must not be cut in the middle: a database transaction
    cancelled inside a statement leaves its connection thrown away with the
    transaction open, and the locks it holds stop every later write."""
    task = asyncio.ensure_future(coro)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done() and task.cancelled():
                raise
            cancelled = True  # the caller's: wait for the work, then raise it
        except BaseException:
            break  # the work's own failure, raised below
    if cancelled:
        if not task.cancelled():
            task.exception()  # retrieved: the caller's cancellation wins
        raise asyncio.CancelledError
    return task.result()


class Interrupt:
    """Cancels, from elsewhere, the task inside its `with` block: the block
    ends at once where it waits, and the cancellation ends there (`interrupted`
    says so), as `asyncio.timeout` ends its own. Any other cancellation of the
    task propagates. One per block; `interrupt` before the block cancels it at
    its first wait.

    No task of its own: the cheapest way for one event to cut work short.
    """

    __slots__ = ("_cancelling", "_issued", "_task", "interrupted")

    def __init__(self) -> None:
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0
        self._issued = False
        self.interrupted = False

    def interrupt(self) -> None:
        if self.interrupted:
            return
        self.interrupted = True
        if self._task is not None:
            self._issued = True
            self._task.cancel()

    def __enter__(self) -> Interrupt:
        task = asyncio.current_task()
        if task is None or self._task is not None:
            raise RuntimeError("Interrupt entered outside a task, or twice")
        self._task, self._cancelling = task, task.cancelling()
        if self.interrupted:
            self._issued = True
            task.cancel()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: object, trace: object
    ) -> bool:
        task, self._task = self._task, None
        if not self._issued or task is None:
            return False
        self._issued = False
        mine = task.uncancel() <= self._cancelling
        return mine and kind is asyncio.CancelledError


def stop_if_cancelled() -> None:
    """Raise `CancelledError` if the current task has been asked to stop.

    Call it where a loop catches errors to go on: a library may turn a
    cancellation into an error of its own (asyncpg cut mid-query, redis-py
    when it meets one of its read timeouts), and the loop must not take
    that for a failure to try again."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


CANCEL_AGAIN_S = 0.5
"""How long a cancelled task has to end before it is cancelled again."""


async def cancel_all(
    tasks: Iterable[asyncio.Task[Any]], *, again_s: float = CANCEL_AGAIN_S
) -> None:
    """Cancel `tasks` and wait until every one has ended, cancelling again,
    each `again_s`, any that swallowed its cancellation and went on."""
    pending = [task for task in tasks if not task.done()]
    while pending:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=again_s)
        pending = [task for task in pending if not task.done()]
