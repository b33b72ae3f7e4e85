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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed

from tests.fuzz_frames import MAX_MESSAGE_BYTES, Fuzz, fuzz_frames, hostile_values
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


def fuzz_endpoint(
    bodies: st.SearchStrategy[bytes],
    answer: Callable[[httpx.AsyncClient, bytes], Awaitable[str]],
    database_url: str,
) -> Counter[str]:
    """Send 300 generated `bodies` to a server process of its own (no
    exception in its log): how many times `answer` said each outcome."""
    server = ServerProcess(
        database_url,
        max_message_bytes=str(MAX_MESSAGE_BYTES),
        runs_per_minute="1000000",
    )
    outcomes: Counter[str] = Counter()
    with loop_thread() as loop:
        loop.run(server.start())
        try:
            base = f"http://127.0.0.1:{server.port}"

            @settings(
                max_examples=300,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(bodies)
            def one(body: bytes) -> None:
                async def send() -> str:
                    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                        return await answer(http, body)

                outcomes[loop.run(send())] += 1

            one()
            assert server.running
        finally:
            loop.run(server.stop_quietly())
    print(json.dumps(dict(outcomes)))
    assert not [line for line in server.lines if "Exception in ASGI" in line]
    return outcomes


# ------------------------------------------------ AG-UI: POST /api/ag-ui

AG_UI_REFUSALS = {400, 404, 409, 413, 415}
AG_UI_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "threadId": st.uuids().map(str) | st.text(max_size=40),
    "runId": st.text(min_size=1, max_size=40),
    "messages": st.just([{"id": "m1", "role": "user", "content": "what is 2+3?"}]),
    "resume": st.lists(
        st.fixed_dictionaries(
            {
                "interruptId": st.sampled_from(
                    ["question:call_1", "approval:call_1", "call_1"]
                )
                | st.text(max_size=30),
                "status": st.sampled_from(["resolved", "cancelled"]),
                "payload": hostile_values,
            }
        ),
        max_size=2,
    ),
    "forwardedProps": st.dictionaries(
        st.sampled_from(["detach", "max_steps", "loop_strategy", "model", "x"]),
        hostile_values,
        max_size=3,
    ),
    "tools": st.just([]) | hostile_values,
    "state": hostile_values,
}


@st.composite
def ag_ui_bodies(draw: st.DrawFn) -> bytes:
    """A `RunAgentInput` with each field right, wrong or missing (and
    sometimes unknown ones); or any hostile frame's bytes as the body."""
    if draw(st.integers(0, 3)) == 0:
        fuzz = draw(fuzz_frames())
        data = fuzz.data
        return (data.encode() if isinstance(data, str) else data)[: 1 << 20]
    body: dict[str, Any] = {}
    for name, good in AG_UI_FIELDS.items():
        how = draw(st.sampled_from(["good", "good", "wrong", "missing"]))
        if how == "good":
            body[name] = draw(good)
        elif how == "wrong":
            body[name] = draw(hostile_values)
    body.update(draw(st.dictionaries(st.text(max_size=20), hostile_values, max_size=2)))
    return json.dumps(body, default=str).encode()


def stream_answer(
    path: str, first: str, refusals: set[int], headers: dict[str, str] | None = None
) -> Callable[[httpx.AsyncClient, bytes], Awaitable[str]]:
    """How a loopwire SSE endpoint at `path` answered one body: a refusal's
    status (checked bounded and clear), or `run` (a stream whose first event
    has the type `first`, then closed, which stops its run). `headers`: what
    a stream's response must carry."""

    async def answer(http: httpx.AsyncClient, body: bytes) -> str:
        sent = {"Content-Type": "application/json"}
        async with http.stream("POST", path, content=body, headers=sent) as r:
            if r.status_code == 200:
                for name, value in (headers or {}).items():
                    assert r.headers[name] == value
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        assert json.loads(line[6:])["type"] == first
                        return "run"
                raise AssertionError(f"a stream from {path} without {first}")
            answer = json.loads(await r.aread())
        assert r.status_code in refusals, (r.status_code, answer)
        assert set(answer) <= {"error_type", "message", "fields"}
        assert len(answer["message"]) <= MAX_ERROR_CHARS
        return str(r.status_code)

    return answer


def test_every_fuzzed_ag_ui_body_is_refused_clearly_or_runs(tmp_path: Path) -> None:
    """Hostile AG-UI inputs get bounded JSON refusals or a proper stream; no 500."""
    database = f"sqlite:///{tmp_path / 'fuzz.db'}"  # several stopped runs at once
    answer = stream_answer("/api/ag-ui", "RUN_STARTED", AG_UI_REFUSALS)
    outcomes = fuzz_endpoint(ag_ui_bodies(), answer, database)
    assert outcomes["400"] > 0 and outcomes["run"] > 0


OPENAI_REFUSALS = {400, 404, 413, 415}
OPENAI_TEXT = st.text(max_size=40) | hostile_values
OPENAI_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "user", "assistant", "system", "tool"]),
        "content": OPENAI_TEXT
        | st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "image_url"]), "text": OPENAI_TEXT}
            ),
            max_size=2,
        ),
    }
)
OPENAI_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "model": st.sampled_from(
        ["loopwire-react", "loopwire-act", "loopwire-llm_only", "loopwire-react:x"]
    )
    | st.text(max_size=30),
    "messages": st.builds(
        lambda earlier, last: earlier + last,
        st.lists(OPENAI_MESSAGE, max_size=2),
        st.sampled_from([[], [{"role": "user", "content": "what is 2+3?"}]]),
    ),
    "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
    "temperature": st.floats(0, 2),
    "metadata": st.fixed_dictionaries(
        {"conversation_id": st.sampled_from(["new", "0" * 32, "x"])}
    ),
    "n": st.just(1),
    "tools": st.just([]),
    "user": st.text(max_size=20),
}


