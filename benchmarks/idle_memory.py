"""Idle memory: the VmRSS of a fresh loopwire that has done nothing yet.

Each sample is a pair of starts of `python -m backend serve` with the
product's default settings, only pointed at the fake LLM (the OpenAI
provider, as an operator's server is pointed at a model) and at a SQLite
file of its own, none of the bench's raised limits (`Harness.default_loopwire`):

1. on a new database file: the migrations run at start-up;
2. again on the same file, now migrated: what an operator sees at each
   restart. The target is judged on this one; the first is shown beside it.

Each start waits until `/healthz` says ok and `/api/info` names the fake's
model (as every loopwire the harness starts), then until the process used
no CPU for half a second; then VmRSS is read from `/proc/<pid>/status`
(the server's own process: an idle one has no children) and the server is
stopped. No client connects.
"""

from __future__ import annotations

from benchmarks.harness import Harness, progress
from benchmarks.procfs import rss_bytes, settle
from benchmarks.results import IdleMemory
from benchmarks.stats import Summary

QUIET_S = 0.5
"""How long the server must use no CPU before its RSS is read."""
SETTLE_LIMIT_S = 15.0


async def _idle_mb(harness: Harness, label: str, database_url: str) -> float:
    async with harness.default_loopwire(label, database_url) as server:
        await settle(server.pid, quiet_s=QUIET_S, limit_s=SETTLE_LIMIT_S)
        return rss_bytes(server.pid) / 1e6


async def measure(harness: Harness) -> IdleMemory:
    starts = harness.sizes.idle_starts
    fresh: list[float] = []
    migrated: list[float] = []
    for number in range(1, starts + 1):
        database = f"sqlite:///{harness.workdir / f'idle-{number}.db'}"
        fresh.append(await _idle_mb(harness, f"idle-{number}-new-db", database))
        migrated.append(await _idle_mb(harness, f"idle-{number}-migrated", database))
        progress(
            f"idle: start {number}/{starts}: {fresh[-1]:.1f} MB on a new database, "
            f"{migrated[-1]:.1f} MB restarted on it"
        )
    return IdleMemory(
        starts=starts, fresh_mb=Summary.of(fresh), migrated_mb=Summary.of(migrated)
    )
