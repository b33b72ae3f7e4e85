"""Strict agent runs at 10, 100 and 1,000 sessions, against the echo.

Each session runs one `react` agent run of S steps (reason, act with the
`calculator`, observe: 3 LLM calls a step), all sessions at once, the fake
LLM taking L ms before each reply. The ideal is 3 x S x L (a server that
costs nothing); a round's figure is its wall time (first `chat` sent → last
`response_complete`) / the ideal, and the server's CPU per LLM call. Every
run is checked frame by frame, and the fake must have seen exactly S x 3 x
N calls (no final-answer call, no retry).

The echo does the same at the same concurrency: each socket makes 3 x S
round trips in a row, the echo waiting L ms before each answer: the floor a
transport that waits on something upstream can reach on this machine.

The first round at the highest concurrency is profiled
(`benchmarks/profile.py`).
"""

from __future__ import annotations

import asyncio

from benchmarks.checks import Frame, check_agent_run, expect_calls
from benchmarks.clients import (
    EchoSocket,
    Session,
    close_all,
    open_many,
    reset_all,
    run_all,
)
from benchmarks.harness import Harness, Loopwire, progress
from benchmarks.meter import Meter, Reading
from benchmarks.results import Others, RunScale
from benchmarks.stats import Summary

WARM_UP_SESSIONS = 200
"""At most this many sessions warm a fresh server up (one quick run each)."""


def agent_chat(steps: int, latency_ms: float) -> Frame:
    return {
        "type": "chat",
        "content": f"Add the numbers. steps={steps} latency_ms={latency_ms:g}",
        "agent_mode": True,
        "agent_max_steps": steps,
    }


async def measure(harness: Harness) -> list[RunScale]:
    return [await measure_at(harness, count) for count in harness.sizes.run_sessions]


async def measure_at(harness: Harness, count: int) -> RunScale:
    sizes = harness.sizes
    steps, latency = sizes.run_steps, sizes.llm_latency_ms
    ideal_s = 3 * steps * latency / 1000
    wall: list[float] = []
    each: list[float] = []
    cpu_ms: list[float] = []
    fake_ms: list[float] = []
    client_ms: list[float] = []
    profiled = count == max(sizes.run_sessions)
    async with harness.loopwire(f"runs-{count}") as server:
        url = server.ws_url
        sessions = await open_many(count, lambda: Session.open(url))
        try:
            await _warm_up(sessions[:WARM_UP_SESSIONS])
            for number in harness.rounds(f"runs: {count} sessions"):
                sampled = profiled and number == 1
                reading, seconds = await _round(harness, server, sessions, sampled)
                each += [run_s / ideal_s for run_s in seconds]
                calls = 3 * count * steps
                wall.append(reading.wall_s / ideal_s)
                cpu_ms.append(reading.server_cpu_s / calls * 1000)
                fake_ms.append(reading.fake_cpu_s / calls * 1000)
                client_ms.append(reading.client_cpu_s / calls * 1000)
                progress(
                    f"runs: {count} sessions, round {number}/{sizes.rounds}: "
                    f"{reading.wall_s:.2f}s = {wall[-1]:.2f}x ideal, "
                    f"{cpu_ms[-1]:.3f} ms server CPU per LLM call"
                )
        finally:
            await close_all(sessions)
    echo_wall, echo_cpu = await _echo_at(harness, count, 3 * steps, latency)
    return RunScale(
        sessions=count,
        steps=steps,
        latency_ms=latency,
        wall_ratio=Summary.of(wall),
        run_ratio=Summary.of(each),
        cpu_ms_per_call=Summary.of(cpu_ms),
        echo_wall_ratio=Summary.of(echo_wall),
        echo_cpu_ms_per_trip=Summary.of(echo_cpu),
        others=Others(Summary.of(fake_ms), Summary.of(client_ms)),
    )


async def _round(
    harness: Harness, server: Loopwire, sessions: list[Session], sampled: bool
) -> tuple[Reading, list[float]]:
    """One round of runs, metered (profiled if `sampled`), every run and the
    fake's calls checked; its reading and each run's own seconds."""
    sizes = harness.sizes
    steps, count = sizes.run_steps, len(sessions)
    chat = agent_chat(steps, sizes.llm_latency_ms)
    what = f"agent runs, {count:,} sessions"
    async with (
        harness.profiler.sampling("runs", what, server.pid, when=sampled),
        Meter(harness, server.pid, what=f"{count} runs") as meter,
    ):
        runs = await run_all(sessions, chat)
    for run in runs:
        check_agent_run(run.frames, steps)
    reading = meter.reading
    calls = count * steps
    expect_calls(
        reading.calls_before,
        reading.calls_after,
        reason=calls,
        act=calls,
        observe=calls,
    )
    await reset_all(sessions)
    return reading, [run.seconds for run in runs]


async def _warm_up(sessions: list[Session]) -> None:
    """One quick run each: the server's connections and caches made."""
    runs = await asyncio.gather(*(s.run(agent_chat(1, 0)) for s in sessions))
    for run in runs:
        check_agent_run(run.frames, 1)
    await reset_all(sessions)


async def _echo_at(
    harness: Harness, count: int, trips: int, latency_ms: float
) -> tuple[list[float], list[float]]:
    """The echo's wall / ideal and CPU ms per round trip, one sample per round."""
    ideal_s = trips * latency_ms / 1000
    url = harness.echo_url
    sockets = await open_many(count, lambda: EchoSocket.open(url))

    async def trip_in_turn(socket: EchoSocket, delay_ms: float) -> None:
        for _ in range(trips):
            await socket.round_trip(delay_ms)

    wall: list[float] = []
    cpu_ms: list[float] = []
    try:
        await asyncio.gather(*(s.round_trip() for s in sockets))  # warm-up
        for number in harness.rounds(f"runs: echo, {count} sockets"):
            pid = harness.echo.pid
            async with Meter(harness, pid, what=f"{count} echo sockets") as meter:
                await asyncio.gather(*(trip_in_turn(s, latency_ms) for s in sockets))
            reading = meter.reading
            wall.append(reading.wall_s / ideal_s)
            cpu_ms.append(reading.server_cpu_s / (count * trips) * 1000)
            progress(
                f"runs: echo, {count} sockets, round {number}/{harness.sizes.rounds}: "
                f"{wall[-1]:.2f}x ideal, {cpu_ms[-1]:.3f} ms CPU per round trip"
            )
    finally:
        await close_all(sockets)
    return wall, cpu_ms
