"""Server CPU per act-shaped turn.

A turn is one `chat` in tool mode (`selected_tools: ["calculator"]`): an LLM
call with the tools (the fake answers with a `calculator` call), the tool,
and a second call whose answer is streamed (`answer_tokens` tokens); the
fake LLM answers at once (0 ms), so the time is all the server's. N
sessions run T turns each, one after another, all sessions at once; a
round's figure is the server's CPU time over the round / (N x T). Every
turn's frames and the fake's 2 x N x T requests are checked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from benchmarks.checks import Frame, check_tool_turn, expect_calls
from benchmarks.clients import Session, close_all, open_many, reset_all
from benchmarks.harness import Harness, progress
from benchmarks.meter import Meter
from benchmarks.results import Others, TurnCost
from benchmarks.stats import Summary


async def measure(
    harness: Harness, *, label: str = "turns", env: Mapping[str, str] | None = None
) -> TurnCost:
    """The turns on a server of their own, with the extra variables `env`."""
    sizes = harness.sizes
    count, turns, tokens = (
        sizes.turn_sessions,
        sizes.turns_per_session,
        sizes.answer_tokens,
    )
    chat: Frame = {
        "type": "chat",
        "content": f"What is 6*7? latency_ms=0 tokens={tokens}",
        "selected_tools": ["calculator"],
    }

    async def take_turns(session: Session, how_many: int) -> None:
        for _ in range(how_many):
            run = await session.run(chat)
            check_tool_turn(run.frames, tokens)

    cpu_ms: list[float] = []
    rate: list[float] = []
    fake_ms: list[float] = []
    client_ms: list[float] = []
    async with harness.loopwire(label, env=env) as server:
        url = server.ws_url
        sessions = await open_many(count, lambda: Session.open(url))
        try:
            await asyncio.gather(*(take_turns(s, 1) for s in sessions))  # warm-up
            await reset_all(sessions)
            for number in harness.rounds("turns"):
                async with Meter(harness, server.pid, what="turns round") as meter:
                    await asyncio.gather(*(take_turns(s, turns) for s in sessions))
                await reset_all(sessions)
                reading = meter.reading
                expect_calls(
                    reading.calls_before,
                    reading.calls_after,
                    chat_tool=count * turns,
                    chat=count * turns,
                )
                done = count * turns
                cpu_ms.append(reading.server_cpu_s / done * 1000)
                fake_ms.append(reading.fake_cpu_s / done * 1000)
                client_ms.append(reading.client_cpu_s / done * 1000)
                rate.append(done / reading.wall_s)
                progress(
                    f"{label}: round {number}/{sizes.rounds}: {done} turns in "
                    f"{reading.wall_s:.2f}s, {cpu_ms[-1]:.2f} ms server CPU per turn"
                )
        finally:
            await close_all(sessions)
    return TurnCost(
        sessions=count,
        turns_per_session=turns,
        tokens=tokens,
        cpu_ms=Summary.of(cpu_ms),
        turns_per_s=Summary.of(rate),
        others=Others(Summary.of(fake_ms), Summary.of(client_ms)),
    )


TRACED = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
"""Traces on, sent by OTLP to the discard port, where nothing listens: what
tracing costs the server when its collector is down (its worst case)."""
