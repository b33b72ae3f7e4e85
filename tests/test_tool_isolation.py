"""Plain tool functions run in worker threads, `cpu_bound` ones in worker
processes killed at their timeout; the event loop stays responsive.

Nothing here sleeps to synchronise: the tools report on threading events
(handed to the loop) or on a FIFO the test reads, and every wait is bounded.
The one `asyncio.sleep` is the loop-lag sampler's tick: it measures how late
the loop wakes it, it orders nothing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from backend.errors import ConfigError, ToolError
from backend.llm.base import ToolCall
from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from backend.tools.config import ExecutorConfig
from backend.tools.executor import CallScope, Ready, ToolExecutor
from backend.tools.outcome import ToolOutcome
from backend.tools.processes import ProcessPool
from backend.tools.threads import ThreadRunner
from tests import cpu_tools
from tests.conftest import StartServer
from tests.cpu_tools import FailArgs, SpinArgs, SquareArgs
from tests.fakes import ScriptedLLM, calls, observe, reason
from tests.fifo import fifo
from tests.ws_client import labels

UNASKED = ToolEffect(requires_approval=False)
"""A tool that changes something yet runs without asking (approvals are
not what these tests are about)."""
BOUND_S = 20.0  # every wait is bounded by this; the tests need far less
CTX = ToolContext(session_id="s1", run_id="r1", step=2)


class TextArgs(BaseModel):
    text: str = "x"


def cpu(name: str, fn: Any, args: type[BaseModel], **effect: Any) -> Tool[Any]:
    """A CPU-bound tool that runs unasked (unless an effect says otherwise)."""
    effect = {"cpu_bound": True, "requires_approval": False, **effect}
    return Tool(name, f"The {name} tool.", args, fn, ToolEffect(**effect))


class Harness:
    """An executor over `tools` with its own thread runner and process pool."""

    def __init__(self, *tools: Tool[Any], threads: int = 4, processes: int = 2) -> None:
        self.registry = ToolRegistry(tools)
        self.threads = ThreadRunner(threads)
        self.pool = ProcessPool(processes)
        self.executor = ToolExecutor(
            self.registry,
            ExecutorConfig(retry_backoff_s=0),
            threads=self.threads,
            processes=self.pool,
        )

    async def call(self, name: str, **arguments: Any) -> ToolOutcome:
        call = ToolCall(id=f"call-{name}", name=name, arguments=_json(arguments))
        scope = CallScope(ctx=CTX, allowed=self.registry.names)
        check = self.executor.check(call, scope)
        assert isinstance(check, Ready), check
        async with asyncio.timeout(BOUND_S):
            return await self.executor.execute(check, call, CTX)


def _json(arguments: dict[str, Any]) -> str:
    import json

    return json.dumps(arguments)


@asynccontextmanager
async def harness(*tools: Tool[Any], **sizes: int) -> AsyncIterator[Harness]:
    h = Harness(*tools, **sizes)
    try:
        yield h
    finally:
        await h.executor.aclose()


async def next_pid(reader: asyncio.StreamReader) -> int:
    async with asyncio.timeout(BOUND_S):
        return int((await reader.readline()).decode())


@asynccontextmanager
async def loop_lag(tick_s: float = 0.005) -> AsyncIterator[list[float]]:
    """How late (s) the loop wakes a ticker, sampled while the body runs."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []

    async def sample() -> None:
        while True:
            due = loop.time() + tick_s
            await asyncio.sleep(tick_s)
            lags.append(loop.time() - due)

    async with asyncio.TaskGroup() as group:
        sampler = group.create_task(sample())
        try:
            yield lags
        finally:
            sampler.cancel()


async def exited(pid: int) -> None:
    """Wait until process `pid` has ended (its pidfd becomes readable)."""
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    fd = os.pidfd_open(pid)
    loop.add_reader(fd, ended.set)
    try:
        async with asyncio.timeout(BOUND_S):
            await ended.wait()
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --- where a function runs ---------------------------------------------------------


async def _async_fn(args: TextArgs, ctx: ToolContext) -> str:
    return args.text


def _plain_fn(args: TextArgs, ctx: ToolContext) -> str:
    return args.text


