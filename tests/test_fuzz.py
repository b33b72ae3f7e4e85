"""Hypothesis fuzzes a live server: every hostile frame is answered.

A real server process (`python -m backend serve`, the offline model,
in-memory SQLite, `max_message_bytes` 256 KiB so that JSON nested 100,000
deep reaches the parser) takes 1,500 generated frames
(`tests/fuzz_frames.py`) over real WebSockets, in batches of 30 on one
connection: wrong types, valid-looking frames with wrong field types or
unknown fields (thousands of them), JSON nested 100,000 deep, huge numbers
and strings (up to the message limit and past the transport's 1 MiB),
truncated JSON, duplicate keys, random text and bytes, binary frames and
text frames that are not UTF-8.

After each frame a probe (`tests/hostile.py`) is sent; the frames before the
probe's answer are the frame's answer. Nothing may go unanswered: an invalid
frame gets exactly one `invalid_message` error, any other an error, a
`session_reset` or a run (stopped at once, then settled); the only closes
are 1007 (not UTF-8) and 1009 (over the transport's limit), after which the
next frame reconnects. Every error is short (it never echoes the input).
Meanwhile a neighbour on another socket does a round trip alongside every
fifth frame and a chat after every batch, and all succeed. At the end the
process is alive and logged no error but uvicorn's one line per 1007.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed

from tests.fuzz_frames import MAX_MESSAGE_BYTES, Fuzz, fuzz_frames
from tests.hostile import (
    STOP,
    loop_thread,
    open_client,
    probe,
    round_trip,
    until_probe,
)
from tests.server_process import ServerProcess
from tests.ws_client import Client, Frame, label

pytestmark = [
    pytest.mark.timeout(240),
    # a failing batch is hundreds of KB: let its real error through, not
    # Hypothesis' warning about the size of its repr
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),
]

BATCH = 30
BATCHES = 50
"""100 batches of 30: 3,000 frames."""
NEIGHBOUR_EVERY = 5
MAX_ERROR_CHARS = 1_000
"""No error message may be longer: errors quote the client only in previews."""
UTF8_LOG = "Invalid UTF-8 sequence received from client."


@dataclass
class Tally:
    frames: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    neighbour_trips: int = 0
    neighbour_chats: int = 0
    longest_error: int = 0


def runs_in(frames: list[Frame]) -> bool:
    return any(f.get("run_id") is not None for f in frames)


class Fuzzer:
    """One batch's connection, reopened after a close."""

    def __init__(self, url: str, tally: Tally) -> None:
        self.url = url
        self.tally = tally
        self.client: Client | None = None

    async def open(self) -> Client:
        if self.client is None:
            self.client = await open_client(self.url)
        return self.client

    async def close(self) -> None:
        if self.client is not None:
            await self.client.connection.close()
            self.client = None

    async def exchange(self, item: Fuzz, tag: int) -> str:
        """Send `item`, then a probe; what it got: `close:CODE` or its answer."""
        client = await self.open()
        try:
            await client.connection.send(item.data, text=item.text)
            await client.send_raw(probe(tag))
            before = await until_probe(client, tag)
            if before and not runs_in(before):
                return self.answer(item, before)
            return await self.settle(client, item, before, tag)
        except ConnectionClosed as closed:
            self.client = None
            code = closed.rcvd.code if closed.rcvd else None
            return f"close:{code}"

    async def settle(
        self, client: Client, item: Fuzz, before: list[Frame], tag: int
    ) -> str:
        """No answer yet, or a run: stop whatever runs, and see."""
        await client.send_raw(STOP)
        await client.send_raw(probe(f"{tag}-settled"))
        after = await until_probe(client, f"{tag}-settled")
        frames = before + after
        if not runs_in(frames) and "error:no_active_run" in labels_of(after):
            assert labels_of(frames) == ["error:no_active_run"], (item, frames)
            return "silent drop"  # no answer, and no run either
        # a run: the stop was accepted (no error), or it had ended already
        if "response_complete" not in labels_of(frames):
            frames += await client.until_label("response_complete")
        assert item.expect == "answered", (item, labels_of(frames))
        return "run"

    def answer(self, item: Fuzz, frames: list[Frame]) -> str:
        for frame in frames:
            assert frame["run_id"] is None, (item, frame)
            if frame["type"] == "error":
                self.tally.longest_error = max(
                    self.tally.longest_error, len(frame["message"])
                )
                assert len(frame["message"]) <= MAX_ERROR_CHARS, (
                    item,
                    frame["message"][:300],
                )
        if item.expect == "invalid":
            assert labels_of(frames) == ["error:invalid_message"], (item, frames)
        return " ".join(labels_of(frames))


