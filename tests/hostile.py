"""Shared by the input-bound suites (`test_fuzz`, `test_flood`,
`test_memory_bounds`): the protocol's cheapest round trip, a process's RSS,
percentiles, and an event loop in a thread for tests that Hypothesis drives.

The round trip is a `tool_approval_response` for a tool call nobody asked
about: whatever the session is doing (no run, a run, a question pending),
the server answers it at once, in order, with one `no_pending_approval`
error that names the id, so a probe tagged `n` is matched exactly.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from websockets.asyncio.client import connect

from tests.ws_client import Client, Frame, FrameReader

T = TypeVar("T")

STOP = json.dumps({"type": "agent_control", "action": "stop"})


def probe(tag: object) -> str:
    return json.dumps(
        {
            "type": "tool_approval_response",
            "tool_call_id": f"probe-{tag}",
            "approved": False,
        }
    )


def answers_probe(frame: Frame, tag: object) -> bool:
    return (
        frame["type"] == "error"
        and frame["error_type"] == "no_pending_approval"
        and f"'probe-{tag}'" in frame["message"]
    )


async def until_probe(client: FrameReader, tag: object) -> list[Frame]:
    """The frames before the answer to probe `tag` (the answer not included)."""
    frames = await client.until(lambda frame: answers_probe(frame, tag))
    return frames[:-1]


async def round_trip(client: Client, tag: object) -> float:
    """Seconds from sending probe `tag` to its answer, which must come next."""
    start = time.perf_counter()
    await client.send_raw(probe(tag))
    frame = await client.recv()
    elapsed = time.perf_counter() - start
    assert answers_probe(frame, tag), frame
    return elapsed


async def open_client(url: str) -> Client:
    """A connected client whose `session_ready` has been read."""
    client = Client(await connect(url, max_size=1 << 22))
    ready = await client.recv()
    assert ready["type"] == "session_ready", ready
    return client


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank `q`-th percentile (q in 0-100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


class LoopThread:
    """An event loop running in its own thread; `run` a coroutine on it from
    synchronous code (a Hypothesis test) and wait for the result. Tasks it
    started (a server process's log reader) keep running between calls."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        async def cancel_the_rest() -> None:
            current = asyncio.current_task()
            rest = [t for t in asyncio.all_tasks() if t is not current]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        self.run(cancel_the_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


@contextmanager
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    thread.start()
    try:
        yield thread
    finally:
        thread.stop()