class _AsyncCallable:
    async def __call__(self, args: TextArgs, ctx: ToolContext) -> str:
        return args.text


class _PlainCallable:
    def __call__(self, args: TextArgs, ctx: ToolContext) -> str:
        return args.text


def test_where_each_kind_of_function_runs() -> None:
    """Async tools run on the loop, plain ones in threads, `cpu_bound` in processes."""

    def runs_in(fn: Any, **effect: Any) -> str:
        return Tool("t", "T.", TextArgs, fn, ToolEffect(**effect)).runs_in

    assert runs_in(_async_fn) == "loop"
    assert runs_in(_AsyncCallable()) == "loop"
    assert runs_in(_plain_fn) == "thread"
    assert runs_in(_PlainCallable()) == "thread"
    assert cpu("sq", cpu_tools.square, SquareArgs).runs_in == "process"
    assert cpu_tools.registry.get("cube") is not None  # the decorator, at import
    assert cpu_tools.registry.get("cube").runs_in == "process"  # type: ignore[union-attr]


def test_a_cpu_bound_tool_must_be_a_top_level_plain_function() -> None:
    """A `cpu_bound` tool is refused unless it and its model are top-level and plain."""

    def nested(args: SquareArgs, ctx: ToolContext) -> int:
        return 0

    class LocalArgs(BaseModel):
        n: int = 0

    cases: list[tuple[Callable[..., Any], type[BaseModel], str]] = [
        (cpu_tools.not_plain, SquareArgs, "must be a plain def, not async"),
        (nested, SquareArgs, "must be defined at the top level of a module"),
        (lambda a, c: 0, SquareArgs, "must be defined at the top level of a module"),
        (_PlainCallable(), TextArgs, "must be defined at the top level of a module"),
        (cpu_tools.square, LocalArgs, "argument model .*LocalArgs must be defined"),
    ]
    for fn, args, message in cases:
        with pytest.raises(ConfigError, match=message) as caught:
            ToolRegistry([cpu("bad", fn, args)])
        assert str(caught.value).startswith("cpu_bound tool 'bad': ")


# --- plain functions: worker threads -------------------------------------------------


async def test_a_blocking_tool_does_not_block_the_loop() -> None:
    """While a plain tool blocks its worker thread, another tool's call completes."""
    loop = asyncio.get_running_loop()
    entered, release = asyncio.Event(), threading.Event()

    def blocking(args: TextArgs, ctx: ToolContext) -> dict[str, str]:
        loop.call_soon_threadsafe(entered.set)
        assert release.wait(BOUND_S)  # blocks this thread, as a driver would
        return {"text": args.text, "thread": threading.current_thread().name}

    tools = (
        Tool("block", "B.", TextArgs, blocking, UNASKED),
        Tool("echo", "E.", TextArgs, _async_fn, UNASKED),
    )
    async with harness(*tools) as h, asyncio.TaskGroup() as group:
        blocked = group.create_task(h.call("block", text="done"))
        async with asyncio.timeout(BOUND_S):
            await entered.wait()
        neighbour = await h.call("echo", text="meanwhile")  # the loop is free
        assert neighbour.result == "meanwhile"
        assert not blocked.done() and h.threads.running == 1
        release.set()
    outcome = blocked.result()
    assert outcome.ok and outcome.result == {
        "text": "done",
        "thread": "loopwire-tool-blocking",
    }


async def test_a_blocking_tool_times_out_and_its_thread_keeps_its_slot() -> None:
    """A stuck plain tool times out, but its thread keeps its slot until it returns."""
    loop = asyncio.get_running_loop()
    entered, release = asyncio.Event(), threading.Event()

    def stuck(args: TextArgs, ctx: ToolContext) -> str:
        loop.call_soon_threadsafe(entered.set)
        release.wait(BOUND_S)
        return "late"

    tools = (
        Tool(
            "stuck",
            "S.",
            TextArgs,
            stuck,
            ToolEffect(requires_approval=False, timeout_s=0.2),
        ),
        Tool("quick", "Q.", TextArgs, _plain_fn, UNASKED),
    )
    async with harness(*tools, threads=1) as h, asyncio.TaskGroup() as group:
        outcome = await h.call("stuck")
        assert (outcome.status, outcome.error) == (
            "timeout",
            "timed out after 0.2s and may still be running; it was not tried again",
        )
        assert entered.is_set() and h.threads.running == 1  # abandoned, not stopped
        waiting = group.create_task(h.call("quick", text="after"))
        release.set()  # the abandoned function returns; its slot frees
    assert waiting.result().result == "after" and h.threads.running == 0