def labels_of(frames: list[Frame]) -> list[str]:
    return [label(f) for f in frames]


class Neighbour:
    """Another session, on its own socket, used throughout."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.trips = 0

    async def round_trip(self) -> None:
        self.trips += 1
        await round_trip(self.client, f"n{self.trips}")

    async def chat(self) -> None:
        frames = await self.client.chat("what is 6*7?")
        assert [f["type"] for f in frames][-2:] == [
            "chat_response",
            "response_complete",
        ]


async def fuzz_batch(
    url: str, items: list[Fuzz], neighbour: Neighbour, tally: Tally
) -> None:
    fuzzer = Fuzzer(url, tally)
    try:
        for item in items:
            tag = tally.frames
            tally.frames += 1
            tally.kinds[item.kind] += 1
            exchange = fuzzer.exchange(item, tag)
            if tag % NEIGHBOUR_EVERY == 0:
                outcome, _ = await asyncio.gather(exchange, neighbour.round_trip())
            else:
                outcome = await exchange
            tally.outcomes[
                outcome if outcome.startswith(("close", "run")) else "answered"
            ] += 1
            if outcome.startswith("close") or item.expect.startswith("close"):
                assert outcome == item.expect, (item, outcome)
            assert outcome != "silent drop", item
        await neighbour.chat()
    finally:
        await fuzzer.close()
    tally.neighbour_trips = neighbour.trips
    tally.neighbour_chats += 1


def test_every_fuzzed_frame_is_answered_and_the_neighbour_is_served() -> None:
    """Every hostile frame gets a reply or the expected close; a neighbour is served."""
    server = ServerProcess(
        "sqlite://",
        max_message_bytes=str(MAX_MESSAGE_BYTES),
        ws_messages_per_s="1000000",
        ws_message_burst="1000000",
    )
    tally = Tally()
    with loop_thread() as loop:
        loop.run(server.start())
        try:
            neighbour = Neighbour(loop.run(open_client(server.ws_url)))

            @settings(
                max_examples=BATCHES,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[Phase.generate],  # a shrunk batch of bytes says no more
                suppress_health_check=list(HealthCheck),
                report_multiple_bugs=False,
            )
            @given(st.lists(fuzz_frames(), min_size=BATCH, max_size=BATCH))
            def batch(items: list[Fuzz]) -> None:
                loop.run(fuzz_batch(server.ws_url, items, neighbour, tally))

            batch()
            loop.run(neighbour.chat())
            loop.run(neighbour.client.connection.close())
            assert server.running
        finally:
            loop.run(server.stop_quietly())

    print(
        json.dumps({**tally.__dict__, "outcomes": dict(tally.outcomes)}, default=dict)
    )
    assert tally.frames >= BATCH * BATCHES
    assert tally.neighbour_trips >= tally.frames // NEIGHBOUR_EVERY
    logged = [line for line in server.lines if line.startswith(("ERROR", "CRITICAL"))]
    assert logged == [f"ERROR:    {UTF8_LOG}"] * tally.outcomes["close:1007"]
    assert not [line for line in server.lines if "Exception in ASGI" in line]
