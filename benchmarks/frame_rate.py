"""Frames per second to many clients, and CPU per frame, against the echo.

loopwire, with token batching off (`LOOPWIRE_TOKEN_BATCH_MS=0`, so a frame
per token and the comparison is frame for frame; `token_pace` measures
the default): N sessions each send a plain `chat` at once; the fake LLM
streams K tokens at once (one SSE chunk each), which loopwire relays as
K + 1 `token_stream` frames (the last one closes the stream). A round's
figures are the `token_stream` frames received / its wall time, and the
server's CPU over the round / those frames (so the LLM request's own cost
is spread over the frames).

The echo: N sockets each ask for K + 1 frames of the size loopwire's token
frames had, all at once; the same two figures. Every frame is JSON-decoded
by the client in both cases. loopwire's first round is profiled
(`benchmarks/profile.py`).
"""

from __future__ import annotations

import asyncio
import statistics

from benchmarks.checks import Frame, check_stream, expect_calls, kind
from benchmarks.clients import (
    EchoSocket,
    Session,
    close_all,
    open_many,
    reset_all,
    run_all,
)
from benchmarks.harness import TOKEN_BATCHING_OFF, Harness, progress
from benchmarks.meter import Meter
from benchmarks.results import FrameRate, Others
from benchmarks.stats import Summary


async def measure(harness: Harness) -> FrameRate:
    sizes = harness.sizes
    count, tokens = sizes.frame_sessions, sizes.frame_tokens
    frames_per_run = tokens + 1
    chat: Frame = {"type": "chat", "content": f"Tell me. tokens={tokens} latency_ms=0"}
    fps: list[float] = []
    cpu_us: list[float] = []
    fake_us: list[float] = []
    client_us: list[float] = []
    token_sizes: list[int] = []
    async with harness.loopwire("frames", env=TOKEN_BATCHING_OFF) as server:
        url = server.ws_url
        sessions = await open_many(count, lambda: Session.open(url))
        try:
            for run in await run_all(sessions, chat):
                check_stream(run.frames, tokens)  # warm-up
            await reset_all(sessions)
            for number in harness.rounds("frames"):
                async with (
                    harness.profiler.sampling(
                        "frames", "streamed frames", server.pid, when=number == 1
                    ),
                    Meter(harness, server.pid, what="frames round") as meter,
                ):
                    runs = await run_all(sessions, chat)
                await reset_all(sessions)
                for run in runs:
                    check_stream(run.frames, tokens)
                    token_sizes.extend(
                        size
                        for frame, size in zip(run.frames, run.sizes, strict=True)
                        if kind(frame) == "token_stream"
                    )
                reading = meter.reading
                expect_calls(reading.calls_before, reading.calls_after, chat=count)
                frames = count * frames_per_run
                fps.append(frames / reading.wall_s)
                cpu_us.append(reading.server_cpu_s / frames * 1e6)
                fake_us.append(reading.fake_cpu_s / frames * 1e6)
                client_us.append(reading.client_cpu_s / frames * 1e6)
                progress(
                    f"frames: round {number}/{sizes.rounds}: {fps[-1]:,.0f} frames/s, "
                    f"{cpu_us[-1]:.1f} µs server CPU per frame"
                )
        finally:
            await close_all(sessions)
    frame_bytes = round(statistics.mean(token_sizes))
    echo_fps, echo_us, echo_client_us = await _echo(
        harness, count, frames_per_run, frame_bytes
    )
    return FrameRate(
        sessions=count,
        tokens=tokens,
        frame_bytes=frame_bytes,
        fps=Summary.of(fps),
        cpu_us=Summary.of(cpu_us),
        echo_fps=Summary.of(echo_fps),
        echo_cpu_us=Summary.of(echo_us),
        echo_client_us=Summary.of(echo_client_us),
        others=Others(Summary.of(fake_us), Summary.of(client_us)),
    )


async def _echo(
    harness: Harness, count: int, frames: int, size: int
) -> tuple[list[float], list[float], list[float]]:
    """The echo's frames/s, and its and the client's CPU µs per frame."""
    url = harness.echo_url
    sockets = await open_many(count, lambda: EchoSocket.open(url))
    fps: list[float] = []
    cpu_us: list[float] = []
    client_us: list[float] = []
    try:
        await asyncio.gather(*(s.burst(frames, size) for s in sockets))  # warm-up
        for number in harness.rounds("frames: echo"):
            pid = harness.echo.pid
            async with Meter(harness, pid, what="echo frames round") as meter:
                await asyncio.gather(*(s.burst(frames, size) for s in sockets))
            reading = meter.reading
            total = count * frames
            fps.append(total / reading.wall_s)
            cpu_us.append(reading.server_cpu_s / total * 1e6)
            client_us.append(reading.client_cpu_s / total * 1e6)
            progress(
                f"frames: echo, round {number}/{harness.sizes.rounds}: "
                f"{fps[-1]:,.0f} frames/s, {cpu_us[-1]:.1f} µs CPU per frame"
            )
    finally:
        await close_all(sockets)
    return fps, cpu_us, client_us
