"""A flood is throttled and closed, and the neighbours are still served.

A real server process allows each socket `RATE` frames a second in bursts
of `BURST`. A flooding client in another process (`tests/flood_client.py`)
sends far faster on one socket: it gets the burst answered, a
`rate_limited` error, then a 1008 close within `MAX_SOCKET_S`; it
reconnects at once and floods again, for as long as it is told to. A
well-behaved neighbour on its own socket does round trips (a probe and its
answer, `tests/hostile.py`) at a steady `PACE_S`, under the limit, in
windows of `WINDOW` trips: alone (the baseline), during a flood at 50
times the rate limit, and during one as fast as the flooder can send,
`ROUNDS` times in turn, so that whatever else loads the machine falls on
all three alike.

What the test holds: every round trip of the neighbour is answered, in
order, during both floods; each flooding socket is refused and closed
within `MAX_SOCKET_S`; the server still runs. The neighbour's latencies are
printed, not asserted (a timing bound in a test fails when the machine is
busy, not when the server is wrong): measured, its median stayed within
max(twice the baseline's, baseline + 5 ms), and its p99 was 3-9 ms during
the 50-times flood and 15-46 ms during the flat-out one (docs/security.md).
The flood reconnects, and
nothing limits connections: each reconnect opens a session (kept for the
grace period) whose errors are stored, uvicorn parses every frame of a
read before the endpoint can drop it, and the heap those sessions grow
makes full garbage collections of ~100 ms (the `max_ms` figures).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.hostile import open_client, percentile, round_trip
from tests.server_process import ServerProcess, server_process
from tests.ws_client import Client

pytestmark = pytest.mark.timeout(150)

ROOT = Path(__file__).resolve().parent.parent
RATE = 100
BURST = 100
ROUNDS = 2
WINDOW = 100
PACE_S = 0.02
"""One round trip every 20 ms: 50 a second, half the allowed rate."""
FLOODING = "too many messages; slow down and reconnect"
MAX_SOCKET_S = 2.0
"""How long a flooding socket may last (measured: under 0.4 s alone, 0.73 s
with the rest of the suite running beside it on two workers; before the
refusals had their own bucket, a flood at 20-50 times the rate could go on
for many seconds, a token now and then resetting the count)."""


class Flooder:
    """`tests/flood_client.py` in its own process, flooding on demand."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self.stdin = process.stdin
        self.stdout = process.stdout

    @classmethod
    async def start(cls, url: str, per_s: int | None) -> Flooder:
        rate = [] if per_s is None else [str(per_s)]
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "tests.flood_client", url, *rate),
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def tell(self, command: bytes, answer: bytes) -> None:
        self.stdin.write(command)
        async with asyncio.timeout(30):
            assert await self.stdout.readline() == answer

    async def finish(self) -> dict[str, Any]:
        self.stdin.close()
        out = await self.stdout.read()
        await self.process.wait()
        return dict(json.loads(out))

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


async def paced_trips(client: Client, name: str, count: int) -> list[float]:
    """`count` round trips, one every `PACE_S`: a steady client under the
    limit (the pause paces the load; nothing waits on it)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    latencies = []
    for i in range(count):
        latencies.append(await round_trip(client, f"{name}{i}"))
        await asyncio.sleep(max(0.0, start + (i + 1) * PACE_S - loop.time()))
    return latencies


def figures(latencies: list[float]) -> dict[str, float]:
    quantiles = {f"p{q}_ms": percentile(latencies, q) for q in (50, 90, 99)}
    return {
        k: round(v * 1000, 2)
        for k, v in (quantiles | {"max_ms": max(latencies)}).items()
    }


def check_flooder(flood: dict[str, Any]) -> dict[str, Any]:
    """Every socket had its burst served, was told, and was closed (but
    those still flooding when told to stop)."""
    closed = [s for s in flood["sockets"] if not s["stopped"]]
    assert len(closed) >= len(flood["sockets"]) - ROUNDS
    for socket in closed:
        labels = socket["labels"]
        assert (socket["code"], socket["reason"]) == (1008, FLOODING), socket
        assert set(labels) <= {"session_ready", "no_active_run", "rate_limited"}
        assert labels.get("rate_limited", 0) >= 1, socket
        answered = labels.get("no_active_run", 0)
        assert BURST <= answered <= BURST + RATE * socket["seconds"] + 1, socket
    sent = sum(s["sent"] for s in flood["sockets"])
    return {
        "sockets": len(closed),
        "frames_per_s": round(sent / flood["seconds"]),
        "longest_socket_s": round(max(s["seconds"] for s in closed), 3),
    }


Latencies = dict[str, list[float]]


async def measure(server: ServerProcess) -> tuple[Latencies, dict[str, Any]]:
    """The neighbour's round trips: alone, and during each flood, in turn;
    and each flooder's account."""
    neighbour = await open_client(server.ws_url)
    for i in range(BURST // 2):  # warm up both ends (within the burst)
        await round_trip(neighbour, f"warm{i}")
    floods = {
        "flood_50x": await Flooder.start(server.ws_url, 50 * RATE),
        "flood_flat_out": await Flooder.start(server.ws_url, None),
    }
    seen: Latencies = {"baseline": [], **{name: [] for name in floods}}
    try:
        for round_ in range(ROUNDS):
            seen["baseline"] += await paced_trips(neighbour, f"b{round_}-", WINDOW)
            for name, flooder in floods.items():
                await flooder.tell(b"go\n", b"flooding\n")
                seen[name] += await paced_trips(neighbour, f"{name}{round_}-", WINDOW)
                await flooder.tell(b"stop\n", b"stopped\n")
        accounts = {name: await flooder.finish() for name, flooder in floods.items()}
    finally:
        for flooder in floods.values():
            flooder.kill()
    await neighbour.connection.close()
    return seen, accounts


async def test_a_flood_is_closed_and_the_neighbour_is_still_served() -> None:
    """Flooding sockets close in time while every neighbour round trip is answered."""
    async with server_process(
        "sqlite://", ws_messages_per_s=RATE, ws_message_burst=BURST
    ) as server:
        seen, accounts = await measure(server)
        assert server.running

    baseline = seen["baseline"]
    report: dict[str, Any] = {"baseline": figures(baseline)}
    for name in ("flood_50x", "flood_flat_out"):
        report[name] = figures(seen[name]) | check_flooder(accounts[name])
    print(json.dumps(report))

    for name in ("flood_50x", "flood_flat_out"):
        assert report[name]["longest_socket_s"] < MAX_SOCKET_S, report
    # the floods were floods (a loaded machine sends fewer than asked for)
    assert report["flood_50x"]["frames_per_s"] > 10 * RATE
    assert report["flood_flat_out"]["frames_per_s"] > 20 * RATE
    for name in seen:  # every trip of the neighbour was answered
        assert len(seen[name]) == ROUNDS * WINDOW, report
