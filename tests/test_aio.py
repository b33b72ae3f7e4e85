"""The asyncio helpers that keep a cancellation from being lost
(backend/aio.py): a library that swallows one must not keep a loop alive."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from backend.aio import Interrupt, cancel_all, finished, stop_if_cancelled


class LibraryError(Exception):
    """What a library raises instead of the cancellation it was cut by."""


async def swallows_first_cancel(
    started: asyncio.Event, cancels: list[int], resumed: asyncio.Event
) -> None:
    """Waits forever; takes its first cancellation for a read timeout (as
    redis-py may) and waits again."""
    started.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancels.append(1)
    resumed.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancels.append(2)
        raise


async def test_cancel_all_cancels_again_a_task_that_swallowed_its_cancellation() -> (
    None
):
    """A task that swallows its first cancellation is cancelled again until it ends."""
    cancels: list[int] = []
    started, resumed = asyncio.Event(), asyncio.Event()
    stubborn = asyncio.create_task(swallows_first_cancel(started, cancels, resumed))
    plain = asyncio.create_task(asyncio.Event().wait())
    await started.wait()
    await cancel_all([stubborn, plain], again_s=0.05)
    assert stubborn.cancelled() and plain.cancelled()
    assert cancels == [1, 2] and resumed.is_set()


async def test_cancel_all_with_nothing_to_cancel_returns_at_once() -> None:
    """`cancel_all` with only finished tasks, or none, returns without waiting."""
    done = asyncio.create_task(asyncio.sleep(0))
    await done
    await cancel_all([done], again_s=60)
    await cancel_all([], again_s=60)


async def test_a_loop_that_catches_errors_still_stops_when_cancelled() -> None:
    """The library turns the cancellation into its own error; the loop,
    which goes on after errors, sees the pending cancellation and stops."""
    rounds: list[str] = []
    entered = asyncio.Event()

    async def library_call() -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            raise LibraryError("connection was closed mid-operation") from exc

    async def loop() -> None:
        while True:
            try:
                await library_call()
            except LibraryError:
                stop_if_cancelled()
                rounds.append("tried again")

    task = asyncio.create_task(loop())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rounds == []


async def test_stop_if_cancelled_lets_a_task_not_asked_to_stop_go_on() -> None:
    """`stop_if_cancelled` does nothing in a task with no pending cancellation."""

    async def check() -> str:
        stop_if_cancelled()
        return "went on"

    assert await asyncio.create_task(check()) == "went on"
    stop_if_cancelled()  # the test's own task: not cancelled either


async def test_finished_work_outlives_its_callers_cancellation() -> None:
    """`finished` lets the work end though the caller is cancelled, then
    raises the cancellation; the work's own failure is raised as is."""
    started, gate, ended = asyncio.Event(), asyncio.Event(), []

    async def work() -> str:
        started.set()
        await gate.wait()
        ended.append(True)
        return "done"

    caller = asyncio.create_task(finished(work()))
    await started.wait()
    caller.cancel()
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert ended == [True]

    async def broken() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await finished(broken())
    assert await finished(work()) == "done"


async def interruptible(interrupt: Interrupt, entered: asyncio.Event) -> str:
    """Waits forever inside `interrupt`'s block; says how the block ended."""
    with interrupt:
        entered.set()
        await asyncio.Event().wait()
    return "interrupted" if interrupt.interrupted else "ended"


async def test_an_interrupt_ends_its_block_where_it_waits() -> None:
    """`interrupt` cuts the block at its wait; the task goes on after it, no
    longer cancelled."""
    interrupt, entered = Interrupt(), asyncio.Event()
    task = asyncio.ensure_future(interruptible(interrupt, entered))
    await entered.wait()
    interrupt.interrupt()
    assert await task == "interrupted"
    assert task.cancelling() == 0


async def test_an_interrupt_before_the_block_cuts_it_at_its_first_wait() -> None:
    """Interrupted before it is entered, the block ends at its first wait."""
    interrupt, entered = Interrupt(), asyncio.Event()
    interrupt.interrupt()
    assert await interruptible(interrupt, entered) == "interrupted"
    assert entered.is_set()


async def test_another_cancellation_of_an_interrupted_task_still_propagates() -> None:
    """The task cancelled by someone else as well: that cancellation is raised."""
    interrupt, entered = Interrupt(), asyncio.Event()
    task = asyncio.ensure_future(interruptible(interrupt, entered))
    await entered.wait()
    interrupt.interrupt()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancellation_not_the_interrupts_propagates() -> None:
    """A task cancelled while in the block, not interrupted, is cancelled."""
    interrupt, entered = Interrupt(), asyncio.Event()
    task = asyncio.ensure_future(interruptible(interrupt, entered))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not interrupt.interrupted


async def test_an_interrupt_after_the_block_cancels_nothing() -> None:
    """Once the block has ended, an interrupt only marks it: the task goes on."""
    interrupt = Interrupt()
    with interrupt:
        await asyncio.sleep(0)
    interrupt.interrupt()
    await asyncio.sleep(0)
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    assert interrupt.interrupted


async def test_an_interrupt_the_block_swallowed_still_leaves_the_task_uncancelled() -> (
    None
):
    """Work in the block that swallows the cancellation and returns: the
    block ends normally, marked interrupted, and the task is not cancelled."""
    interrupt, entered = Interrupt(), asyncio.Event()

    async def swallowing() -> bool:
        with interrupt:
            entered.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()
        await asyncio.sleep(0)  # not cancelled here
        return interrupt.interrupted

    task = asyncio.ensure_future(swallowing())
    await entered.wait()
    interrupt.interrupt()
    assert await task is True
    assert task.cancelling() == 0