async def test_a_timed_out_thread_is_never_run_again_beside_itself() -> None:
    """An idempotent plain tool that times out is still running in its
    thread: it is not retried (a second thread would burn the CPU beside
    the first); one retried on an error it raised is."""
    loop = asyncio.get_running_loop()
    entered, release = asyncio.Event(), threading.Event()
    started: list[str] = []

    def stuck(args: TextArgs, ctx: ToolContext) -> str:
        started.append(args.text)
        loop.call_soon_threadsafe(entered.set)
        release.wait(BOUND_S)
        return "late"

    effect = ToolEffect(idempotent=True, timeout_s=0.2, requires_approval=False)
    async with harness(Tool("stuck", "S.", TextArgs, stuck, effect), threads=2) as h:
        outcome = await h.call("stuck")
        assert (outcome.status, outcome.attempts, started) == ("timeout", 1, ["x"])
        assert h.threads.running == 1
        release.set()


async def test_an_async_tool_that_ignores_its_cancellation_still_times_out() -> None:
    """It catches the cancellation and goes on: the call is reported at its
    timeout (plus the grace it has to end), not retried although it is
    idempotent, and watched until it ends."""
    started: list[str] = []
    ignored, release = asyncio.Event(), asyncio.Event()

    async def stubborn(args: TextArgs, ctx: ToolContext) -> str:
        started.append(args.text)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            ignored.set()
        await release.wait()
        return "late"

    effect = ToolEffect(idempotent=True, timeout_s=0.1, requires_approval=False)
    async with harness(Tool("stubborn", "S.", TextArgs, stubborn, effect)) as h:
        outcome = await h.call("stubborn")
        assert (outcome.status, outcome.error) == (
            "timeout",
            "timed out after 0.1s and may still be running; it was not tried again",
        )
        assert ignored.is_set() and started == ["x"]
        assert h.executor.abandoned == 1
        release.set()  # it ends; closing the executor waits for it
    assert h.executor.abandoned == 0


async def test_an_async_tool_that_ends_when_cancelled_is_retried() -> None:
    """An idempotent async tool that times out but stops on cancel is retried."""
    attempts: list[int] = []

    async def slow_once(args: TextArgs, ctx: ToolContext) -> str:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            await asyncio.Event().wait()
        return "second time"

    effect = ToolEffect(idempotent=True, timeout_s=0.1, requires_approval=False)
    async with harness(Tool("slow", "S.", TextArgs, slow_once, effect)) as h:
        outcome = await h.call("slow")
    assert (outcome.status, outcome.result, attempts) == ("ok", "second time", [1, 2])
    assert h.executor.abandoned == 0


async def test_a_plain_tools_errors_are_reported() -> None:
    """A plain tool's `ToolError`, other exception or `sys.exit` each fail its call."""

    def refuses(args: TextArgs, ctx: ToolContext) -> None:
        raise ToolError(f"no {args.text}")

    def crashes(args: TextArgs, ctx: ToolContext) -> None:
        raise KeyError(args.text)

    def exits(args: TextArgs, ctx: ToolContext) -> None:
        sys.exit(2)

    tools = (
        Tool("refuses", "R.", TextArgs, refuses, UNASKED),
        Tool("crashes", "C.", TextArgs, crashes, UNASKED),
        Tool("exits", "X.", TextArgs, exits, UNASKED),
    )
    async with harness(*tools) as h:
        assert (await h.call("refuses", text="way")).error == "no way"
        assert (await h.call("crashes", text="k")).error == (
            "the tool crashed (KeyError: 'k')"
        )
        assert (await h.call("exits")).error == (
            "the tool crashed (RuntimeError: the function raised SystemExit: 2)"
        )


