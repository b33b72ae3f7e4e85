"""`RunControl`'s waits: each lever ends a wait with its outcome, in the
order a paused run needs (parked, stopped, past its deadline, then an answer
given early), and a waiting run holds no helper tasks."""

from __future__ import annotations

import asyncio

import pytest

from backend.agent.run_control import SUSPENDED, RunControl, UserAnswer
from backend.agent.state import Answered, Approved, Declined, StopRequested, TimedOut
from backend.errors import NoPendingApproval

LONG_S = 3600.0


async def waiting_for_answer(
    control: RunControl, limit_s: float = LONG_S
) -> asyncio.Task[object]:
    """The wait, started and parked on its future (nothing else runs it)."""
    task = asyncio.ensure_future(control.wait_for_answer(limit_s))
    await asyncio.sleep(0)  # one turn of the loop: the task reaches its await
    assert not task.done()
    return task


async def test_an_answer_ends_the_wait_with_no_helper_tasks() -> None:
    """An answer ends a pending wait with its content, and the wait spawns no tasks."""
    control = RunControl()
    before = len(asyncio.all_tasks())
    task = await waiting_for_answer(control)
    assert len(asyncio.all_tasks()) == before + 1  # the wait itself, nothing more
    control.answer(UserAnswer("q1", "metres"))
    assert await task == Answered(content="metres")
    assert not control.answered


async def test_an_answer_given_before_the_wait_is_taken_by_it() -> None:
    """Answers given before any wait queue up and are taken in order by later waits."""
    control = RunControl()
    control.answer(UserAnswer("q1", "first"))
    control.answer(UserAnswer("q1", "second"))
    assert control.answered
    assert await control.wait_for_answer(LONG_S) == Answered(content="first")
    assert await control.wait_for_answer(LONG_S) == Answered(content="second")
    assert not control.answered


async def test_the_deadline_ends_the_wait() -> None:
    """A wait past its deadline times out; an answer after it is kept for the next."""
    control = RunControl()
    assert await control.wait_for_answer(0.01) == TimedOut()
    assert await control.wait_for_answer(0) == TimedOut()
    control.answer(UserAnswer("q1", "late"))  # kept for the next wait
    assert control.answered


async def test_park_ends_a_wait_and_the_next_one() -> None:
    """A park ends the current wait and every later one."""
    control = RunControl()
    task = await waiting_for_answer(control)
    control.park()
    assert await task is SUSPENDED
    assert await control.wait_for_answer(LONG_S) is SUSPENDED


async def test_a_graceful_stop_leaves_a_question_to_its_answer() -> None:
    """A stop after the step does not end a wait for an answer (the question
    is part of the step): the answer does."""
    control = RunControl()
    task = await waiting_for_answer(control)
    control.stop("after_step")
    await asyncio.sleep(0)
    assert not task.done()
    control.answer(UserAnswer("q1", "blue"))
    assert await task == Answered(content="blue")


async def test_a_graceful_stop_ends_an_approval_wait() -> None:
    """A stop after the step ends a wait for an approval, and any later one."""
    control = RunControl()
    control.expect_approval("call-1")
    task = asyncio.ensure_future(control.wait_for_approval("call-1", LONG_S))
    await asyncio.sleep(0)
    control.stop("after_step")
    assert await task == StopRequested()
    assert await control.wait_for_approval("call-2", LONG_S) == StopRequested()


async def test_an_immediate_stop_leaves_the_wait_to_be_cancelled() -> None:
    """`stop_now` cancels the driver's run where it waits; the wait itself
    does not end (the run must not go on meanwhile)."""
    control = RunControl()
    task = await waiting_for_answer(control)
    control.stop("immediate")
    assert control.stop_now.interrupted
    await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await control.wait_for_approval("call-1", LONG_S) == StopRequested()


async def test_parked_comes_before_an_early_answer() -> None:
    """A park outranks a queued answer, which is kept; a graceful stop does not."""
    control = RunControl()
    control.answer(UserAnswer("q1", "yes"))
    control.stop("after_step")
    control.park()
    assert await control.wait_for_answer(LONG_S) is SUSPENDED
    assert control.answered  # never taken: the restart asks again


async def test_an_approval_decision_ends_its_wait() -> None:
    """A decision on the expected call ends its wait; others and repeats are refused."""
    control = RunControl()
    control.expect_approval("call-1")
    task = asyncio.ensure_future(control.wait_for_approval("call-1", LONG_S))
    await asyncio.sleep(0)
    with pytest.raises(NoPendingApproval):
        control.resolve_approval("call-2", True, None)
    control.resolve_approval("call-1", False, "not now")
    assert await task == Declined(reason="not now")
    with pytest.raises(NoPendingApproval):  # decided once; gone
        control.resolve_approval("call-1", True, None)


async def test_a_decision_made_before_the_wait_is_its_outcome() -> None:
    """An approval given before its wait starts is what the wait returns."""
    control = RunControl()
    control.expect_approval("call-1")
    control.resolve_approval("call-1", True, None)
    assert await control.wait_for_approval("call-1", LONG_S) == Approved()


async def test_an_approval_wait_times_out_and_closes_the_request() -> None:
    """An approval wait times out, and a late decision then finds nothing pending."""
    control = RunControl()
    assert await control.wait_for_approval("call-1", 0.01) == TimedOut()
    with pytest.raises(NoPendingApproval):
        control.resolve_approval("call-1", True, None)


async def test_a_cancelled_wait_leaves_nothing_waiting() -> None:
    """After a wait is cancelled, a new answer is queued instead of lost."""
    control = RunControl()
    task = await waiting_for_answer(control)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    control.answer(UserAnswer("q1", "after"))  # queued, not lost in a dead wait
    assert control.answered
