"""Streamed tokens at a model's pace: what token batching saves the server.

N sessions each send a plain `chat` at once; the fake LLM streams K tokens
D ms apart (`token_delay_ms`, a fast model's pace), so the server gets them
one network read at a time, as from a real model (`frame_rate` has them
all at once). The same on two loopwires: one with token batching at its
default (`LOOPWIRE_TOKEN_BATCH_MS` not set: the first piece at once, then
at most a frame per tick with what came meanwhile) and one with it off
(`0`: a frame per token). A round's figures: the `token_stream` frames per
answer (the median over its answers, the closing frame included), the
server's CPU over the round / the N x K tokens streamed, and its wall time.

Every answer is checked (`check_stream`): its tokens joined are the answer,
in 2 to K + 1 frames (exactly K + 1 with batching off), the first marked
first and only the closing, empty one last; then `chat_response` and
`response_complete`; and the fake LLM got one request per session.
The first round with batching on is profiled (`benchmarks/profile.py`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from backend.settings import Settings
from benchmarks.checks import Frame, check_stream, expect_calls
from benchmarks.clients import Session, close_all, open_many, reset_all, run_all
from benchmarks.harness import TOKEN_BATCHING_OFF, Harness, progress
from benchmarks.meter import Meter
from benchmarks.results import PacedStream, TokenPace
from benchmarks.stats import Summary

BATCH_SETTING = "LOOPWIRE_TOKEN_BATCH_MS"
DEFAULT_BATCH_MS = float(Settings.model_fields["token_batch_ms"].default)
"""The server's own default, which the batched run leaves in place."""


async def measure(harness: Harness) -> TokenPace:
    sizes = harness.sizes
    batched = await _paced(harness, {})
    unbatched = await _paced(harness, TOKEN_BATCHING_OFF)
    return TokenPace(
        sessions=sizes.frame_sessions,
        tokens=sizes.frame_tokens,
        token_delay_ms=sizes.token_delay_ms,
        batched=batched,
        unbatched=unbatched,
    )


def batch_label(batch_ms: float) -> str:
    """How a run's batching reads in progress lines and the report."""
    return "off" if batch_ms == 0 else f"on ({batch_ms:g} ms)"


async def _paced(harness: Harness, env: Mapping[str, str]) -> PacedStream:
    """The rounds on one loopwire, started with the extra settings `env`."""
    sizes = harness.sizes
    count, tokens = sizes.frame_sessions, sizes.frame_tokens
    batch_ms = float(env.get(BATCH_SETTING, DEFAULT_BATCH_MS))
    exact = batch_ms == 0
    what = f"pace, batching {batch_label(batch_ms)}"
    chat: Frame = {
        "type": "chat",
        "content": (
            f"Tell me. tokens={tokens} token_delay_ms={sizes.token_delay_ms:g} "
            "latency_ms=0"
        ),
    }
    frames: list[float] = []
    cpu_us: list[float] = []
    wall_s: list[float] = []
    async with harness.loopwire("pace", env=env) as server:
        url = server.ws_url
        sessions = await open_many(count, lambda: Session.open(url))
        try:
            for run in await run_all(sessions, chat):
                check_stream(run.frames, tokens, exact=exact)  # warm-up
            await reset_all(sessions)
            for number in harness.rounds(what):
                async with (
                    harness.profiler.sampling(
                        "pace", what, server.pid, when=number == 1 and not exact
                    ),
                    Meter(harness, server.pid, what=f"{what} round") as meter,
                ):
                    runs = await run_all(sessions, chat)
                await reset_all(sessions)
                counts = [check_stream(r.frames, tokens, exact=exact) for r in runs]
                reading = meter.reading
                expect_calls(reading.calls_before, reading.calls_after, chat=count)
                frames.append(statistics.median(counts))
                cpu_us.append(reading.server_cpu_s / (count * tokens) * 1e6)
                wall_s.append(reading.wall_s)
                progress(
                    f"{what}: round {number}/{sizes.rounds}: {frames[-1]:g} frames "
                    f"per answer, {cpu_us[-1]:.1f} µs server CPU per token, "
                    f"{wall_s[-1]:.2f}s"
                )
        finally:
            await close_all(sessions)
    return PacedStream(
        batch_ms=batch_ms,
        frames_per_answer=Summary.of(frames),
        cpu_us_per_token=Summary.of(cpu_us),
        wall_s=Summary.of(wall_s),
    )
