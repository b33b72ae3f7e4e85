"""`OpenAIClient` retries against the fault-injecting server: how many
attempts, how long between them (recorded, not waited), what a stream may
retry."""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backend.errors import LLMError
from backend.llm.base import Completion, LLMRequest, Message, StreamEvent, TextDelta
from backend.llm.openai_compat.client import OpenAIClient
from backend.llm.retries import RetryPolicy, retry_after_s
from tests.faulty_openai import (
    Cut,
    ErrorReply,
    FaultyOpenAIServer,
    Malformed,
    Reply,
    Stall,
    running_faulty_openai,
)


class Waits(list[float]):
    """A `sleep` that records each wait and returns at once."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
async def faulty() -> AsyncIterator[FaultyOpenAIServer]:
    async with running_faulty_openai() as server:
        yield server


@pytest.fixture
def waits() -> Waits:
    return Waits()


@pytest.fixture
async def client(
    faulty: FaultyOpenAIServer, waits: Waits
) -> AsyncIterator[OpenAIClient]:
    llm = OpenAIClient(
        model="m", base_url=faulty.base_url, timeout_s=0.3, max_retries=2, sleep=waits
    )
    try:
        yield llm
    finally:
        await llm.aclose()


def ask() -> LLMRequest:
    return LLMRequest(messages=(Message.user("hi"),))


async def collect(llm: OpenAIClient) -> list[StreamEvent]:
    return [event async for event in llm.stream(ask())]


def overloaded(**headers: Any) -> ErrorReply:
    return ErrorReply(503, "overloaded", "server_error", **headers)


async def test_without_retry_after_the_waits_double(
    client: OpenAIClient, faulty: FaultyOpenAIServer, waits: Waits
) -> None:
    """Without `Retry-After`, waits double from 0.5 s and it gives up after 3 tries."""
    faulty.script(overloaded(), overloaded(), overloaded(), Reply("never"))

    with pytest.raises(LLMError) as caught:
        await client.complete(ask())

    assert str(caught.value) == (
        "the LLM server answered 503: overloaded (gave up after 3 attempts)"
    )
    assert waits == [0.5, 1.0]
    assert len(faulty.requests) == 3


async def test_retry_after_is_honoured_up_to_the_cap(
    client: OpenAIClient, faulty: FaultyOpenAIServer, waits: Waits
) -> None:
    """`Retry-After` and `retry-after-ms` set the wait, capped at 30 seconds."""
    faulty.script(
        overloaded(retry_after="3600"),
        overloaded(retry_after_ms=1500),
        Reply("finally"),
    )

    completion = await client.complete(ask())

    assert completion.content == "finally"
    assert waits == [30.0, 1.5]


async def test_retry_after_as_a_date(
    client: OpenAIClient, faulty: FaultyOpenAIServer, waits: Waits
) -> None:
    """A `Retry-After` HTTP date makes the client wait until that time."""
    date = email.utils.formatdate(time.time() + 10, usegmt=True)
    faulty.script(overloaded(retry_after=date), Reply("ok"))

    await client.complete(ask())

    assert len(waits) == 1 and 8.0 <= waits[0] <= 10.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "inf"}, None),
        ({}, None),
    ],
)
def test_retry_after_parsing(headers: dict[str, str], expected: float | None) -> None:
    """`retry_after_s` prefers milliseconds, reads seconds and dates, drops the rest."""
    now = email.utils.parsedate_to_datetime("Wed, 21 Oct 2015 07:28:00 GMT")
    assert retry_after_s(headers, now.timestamp()) == expected


def test_policy_waits() -> None:
    """Backoff doubles per attempt up to `max_wait_s`; a server hint replaces it."""
    policy = RetryPolicy(max_retries=10, backoff_s=0.5, max_wait_s=30)
    assert [policy.wait_s(n, None) for n in range(1, 8)] == [
        0.5,
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        30.0,
    ]
    assert policy.wait_s(1, 3600) == 30.0 and policy.wait_s(1, 0.2) == 0.2


async def test_a_server_saying_do_not_retry_is_believed(
    client: OpenAIClient, faulty: FaultyOpenAIServer, waits: Waits
) -> None:
    """A 500 with `x-should-retry: false` fails at once, with no retry or wait."""
    with pytest.raises(LLMError) as caught:  # nothing scripted: 500, no retry
        await client.complete(ask())

    assert str(caught.value) == (
        "the LLM server answered 500: faulty OpenAI server: no scripted reply left"
    )
    assert (len(faulty.requests), waits) == (1, [])


@pytest.mark.parametrize("fault", [Cut(), Stall(), Malformed()], ids=repr)
async def test_a_stream_that_fails_before_any_text(
    client: OpenAIClient, faulty: FaultyOpenAIServer, fault: Any
) -> None:
    """A stream cut or stalled before any text is retried; a malformed one is not."""
    faulty.script(fault, Reply("Hello there"))
    retried = not isinstance(fault, Malformed)

    if retried:
        events = await collect(client)
        assert events[:-1] == [TextDelta(text=t) for t in ("Hell", "o th", "ere")]
        last = events[-1]
        assert isinstance(last, Completion) and last.content == "Hello there"
    else:
        with pytest.raises(LLMError):
            await collect(client)
    assert len(faulty.requests) == (2 if retried else 1)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (
            Cut("Hello"),
            "the LLM server closed the connection before its reply was complete",
        ),
        (
            Cut("Hello", framing="close"),
            "the LLM server's reply stopped before it was complete",
        ),
        (Stall("Hello"), "the LLM request timed out after 0.3s"),
        (Malformed("Hello"), "the LLM server sent a malformed reply (invalid JSON)"),
    ],
    ids=["cut", "cut-close", "stall", "malformed"],
)
async def test_a_stream_that_fails_after_text_is_not_retried(
    client: OpenAIClient, faulty: FaultyOpenAIServer, fault: Any, message: str
) -> None:
    """A stream failing after some text raises its own error and is not retried."""
    faulty.script(fault, Reply("Hello again"))
    seen: list[StreamEvent] = []

    with pytest.raises(LLMError) as caught:
        async for event in client.stream(ask()):
            seen.append(event)

    assert str(caught.value) == message
    assert seen == [TextDelta(text="Hell"), TextDelta(text="o")]
    assert len(faulty.requests) == 1