async def test_a_plain_function_returning_an_awaitable_is_awaited() -> None:
    """A lambda around an async function is plain; its coroutine is awaited
    on the loop, as before plain functions ran in threads."""
    wrapper = Tool(
        "wrap", "W.", TextArgs, lambda args, ctx: _async_fn(args, ctx), UNASKED
    )
    assert wrapper.runs_in == "thread"
    async with harness(wrapper) as h:
        assert (await h.call("wrap", text="inner")).result == "inner"


async def test_calling_a_plain_tool_directly_runs_it_in_a_thread() -> None:
    """Awaiting a plain `Tool` outside the executor runs it off the main thread."""

    def where(args: TextArgs, ctx: ToolContext) -> str:
        return threading.current_thread().name

    assert (
        await Tool("where", "W.", TextArgs, where, UNASKED)(TextArgs(), CTX)
        != "MainThread"
    )


# --- cpu_bound functions: worker processes -------------------------------------------


async def test_a_cpu_bound_tool_runs_in_a_reused_worker_process() -> None:
    """A `cpu_bound` tool runs in one reused worker process, stopped at close."""
    async with harness(cpu("square", cpu_tools.square, SquareArgs)) as h:
        first = await h.call("square", n=12)
        second = await h.call("square", n=3)
        assert first.ok and first.result["square"] == 144
        assert first.result["session"] == "s1"  # the context travels too
        assert first.result["thread"] == "MainThread"
        pid = first.result["pid"]
        assert pid != os.getpid() and second.result["pid"] == pid
        assert h.pool.pids == (pid,)
    assert not alive(pid)  # aclose() stops the idle worker


async def test_errors_in_the_worker_become_tool_errors() -> None:
    """Worker-process errors, retries and unpicklable results become tool errors."""
    tools = (
        cpu("refuse", cpu_tools.refuse, FailArgs, idempotent=True),
        cpu("crash", cpu_tools.crash, FailArgs),
        cpu("unpicklable", cpu_tools.unpicklable, SquareArgs),
    )
    async with harness(*tools, processes=1) as h:
        refused = await h.call("refuse", message="no such prime")
        assert (refused.status, refused.error, refused.attempts) == (
            "failed",
            "no such prime",
            1,
        )
        retried = await h.call("refuse", message="busy", retryable=True)
        assert (retried.error, retried.attempts) == ("busy (after 3 attempts)", 3)
        crashed = await h.call("crash", message="bad input")
        assert crashed.error == "the tool crashed (ValueError: bad input)"
        odd = await h.call("unpicklable")
        assert odd.error is not None and odd.error.startswith(
            "the tool's process could not answer: its result cannot be pickled"
        )
        assert len(h.pool.pids) == 1  # one worker served them all


async def test_a_worker_that_dies_is_replaced() -> None:
    """A worker that exits mid-call fails that call; a new worker serves the next."""
    tools = (
        cpu("die", cpu_tools.die, SquareArgs),
        cpu("square", cpu_tools.square, SquareArgs),
    )
    async with harness(*tools, processes=1) as h:
        before = (await h.call("square", n=1)).result["pid"]
        died = await h.call("die", n=3)
        assert (died.status, died.error) == (
            "failed",
            "the tool's process could not answer: it ended before answering "
            "(exit code 3)",
        )
        assert not alive(before) and h.pool.pids == ()
        after = await h.call("square", n=2)
        assert after.result["square"] == 4
        assert after.result["pid"] != before


async def test_a_cpu_bound_tool_is_killed_at_its_timeout(tmp_path: Path) -> None:
    """A `cpu_bound` call is killed at its timeout while the loop stays responsive."""
    tools = (
        cpu("spin", cpu_tools.spin, SpinArgs, timeout_s=0.5),
        cpu("square", cpu_tools.square, SquareArgs),
    )
    loop = asyncio.get_running_loop()
    async with (
        harness(*tools, processes=1) as h,
        fifo(tmp_path, "reports") as (channel, pids),
    ):
        await h.call("square")  # a warm worker: the timeout is all computing
        async with loop_lag() as lags, asyncio.TaskGroup() as group:
            called = loop.time()
            spinning = group.create_task(h.call("spin", channel=channel))
            pid = await next_pid(pids)
            assert alive(pid) and h.pool.pids == (pid,)
            outcome = await spinning
            returned = loop.time()
        assert not alive(pid)  # killed and reaped before the outcome
        assert h.pool.pids == ()
    wall, late = returned - called, returned - called - 0.5
    worst = max(lags)
    print(
        f"\ncpu_bound timeout: outcome after {wall * 1000:.0f} ms "
        f"({late * 1000:.0f} ms past the 0.5 s deadline); loop lag while it "
        f"computed: max {worst * 1000:.1f} ms over {len(lags)} samples"
    )
    assert (outcome.status, outcome.error) == ("timeout", "timed out after 0.5s")
    assert 0.5 <= wall < 3.0
    assert len(lags) > 10 and worst < 0.2


