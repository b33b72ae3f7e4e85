"""One user flooding does not starve another (issue #24, finding 2), with
real processes: the server, a flooder of alice's (`tests/fair_flood.py`),
and bob timing his agent runs from this process.

Before the per-user limits, a flooder that reconnected (2,122 connections
in 15 s) slowed bob's run from 21 ms to 15 s, and `POST /api/agent` had no
rate limit at all (62-92 runs/s, the database growing 20 MB per 15 s).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server_process import server_process

pytestmark = pytest.mark.timeout(150)

ROOT = Path(__file__).resolve().parent.parent
ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789ab"
RUNS = 25
PACE_S = 0.06
"""Bob starts a run every 60 ms (the pause paces the load; nothing waits on
it): each flood lasts about 1.5 s."""
RUN_BURST = 40
RUNS_PER_S = 10
CONNECT_BURST = 60
CONNECTS_PER_S = 5
SLACK_S = 0.05
"""What a shared machine adds on top of twice the baseline: the flooder,
the server and this process share two cores with the rest of the suite."""


async def timed_runs(bob: httpx.AsyncClient, count: int) -> list[float]:
    loop = asyncio.get_running_loop()
    begin = loop.time()
    times = []
    for i in range(count):
        start = time.perf_counter()
        answer = await bob.post("/api/agent", json={"query": "2+3", "stream": False})
        times.append(time.perf_counter() - start)
        assert answer.status_code == 200, answer.text
        assert answer.json()["agent_metadata"]["reason"] == "finished"
        await asyncio.sleep(max(0.0, begin + (i + 1) * PACE_S - loop.time()))
    return times


async def flooding(base: str, mode: str) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.fair_flood", base, ALICE, mode),
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    async with asyncio.timeout(30):
        assert await process.stdout.readline() == b"flooding\n"
    return process


async def stopped(process: asyncio.subprocess.Process) -> dict[str, Any]:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.close()
    account = json.loads(await process.stdout.read())
    await process.wait()
    return dict(account)


async def test_a_flooding_user_does_not_slow_another_users_runs(
    tmp_path: Path,
) -> None:
    """Alice's floods are throttled and Bob's median run stays within twice baseline."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {ALICE}\nbob: {BOB}\n", encoding="utf-8")
    tokens.chmod(0o600)
    async with server_process(
        f"sqlite:///{tmp_path / 'db.sqlite'}",
        auth_tokens_file=str(tokens),
        run_burst=str(RUN_BURST),
        runs_per_minute=str(RUNS_PER_S * 60),
        connect_burst=str(CONNECT_BURST),
        connects_per_s=str(CONNECTS_PER_S),
    ) as server:
        base = f"http://127.0.0.1:{server.port}"
        seen: dict[str, list[float]] = {}
        accounts: dict[str, dict[str, Any]] = {}
        started = time.perf_counter()
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {BOB}"}, timeout=60
        ) as bob:
            await timed_runs(bob, 2)  # warm up both ends
            seen["baseline"] = await timed_runs(bob, RUNS)
            for mode in ("reconnect", "runs"):
                flooder = await flooding(base, mode)
                try:
                    seen[mode] = await timed_runs(bob, RUNS)
                finally:
                    accounts[mode] = await stopped(flooder)
        flooded_s = time.perf_counter() - started
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {ALICE}"}
        ) as alice:
            listed = (await alice.get("/api/conversations?limit=100")).json()
            assert listed["next"] is None
        assert server.running
    medians = {k: round(statistics.median(v) * 1000, 1) for k, v in seen.items()}
    worst = {k: round(max(v) * 1000, 1) for k, v in seen.items()}
    print(f"bob's run, median ms: {medians}; max ms: {worst}")
    print(f"alice's flooders: {accounts}")
    alice_runs = len(listed["items"])
    print(f"alice's stored conversations: {alice_runs} over {flooded_s:.1f} s")

    baseline = statistics.median(seen["baseline"])
    for mode in ("reconnect", "runs"):
        assert statistics.median(seen[mode]) <= 2 * baseline + SLACK_S, medians
        refused = accounts[mode]["seen"].get("429", 0)
        assert refused > 0, accounts[mode]
    # every run alice started is within her bucket: the burst, then the rate
    assert alice_runs <= RUN_BURST + RUNS_PER_S * flooded_s + 1
    admitted = accounts["reconnect"]["seen"].get("101", 0)
    limit = CONNECT_BURST + CONNECTS_PER_S * accounts["reconnect"]["seconds"] + 1
    assert admitted <= limit
