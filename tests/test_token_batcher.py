"""Streamed text is batched into `token_stream` frames: the first piece at
once, the rest at most one frame per tick, nothing held past its tick or past
the end of the stream (a cancelled one included)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from backend.agent.config import LoopConfig
from backend.agent.loop import AgentContext
from backend.agent.model_calls import ModelCalls
from backend.agent.state import RunRequest, RunState
from backend.agent.token_batcher import TokenBatcher
from backend.history import History
from backend.llm.base import LLMRequest, Message, StreamEvent, TextDelta
from backend.prompts import PromptProvider
from backend.protocol import RunEvent, TokenStream


class Frames:
    """What the batcher sent, each with the loop's time, and an event per frame."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bool, float]] = []
        self.arrived = asyncio.Event()

    def __call__(self, frame: TokenStream) -> None:
        assert not frame.is_last
        loop = asyncio.get_running_loop()
        self.sent.append((frame.token, frame.is_first, loop.time()))
        self.arrived.set()

    @property
    def tokens(self) -> list[tuple[str, bool]]:
        return [(token, first) for token, first, _ in self.sent]

    async def next(self) -> None:
        self.arrived.clear()
        await self.arrived.wait()


async def test_pieces_handed_over_together_are_one_frame_after_the_first() -> None:
    """The first piece goes out at once; the pieces after it wait and go out joined."""
    frames = Frames()
    batcher = TokenBatcher(frames, tick_s=60.0)
    for piece in ["Hel", "lo", ", ", "", "world"]:
        batcher.add(piece)
    assert frames.tokens == [("Hel", True)]  # the rest waits for its tick
    batcher.close()
    assert frames.tokens == [("Hel", True), ("lo, world", False)]


async def test_the_timer_sends_what_came_within_the_tick() -> None:
    """The timer sends what came within each tick on its own, a tick or more apart."""
    tick_s = 0.02
    frames = Frames()
    batcher = TokenBatcher(frames, tick_s=tick_s)
    batcher.add("a")
    batcher.add("b")
    batcher.add("c")
    await frames.next()  # the timer's frame, with nobody calling the batcher
    assert frames.tokens == [("a", True), ("bc", False)]
    assert frames.sent[1][2] - frames.sent[0][2] >= tick_s
    batcher.add("d")
    await frames.next()
    assert frames.sent[2][2] - frames.sent[1][2] >= tick_s
    batcher.close()
    assert frames.tokens == [("a", True), ("bc", False), ("d", False)]


async def test_close_sends_the_rest_at_once() -> None:
    """Closing sends the held text at once, and closing twice sends nothing more."""
    frames = Frames()
    batcher = TokenBatcher(frames, tick_s=60.0)
    batcher.add("a")
    batcher.add("b")
    batcher.close()
    batcher.close()
    assert frames.tokens == [("a", True), ("b", False)]


async def test_tick_zero_is_a_frame_per_piece() -> None:
    """With a zero tick every piece goes out at once as its own frame."""
    frames = Frames()
    batcher = TokenBatcher(frames, tick_s=0)
    for piece in ["a", "b", "c"]:
        batcher.add(piece)
    assert frames.tokens == [("a", True), ("b", False), ("c", False)]


class TwoPiecesThenSilence:
    """Streams two pieces, then waits for a reply that never comes."""

    model = "silent"
    provider = "test"

    def __init__(self) -> None:
        self.waiting = asyncio.Event()

    async def complete(self, request: LLMRequest) -> object:
        raise NotImplementedError

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        yield TextDelta(text="Half ")
        yield TextDelta(text="an answer")
        self.waiting.set()
        await asyncio.Event().wait()

    async def aclose(self) -> None:
        pass


async def test_a_cancelled_stream_shows_what_it_took_before_it_ends() -> None:
    """A stop cancels the stream with text still waiting for its tick: it is
    sent before the cancellation goes on, so the frames hold all of
    the run state's streamed text (what a stopped run keeps as its partial answer)."""
    llm = TwoPiecesThenSilence()
    calls = ModelCalls(llm, PromptProvider(), LoopConfig(token_batch_s=60.0))  # type: ignore[arg-type]
    events: list[RunEvent] = []
    state = RunState(
        run_id="r1",
        session_id="s1",
        strategy="llm_only",
        request=RunRequest(content="hi", agent=False),
        max_steps=1,
        max_steps_cap=1,
    )
    ctx = AgentContext(state, History([Message.user("hi")]), events.append)
    request = LLMRequest(messages=(Message.user("hi"),))
    async with asyncio.TaskGroup() as tasks:
        streaming = tasks.create_task(calls.stream(ctx, request))
        await llm.waiting.wait()
        assert [e.token for e in events if isinstance(e, TokenStream)] == ["Half "]
        streaming.cancel()
    with pytest.raises(asyncio.CancelledError):
        streaming.result()
    assert [(e.token, e.is_first, e.is_last) for e in events] == [  # type: ignore[union-attr]
        ("Half ", True, False),
        ("an answer", False, False),
    ]
    assert state.take_streamed() == "Half an answer"
