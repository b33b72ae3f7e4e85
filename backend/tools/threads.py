"""Worker threads for plain (synchronous) tool functions.

A plain function that blocks (a file, a database driver, a blocking HTTP
client) would freeze the event loop and every conversation with it; here it
runs in a thread of its own while the caller awaits the result::

    threads = ThreadRunner(8)
    value = await threads.run(fn, args, ctx)

At most `size` functions run at once; more calls wait for a free slot. A
thread cannot be stopped: when the caller gives up (the executor's timeout,
Stop) the call is abandoned, and the thread keeps its slot until the
function returns. Threads are daemons, so a function that never returns
does not hold up the server's exit (a shared `ThreadPoolExecutor` would:
it joins its threads at exit). The caller's context variables are copied
into the thread, as `asyncio.to_thread` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any


class ThreadRunner:
    """Runs plain functions in daemon threads, at most `size` at a time."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, not {size}")
        self.size = size
        self._slots = asyncio.Semaphore(size)
        self._running = 0

    @property
    def running(self) -> int:
        """Threads still running a function (abandoned ones included)."""
        return self._running

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in a thread; its result, or its exception, here.

        Cancelling the caller abandons the call: the function runs on and
        its outcome is dropped."""
        await self._slots.acquire()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()

        def work() -> None:
            try:
                outcome: Any = _Returned(context.run(fn, *args))
            except BaseException as exc:  # reported to the caller, never raised here
                outcome = exc if isinstance(exc, Exception) else _foreign(exc)
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits
                loop.call_soon_threadsafe(self._finish, done, outcome)

        name = f"loopwire-tool-{getattr(fn, '__name__', type(fn).__name__)}"
        thread = threading.Thread(target=work, name=name, daemon=True)
        try:
            thread.start()
        except BaseException:
            self._slots.release()
            raise
        self._running += 1
        return await done

    async def aclose(self) -> None:
        """Nothing to stop: a thread cannot be, and these do not hold up the
        exit."""

    def _finish(self, done: asyncio.Future[Any], outcome: Any) -> None:
        self._running -= 1
        self._slots.release()
        if done.done():  # abandoned
            return
        if isinstance(outcome, _Returned):
            done.set_result(outcome.value)
        else:
            done.set_exception(outcome)


class _Returned:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _foreign(exc: BaseException) -> RuntimeError:
    """SystemExit or KeyboardInterrupt from a tool: a failure of that call,
    not a reason for the server to exit."""
    return RuntimeError(f"the function raised {type(exc).__name__}: {exc}")
