"""`Meter`: what one measured round cost, from `/proc` and the fake's counts.

    async with Meter(harness, server_pid) as meter:
        ...  # the round
    meter.reading.wall_s, .server_cpu_s, .fake_cpu_s, .client_cpu_s, .calls

Before the round it waits until the server is quiet, then reads the CPU
time of the server (with its child processes), of the fake LLM, of this
process and of the whole machine, and the fake's request counts; after it,
it takes the wall time at once, waits until the server is quiet again (so
the work the round left behind is the round's), and reads them all again.
What the machine spent beyond those three is other processes' load: the
harness reports it, as it distorts the round.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from types import TracebackType

from benchmarks.checks import BenchError
from benchmarks.harness import ROUND_LIMIT_S, Harness
from benchmarks.procfs import (
    cpu_seconds,
    machine_busy_seconds,
    own_cpu_seconds,
    settle,
)


@dataclass
class Reading:
    wall_s: float = 0.0
    server_cpu_s: float = 0.0
    fake_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    machine_cpu_s: float = 0.0
    """CPU time of every process on the machine over the window."""
    window_s: float = 0.0
    """From the start to the end of the round and the quiet after it."""
    calls_before: dict[str, int] = field(default_factory=dict)
    calls_after: dict[str, int] = field(default_factory=dict)


class Meter:
    def __init__(self, harness: Harness, pid: int, *, what: str = "round") -> None:
        self.harness = harness
        self.pid = pid
        self.what = what
        self.reading = Reading()
        self._started = 0.0
        self._timeout = asyncio.timeout(ROUND_LIMIT_S)

    async def __aenter__(self) -> Meter:
        await settle(self.pid)
        reading = self.reading
        reading.calls_before = await self.harness.counts()
        reading.server_cpu_s = -cpu_seconds(self.pid)
        reading.fake_cpu_s = -cpu_seconds(self.harness.fake.pid)
        reading.client_cpu_s = -own_cpu_seconds()
        reading.machine_cpu_s = -machine_busy_seconds()
        await self._timeout.__aenter__()
        self._started = time.perf_counter()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        reading = self.reading
        reading.wall_s = time.perf_counter() - self._started
        try:
            await self._timeout.__aexit__(kind, error, trace)
        except TimeoutError:
            raise BenchError(f"{self.what} took more than {ROUND_LIMIT_S:g}s") from None
        if error is not None:
            return
        await settle(self.pid)
        reading.server_cpu_s += cpu_seconds(self.pid)
        reading.fake_cpu_s += cpu_seconds(self.harness.fake.pid)
        reading.client_cpu_s += own_cpu_seconds()
        reading.machine_cpu_s += machine_busy_seconds()
        reading.window_s = time.perf_counter() - self._started
        reading.calls_after = await self.harness.counts()
        self.harness.note_other_load(reading)
