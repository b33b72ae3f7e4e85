"""Server CPU per act-shaped turn, and what traces add to it.

A turn is one `chat` in tool mode (`selected_tools: ["calculator"]`): an LLM
call with the tools (the fake answers with a `calculator` call), the tool,
and a second call whose answer is streamed (`answer_tokens` tokens); the
fake LLM answers at once (0 ms), so the time is all the server's. N
sessions run T turns each, one after another, all sessions at once; a
round's figure is the server's CPU time over the round / (N x T). Every
turn's frames and the fake's 2 x N x T requests are checked. The first
round is profiled (`benchmarks/profile.py`).

`tracing` runs the same turns on two servers at once, one with traces off
and one with traces on (`TRACED`), their rounds in turn (off, on, off, …),
so that each pair's ratio is taken on the machine as it was then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import AsyncExitStack

from benchmarks.checks import Frame, check_tool_turn, expect_calls
from benchmarks.clients import Session, close_all, open_many, reset_all
from benchmarks.harness import Harness, Loopwire, progress
from benchmarks.meter import Meter, Reading
from benchmarks.results import Others, TracingCost, TurnCost
from benchmarks.stats import Summary

TRACED = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
"""Traces on, sent by OTLP to the discard port, where nothing listens: what
tracing costs the server when its collector is down (its worst case)."""


class Turns:
    """N sessions on one server taking their turns, a round at a time."""

    def __init__(self, harness: Harness, server: Loopwire) -> None:
        sizes = harness.sizes
        self.harness, self.server = harness, server
        self.count, self.turns = sizes.turn_sessions, sizes.turns_per_session
        self.tokens = sizes.answer_tokens
        self.chat: Frame = {
            "type": "chat",
            "content": f"What is 6*7? latency_ms=0 tokens={self.tokens}",
            "selected_tools": ["calculator"],
        }
        self.sessions: list[Session] = []

    async def open(self) -> None:
        """The sessions, warmed up by a turn each."""
        url = self.server.ws_url
        self.sessions = await open_many(self.count, lambda: Session.open(url))
        await asyncio.gather(*(self._take(s, 1) for s in self.sessions))
        await reset_all(self.sessions)

    async def close(self) -> None:
        await close_all(self.sessions)

    async def round(self, *, sampled: bool = False) -> Reading:
        """One round, metered (and profiled if `sampled`); every frame and
        LLM call checked."""
        pid = self.server.pid
        what = f"act-shaped turns, {self.count:,} sessions"
        profiler = self.harness.profiler
        async with (
            profiler.sampling("turns", what, pid, when=sampled),
            Meter(self.harness, pid, what="turns round") as meter,
        ):
            await asyncio.gather(*(self._take(s, self.turns) for s in self.sessions))
        await reset_all(self.sessions)
        reading = meter.reading
        done = self.done
        expect_calls(
            reading.calls_before, reading.calls_after, chat_tool=done, chat=done
        )
        return reading

    @property
    def done(self) -> int:
        return self.count * self.turns

    async def _take(self, session: Session, how_many: int) -> None:
        for _ in range(how_many):
            run = await session.run(self.chat)
            check_tool_turn(run.frames, self.tokens)


async def measure(harness: Harness) -> TurnCost:
    cpu_ms: list[float] = []
    rate: list[float] = []
    fake_ms: list[float] = []
    client_ms: list[float] = []
    async with harness.loopwire("turns") as server:
        turns = Turns(harness, server)
        try:
            await turns.open()
            for number in harness.rounds("turns"):
                reading, done = await turns.round(sampled=number == 1), turns.done
                cpu_ms.append(reading.server_cpu_s / done * 1000)
                fake_ms.append(reading.fake_cpu_s / done * 1000)
                client_ms.append(reading.client_cpu_s / done * 1000)
                rate.append(done / reading.wall_s)
                progress(
                    f"turns: round {number}/{harness.sizes.rounds}: {done} turns "
                    f"in {reading.wall_s:.2f}s, {cpu_ms[-1]:.2f} ms server CPU per turn"
                )
        finally:
            await turns.close()
    return TurnCost(
        sessions=turns.count,
        turns_per_session=turns.turns,
        tokens=turns.tokens,
        cpu_ms=Summary.of(cpu_ms),
        turns_per_s=Summary.of(rate),
        others=Others(Summary.of(fake_ms), Summary.of(client_ms)),
    )


async def tracing(harness: Harness, env: Mapping[str, str] = TRACED) -> TracingCost:
    """Traces off and on, rounds in turn; the ratio pair by pair."""
    off_ms: list[float] = []
    on_ms: list[float] = []
    async with AsyncExitStack() as stack:
        off = Turns(harness, await stack.enter_async_context(harness.loopwire("turns")))
        traced = harness.loopwire("turns-traced", env=env)
        on = Turns(harness, await stack.enter_async_context(traced))
        for turns in (off, on):
            stack.push_async_callback(turns.close)
            await turns.open()
        for number in harness.rounds("tracing"):
            for turns, figures in ((off, off_ms), (on, on_ms)):
                reading = await turns.round()
                figures.append(reading.server_cpu_s / turns.done * 1000)
            progress(
                f"tracing: round {number}/{harness.sizes.rounds}: {off_ms[-1]:.2f} ms "
                f"off, {on_ms[-1]:.2f} ms on, per turn"
            )
    ratios = [on / off for on, off in zip(on_ms, off_ms, strict=True)]
    return TracingCost(
        off_ms=Summary.of(off_ms), on_ms=Summary.of(on_ms), ratio=Summary.of(ratios)
    )
