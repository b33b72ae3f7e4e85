"""A flood is throttled and closed, and the neighbours barely notice.

A real server process allows each socket `RATE` frames a second in bursts
of `BURST`. A flooding client in another process (`tests/flood_client.py`)
sends far faster on one socket: it gets the burst answered, a
`rate_limited` error, then a 1008 close within `MAX_SOCKET_S`; it
reconnects at once and floods again, for as long as the measurement lasts. A well-behaved neighbour on
its own socket does `TRIPS` round trips (a probe and its answer,
`tests/hostile.py`) at a steady `PACE_S`, under the limit: alone (the
baseline), during a flood at 50 times the rate limit, and during one as
fast as the flooder can send.

At 50 times the limit the neighbour's p99 stays within max(twice the
baseline p99, baseline p99 + 5 ms): the 5 ms floor because a baseline p99
of 1-3 ms on a shared 2-CPU machine doubles on scheduler noise alone. At
full speed (20,000-36,000 frames a second) it does not: uvicorn parses
every frame of each read before the endpoint can drop it, and every
reconnect opens a session, so the server's CPU is the limit; that p99
(measured 7-38 ms) is only held to `FULL_SPEED_P99_S`. The figures are in
docs/security.md.
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
TRIPS = 400
PACE_S = 0.02
"""One round trip every 20 ms: 50 a second, half the allowed rate."""
FLOODING = "too many messages; slow down and reconnect"
FULL_SPEED_P99_S = 0.1
MAX_SOCKET_S = 1.0
"""How long a flooding socket may last (measured: under 0.2 s; before the
refusals had their own bucket, a flood at 20-50 times the rate could go on
for many seconds, a token now and then resetting the count)."""


async def paced_trips(client: Client, name: str) -> list[float]:
    """`TRIPS` round trips, one every `PACE_S`: a steady client under the
    limit (the pause paces the load; nothing waits on it)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    latencies = []
    for i in range(TRIPS):
        latencies.append(await round_trip(client, f"{name}{i}"))
        await asyncio.sleep(max(0.0, start + (i + 1) * PACE_S - loop.time()))
    return latencies


def figures(latencies: list[float]) -> dict[str, float]:
    quantiles = {f"p{q}_ms": percentile(latencies, q) for q in (50, 90, 99)}
    return {
        k: round(v * 1000, 2)
        for k, v in (quantiles | {"max_ms": max(latencies)}).items()
    }


async def during_flood(
    server: ServerProcess, neighbour: Client, name: str, per_s: int | None
) -> tuple[list[float], dict[str, Any]]:
    """The neighbour's round trips while a flooder runs (`per_s` None: flat
    out); the flooder's own figures."""
    rate = [] if per_s is None else [str(per_s)]
    flooder = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.flood_client", server.ws_url, *rate),
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert flooder.stdout is not None
    try:
        async with asyncio.timeout(30):  # the first socket is closed by then
            assert await flooder.stdout.readline() == b"flooding\n"
        latencies = await paced_trips(neighbour, name)
        out, _ = await flooder.communicate(b"")
    finally:
        if flooder.returncode is None:
            flooder.kill()
            await flooder.wait()
    return latencies, json.loads(out)


def check_flooder(flood: dict[str, Any]) -> dict[str, Any]:
    """Every socket had its burst served, was told, and was closed."""
    sockets = flood["sockets"]
    for socket in sockets:
        labels = socket["labels"]
        assert (socket["code"], socket["reason"]) == (1008, FLOODING), socket
        assert set(labels) <= {"session_ready", "no_active_run", "rate_limited"}
        assert labels.get("rate_limited", 0) >= 1, socket
        answered = labels.get("no_active_run", 0)
        assert BURST <= answered <= BURST + RATE * socket["seconds"] + 1, socket
    sent = sum(s["sent"] for s in sockets)
    return {
        "sockets": len(sockets),
        "frames_per_s": round(sent / flood["seconds"]),
        "longest_socket_s": round(max(s["seconds"] for s in sockets), 3),
    }


async def test_a_flood_is_closed_and_the_neighbour_keeps_its_latency() -> None:
    async with server_process(
        "sqlite://", ws_messages_per_s=RATE, ws_message_burst=BURST
    ) as server:
        neighbour = await open_client(server.ws_url)
        for i in range(20):  # warm up both ends
            await round_trip(neighbour, f"warm{i}")
        baseline = await paced_trips(neighbour, "base")
        at_50x, flood_50x = await during_flood(server, neighbour, "50x", 50 * RATE)
        flat_out, flood_max = await during_flood(server, neighbour, "max", None)
        await neighbour.connection.close()
        assert server.running

    report = {
        "baseline": figures(baseline),
        "flood_50x": figures(at_50x) | check_flooder(flood_50x),
        "flood_flat_out": figures(flat_out) | check_flooder(flood_max),
    }
    print(json.dumps(report))
    for flood in ("flood_50x", "flood_flat_out"):
        assert report[flood]["longest_socket_s"] < MAX_SOCKET_S, report
    assert report["flood_50x"]["frames_per_s"] > 40 * RATE
    assert report["flood_flat_out"]["frames_per_s"] > 100 * RATE
    base_p99 = percentile(baseline, 99)
    assert percentile(at_50x, 99) <= max(2 * base_p99, base_p99 + 0.005), report
    assert percentile(flat_out, 99) <= FULL_SPEED_P99_S, report
