"""Small asyncio helpers. Every task created here is awaited before return."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


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
