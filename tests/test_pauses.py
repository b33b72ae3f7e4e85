"""`within` (backend/pauses.py): a phase's work bounded by time outside the
run's pauses, run in the caller's own task."""

from __future__ import annotations

import asyncio

import pytest

from backend.aio import Interrupt
from backend.pauses import Pauses, within

LONG_S = 60.0


async def waits_for(held: asyncio.Future[str], seen: list[str]) -> str:
    """The work: waits for `held`; notes a cancellation if one comes."""
    try:
        return await held
    except asyncio.CancelledError:
        seen.append("cancelled")
        raise


async def test_work_within_its_limit_gives_its_result_in_the_callers_task() -> None:
    """The result comes in a 1-tuple; the work ran in the caller's task."""
    caller = asyncio.current_task()

    async def work() -> asyncio.Task[object] | None:
        return asyncio.current_task()

    assert await within(work(), LONG_S, Pauses()) == (caller,)
    assert await within(work(), None, None) == (caller,)


async def test_work_past_its_limit_is_cut_off_and_the_caller_goes_on() -> None:
    """Past the limit the work is cancelled where it waits; the caller gets
    None and is not itself cancelled."""
    seen: list[str] = []
    never: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    assert await within(waits_for(never, seen), 0.01, Pauses()) is None
    assert seen == ["cancelled"]
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    await asyncio.sleep(0)  # and no cancellation is left pending


async def test_an_open_pause_holds_the_deadline_until_it_ends() -> None:
    """Work that waits in a pause past its limit is not cut off."""
    pauses, seen = Pauses(), []
    held: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    pause = pauses.paused()
    pause.__enter__()
    bounded = asyncio.ensure_future(within(waits_for(held, seen), 0.05, pauses))
    done, _ = await asyncio.wait({bounded}, timeout=0.2)
    assert not done  # four times the limit has passed, all of it paused
    pause.__exit__(None, None, None)
    held.set_result("answered")
    assert await bounded == ("answered",)
    assert seen == []


async def test_a_pause_that_ended_moves_the_deadline_on_by_its_length() -> None:
    """The limit passed during a pause: once it ends, the work still has
    its time outside pauses (about all of it), then is cut off."""
    pauses, seen = Pauses(), []
    loop = asyncio.get_running_loop()
    answered, after = loop.create_future(), loop.create_future()

    async def work() -> str:
        with pauses.paused():
            await answered
        return await waits_for(after, seen)

    bounded = asyncio.ensure_future(within(work(), 0.05, pauses))
    done, _ = await asyncio.wait({bounded}, timeout=0.15)
    assert not done
    answered.set_result(None)
    assert await bounded is None  # cut off 0.05 s of unpaused time later
    assert seen == ["cancelled"]
    assert pauses.total_s() >= 0.15


async def test_a_stop_around_it_is_not_taken_for_its_timeout() -> None:
    """An interrupt of the caller (an immediate stop) cancels the work and
    propagates through `within` to its own block; no timeout is reported
    and none fires later."""
    stop, seen = Interrupt(), []
    never: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    entered = asyncio.Event()

    async def run() -> str:
        with stop:
            entered.set()
            await within(waits_for(never, seen), 0.05, Pauses())
            return "timed out"
        return "stopped"

    task = asyncio.ensure_future(run())
    await entered.wait()
    stop.interrupt()
    assert await task == "stopped"
    assert seen == ["cancelled"] and task.cancelling() == 0


async def test_a_cancelled_caller_cancels_the_work_and_stays_cancelled() -> None:
    """The caller's own cancellation is raised, not taken for a timeout."""
    seen: list[str] = []
    never: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(within(waits_for(never, seen), LONG_S, Pauses()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]