@st.composite
def openai_bodies(draw: st.DrawFn) -> bytes:
    """A chat completion request with each field right, wrong or missing
    (and sometimes unknown ones); or any hostile frame's bytes as the body."""
    if draw(st.integers(0, 3)) == 0:
        data = draw(fuzz_frames()).data
        return (data.encode() if isinstance(data, str) else data)[: 1 << 20]
    body: dict[str, Any] = {}
    for name, good in OPENAI_FIELDS.items():
        how = draw(st.sampled_from(["good"] * 8 + ["wrong", "missing"]))
        if how == "good":
            body[name] = draw(good)
        elif how == "wrong":
            body[name] = draw(hostile_values)
    body.update(draw(st.dictionaries(st.text(max_size=20), hostile_values, max_size=2)))
    return json.dumps(body, default=str).encode()


async def openai_answer(http: httpx.AsyncClient, body: bytes) -> str:
    """What `/v1/chat/completions` answered one body: a refusal's status
    (checked bounded and in OpenAI's shape), `stream` (a chunk stream, then
    closed, which stops its run) or `completion`."""
    headers = {"Content-Type": "application/json"}
    async with http.stream(
        "POST", "/v1/chat/completions", content=body, headers=headers
    ) as r:
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    assert json.loads(line[6:])["object"] == "chat.completion.chunk"
                    return "stream"
            raise AssertionError("a chunk stream without a chunk")
        answer = json.loads(await r.aread())
    if r.status_code == 200:
        assert answer["object"] == "chat.completion", answer
        return "completion"
    assert r.status_code in OPENAI_REFUSALS, (r.status_code, answer)
    assert set(answer) == {"error"} and set(answer["error"]) == {
        "message",
        "type",
        "code",
        "param",
    }
    assert len(answer["error"]["message"]) <= MAX_ERROR_CHARS
    return str(r.status_code)


def test_every_fuzzed_openai_body_is_refused_clearly_or_runs() -> None:
    """Hostile chat completion requests get bounded OpenAI errors or a reply; no 500."""
    outcomes = fuzz_endpoint(openai_bodies(), openai_answer, "sqlite://")
    assert outcomes["400"] > 0 and outcomes["stream"] + outcomes["completion"] > 0


# ----------------------------------- AI SDK UI message stream: POST /api/ui-stream

UI_STREAM_REFUSALS = {400, 404, 409, 413, 415}
UI_PART = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["text", "text", "file", "dynamic-tool", "data-loopwire-question"]
        )
        | st.text(max_size=20)
    },
    optional={
        "text": st.just("what is 2+3?") | hostile_values,
        "state": st.sampled_from(["approval-responded", "output-available"]),
        "approval": st.fixed_dictionaries(
            {"id": st.just("call_1") | hostile_values, "approved": hostile_values}
        ),
        "data": st.fixed_dictionaries({"questionId": hostile_values}),
    },
)
UI_MESSAGE = st.fixed_dictionaries(
    {
        "id": st.text(max_size=20),
        "role": st.sampled_from(["user", "user", "assistant", "system", "tool"]),
        "parts": st.lists(UI_PART, max_size=3),
    },
    optional={
        "metadata": st.fixed_dictionaries(
            {"conversationId": st.sampled_from(["0" * 32, "../x"]) | hostile_values}
        )
    },
)
UI_STREAM_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "id": st.sampled_from(["chat-1", "chat-1", "0" * 32, "x" * 300]),
    "messages": st.just(
        [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "2+3?"}]}]
    )
    | st.lists(UI_MESSAGE, max_size=3),
    "trigger": st.sampled_from(["submit-message"] * 3 + ["regenerate-message"]),
    "messageId": st.sampled_from(["a1", "a1", "u1"]),
    "detach": st.booleans(),
    "max_steps": st.integers(1, 20),
    "loop_strategy": st.sampled_from(["react", "act", "nope"]),
}


@st.composite
def ui_stream_bodies(draw: st.DrawFn) -> bytes:
    """What `DefaultChatTransport` sends, each field right, wrong or missing
    (and sometimes unknown ones); or any hostile frame's bytes as the body."""
    if draw(st.integers(0, 3)) == 0:
        data = draw(fuzz_frames()).data
        return (data.encode() if isinstance(data, str) else data)[: 1 << 20]
    body: dict[str, Any] = {}
    for name, good in UI_STREAM_FIELDS.items():
        how = draw(st.sampled_from(["good"] * 12 + ["wrong", "missing"]))
        if how == "good":
            body[name] = draw(good)
        elif how == "wrong":
            body[name] = draw(hostile_values)
    if draw(st.integers(0, 3)) == 0:
        body.update(draw(st.dictionaries(st.text(max_size=20), hostile_values)))
    return json.dumps(body, default=str).encode()


def test_every_fuzzed_ui_stream_body_is_refused_clearly_or_runs(tmp_path: Path) -> None:
    """Hostile `useChat` bodies get bounded JSON refusals or a proper stream; no 500."""
    database = f"sqlite:///{tmp_path / 'fuzz.db'}"  # several stopped runs at once
    answer = stream_answer(
        "/api/ui-stream",
        "start",
        UI_STREAM_REFUSALS,
        headers={"x-vercel-ai-ui-message-stream": "v1"},
    )
    outcomes = fuzz_endpoint(ui_stream_bodies(), answer, database)
    assert outcomes["400"] > 0 and outcomes["run"] > 0
