"""Worker processes for CPU-bound tool functions, killed at their deadline.

A computation holds the GIL: in a thread it would still starve the event
loop, and a thread cannot be stopped. A `cpu_bound` tool's function runs in
a worker process instead, and when the caller gives up (the executor's
timeout, Stop) that process is killed::

    pool = ProcessPool(4)
    value = await pool.run(fn, args, ctx)  # fn: a top-level plain function
    ...
    await pool.aclose()

Workers are started with "spawn" (a fresh interpreter: never `fork` in a
process with threads and an event loop), one per call that finds none idle,
and reused afterwards. At most `size` calls run at once; more wait for a
slot. A worker whose call is abandoned is killed (SIGKILL: it gets no chance
to clean up, and processes it started itself are not followed) and the next
call starts a fresh one; so is a worker that died or answered nonsense.

Everything between the loop and a worker goes over a socket pair read and
written with asyncio streams, so waiting, sending arguments and receiving a
result never block the loop: a call is `pickle((fn, args))` one way and a
pickled reply the other, each framed by its length (the worker's side is
`worker.py`). The function and its
arguments are pickled by reference to their modules, which the worker
imports: both must be defined at the top level of a module (`Tool` checks
this when the tool is made). What the worker answers becomes, here:

- the function's return value;
- `ToolError(message, retryable)` when it raised `ToolError`;
- `ToolError("the tool crashed (<Type>: <message>)", retryable=True)` when it
  raised anything else (its traceback is logged);
- `ToolError("the tool's process …")` when the process died or its result
  could not be pickled or was over `MAX_REPLY_BYTES`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import pickle
import socket
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

from backend.errors import ToolError
from backend.tools.worker import HEADER, Broken, Raised, Returned, frame, serve

log = logging.getLogger(__name__)

MAX_REPLY_BYTES = 64 * 1024 * 1024
"""A worker's reply larger than this is refused (and the worker killed)."""


class ProcessPool:
    """Up to `size` worker processes running functions, one call each at a time."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, not {size}")
        self.size = size
        self._context = multiprocessing.get_context("spawn")
        self._slots = asyncio.Semaphore(size)
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._strays: list[BaseProcess] = []
        self._closed = False

    @property
    def pids(self) -> tuple[int, ...]:
        """The process ids of the live workers, busy ones first."""
        workers = [*self._busy, *self._idle]
        return tuple(w.process.pid for w in workers if w.process.pid is not None)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in a worker process; its result, or a `ToolError`.

        Cancelling the caller kills the worker, then re-raises."""
        if self._closed:
            raise ToolError("the tool's worker processes are shut down")
        job = _job(fn, args)
        async with self._slots:
            reply = await self._ask(job)
        return _unwrap(reply, fn)

    async def aclose(self) -> None:
        """Kill every worker and wait for them to be gone."""
        self._closed = True
        workers, self._idle = [*self._idle, *self._busy], []
        for worker in workers:
            await self._discard(worker)
        strays, self._strays = self._strays, []
        for process in strays:
            await _reap(process)

    async def _ask(self, job: bytes) -> Any:
        worker = await self._take()
        self._busy.add(worker)
        try:
            reply = await worker.ask(job)
        except BaseException:
            await self._discard(worker)
            raise
        if isinstance(reply, _Lost):
            code = await self._discard(worker)
            return Broken(reply.explain(code), retryable=reply.ended)
        self._busy.discard(worker)
        if self._closed:
            await self._discard(worker)
        else:
            self._idle.append(worker)
        return reply

    async def _take(self) -> _Worker:
        """An idle worker that is still alive, or a fresh one."""
        while self._idle:
            worker = self._idle.pop()
            if worker.process.is_alive():
                return worker
            await self._discard(worker)  # it died while idle (the OOM killer?)
        return await self._start()

    async def _start(self) -> _Worker:
        self._reap_strays()
        ours, theirs = socket.socketpair()
        process = self._context.Process(
            target=serve, args=(theirs,), name="loopwire-tool", daemon=True
        )
        try:
            process.start()  # ~1 ms: the interpreter starts on its own
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        try:
            reader, writer = await asyncio.open_connection(sock=ours)
        except BaseException:
            ours.close()
            process.kill()
            self._strays.append(process)
            raise
        return _Worker(process, reader, writer)

    async def _discard(self, worker: _Worker) -> int | None:
        """Kill `worker` and reap it; its exit code. If this is interrupted,
        the process is reaped later (by the next start, or `aclose`)."""
        self._busy.discard(worker)
        if worker.gone:
            return None
        worker.gone = True
        worker.writer.close()
        process = worker.process
        if process.exitcode is None:
            process.kill()
        try:
            code = await _reap(process)
        except BaseException:
            self._strays.append(process)
            raise
        with contextlib.suppress(ConnectionError):
            await worker.writer.wait_closed()
        return code

    def _reap_strays(self) -> None:
        for process in list(self._strays):
            if not process.is_alive():  # is_alive() reaps a dead one
                process.close()
                self._strays.remove(process)


@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    gone: bool = False

    async def ask(self, job: bytes) -> Any:
        """Send one job; the worker's reply, unpickled, or `_Lost`."""
        self.writer.write(frame(job))
        try:
            await self.writer.drain()
            (size,) = HEADER.unpack(await self.reader.readexactly(HEADER.size))
            if size > MAX_REPLY_BYTES:
                return _Lost(f"its result was over {MAX_REPLY_BYTES} bytes")
            payload = await self.reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return _Lost("it ended before answering", ended=True)
        try:
            return pickle.loads(payload)
        except Exception as exc:
            return _Lost(f"its answer could not be read ({exc!r})")


@dataclass(frozen=True, slots=True)
class _Lost:
    """The worker cannot be used again: why. `ended`: it went by itself."""

    reason: str
    ended: bool = False

    def explain(self, exit_code: int | None) -> str:
        if not self.ended or exit_code is None:
            return self.reason
        if exit_code < 0:
            return f"{self.reason} (killed by signal {-exit_code})"
        return f"{self.reason} (exit code {exit_code})"


async def _reap(process: BaseProcess) -> int | None:
    """Wait, without blocking the loop, until `process` ends; then reap it.
    Its exit code."""
    if process.exitcode is None:
        loop = asyncio.get_running_loop()
        ended = loop.create_future()
        loop.add_reader(process.sentinel, _settle, ended)
        try:
            await ended
        finally:
            loop.remove_reader(process.sentinel)
    process.join()  # it has ended: this only collects its status
    code = process.exitcode
    process.close()
    return code


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _job(fn: Callable[..., Any], args: tuple[Any, ...]) -> bytes:
    try:
        return pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise ToolError(
            f"the call cannot be sent to the tool's process: {exc}"
        ) from exc


def _unwrap(reply: Any, fn: Callable[..., Any]) -> Any:
    if isinstance(reply, Returned):
        return reply.value
    if isinstance(reply, Raised):
        if reply.retryable is not None:  # a ToolError
            raise ToolError(reply.message, retryable=reply.retryable)
        where = getattr(fn, "__qualname__", repr(fn))
        log.warning("tool function %s crashed in its process:\n%s", where, reply.trace)
        message = f"the tool crashed ({reply.kind}: {reply.message})"
        raise ToolError(message, retryable=True)
    if isinstance(reply, Broken):
        message = f"the tool's process could not answer: {reply.reason}"
        raise ToolError(message, retryable=reply.retryable)
    raise ToolError(f"the tool's process answered {type(reply).__name__}")