async def test_cancelling_a_cpu_bound_call_kills_its_worker(tmp_path: Path) -> None:
    """Cancelling a `cpu_bound` call kills the worker process running it."""
    async with harness(cpu("spin", cpu_tools.spin, SpinArgs)) as h:
        async with fifo(tmp_path, "reports") as (channel, pids):
            task = asyncio.create_task(h.call("spin", channel=channel))
            pid = await next_pid(pids)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert not alive(pid) and h.pool.pids == ()


async def test_calls_beyond_the_bound_wait_for_a_worker(tmp_path: Path) -> None:
    """A call beyond the process limit waits, then runs once a worker slot frees."""
    async with harness(cpu("spin", cpu_tools.spin, SpinArgs), processes=1) as h:
        async with (
            fifo(tmp_path, "reports") as (channel, pids),
            asyncio.TaskGroup() as group,
        ):
            first = group.create_task(h.call("spin", channel=channel))
            first_pid = await next_pid(pids)
            second = group.create_task(h.call("spin", channel=channel, seconds=0))
            first.cancel()  # frees the only slot
            second_pid = await next_pid(pids)
        assert first.cancelled() and not alive(first_pid)
        assert second.result().ok and second_pid != first_pid


async def test_a_cpu_bound_tool_through_the_app_leaves_the_neighbours_served(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A real WebSocket neighbour pings the server while a run computes. The
    first call only starts the worker, so the second's 1 s is all computing."""
    registry = ToolRegistry(
        [cpu("spin", cpu_tools.spin, SpinArgs, read_only=True, timeout_s=1.0)]
    )
    async with fifo(tmp_path, "reports") as (channel, pids):
        llm = ScriptedLLM(
            reason("compute"),
            calls(
                ("spin", {"channel": channel, "seconds": 0}),
                ("spin", {"channel": channel}),
            ),
            observe(should_continue=False, final="It took too long."),
        )
        server = await start_server(llm, registry, agent_parallel_tool_calls=1)
        busy, _ = await server.ready_client()
        neighbour, _ = await server.ready_client()
        loop = asyncio.get_running_loop()
        round_trips: list[float] = []
        async with asyncio.TaskGroup() as group:
            run = group.create_task(busy.chat("spin", agent_mode=True))
            warm, pid = await next_pid(pids), await next_pid(pids)
            while not run.done():
                sent = loop.time()
                async with asyncio.timeout(BOUND_S):
                    await (await neighbour.connection.ping())
                round_trips.append(loop.time() - sent)
        frames = run.result()
    assert [label for label in labels(frames) if label.startswith("tool_")] == [
        "tool_start:spin",
        "tool_complete:spin",
        "tool_start:spin",
        "tool_error:spin:timeout",
    ]
    assert warm == pid and not alive(pid)
    worst = max(round_trips)
    print(
        f"\nWebSocket neighbour during a cpu_bound call: {len(round_trips)} pings, "
        f"max round trip {worst * 1000:.1f} ms"
    )
    assert len(round_trips) > 10 and worst < 0.2


async def test_a_worker_that_died_while_idle_is_not_used() -> None:
    """A worker killed while idle is replaced on the next call, without an error."""
    async with harness(cpu("square", cpu_tools.square, SquareArgs)) as h:
        first = (await h.call("square", n=2)).result["pid"]
        os.kill(first, signal.SIGKILL)
        await exited(first)
        again = await h.call("square", n=3)  # a fresh worker, not an error
        assert again.ok and again.result["pid"] != first
        assert h.pool.pids == (again.result["pid"],)
