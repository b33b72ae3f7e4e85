"""`OpenAIClient` against the fake OpenAI-compatible server (no network)."""

from __future__ import annotations

import ast
import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backend.errors import LLMError
from backend.llm.base import (
    Completion,
    LLMRequest,
    Message,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from backend.llm.openai_compat.client import OpenAIClient
from backend.llm.tokens import estimate_message_tokens, estimate_request_tokens
from tests.fake_openai import (
    ErrorReply,
    FakeOpenAIServer,
    FakeUsage,
    HangReply,
    Reply,
)

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters=WEATHER_SCHEMA,
)


@pytest.fixture
async def client(fake_openai: FakeOpenAIServer) -> AsyncIterator[OpenAIClient]:
    llm = OpenAIClient(model="test-model", base_url=fake_openai.base_url, max_retries=0)
    try:
        yield llm
    finally:
        await llm.aclose()


def ask(text: str = "hi", **kwargs: Any) -> LLMRequest:
    return LLMRequest(messages=(Message.user(text),), **kwargs)


async def collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


def estimated(request: LLMRequest, reply: Message) -> Usage:
    """The usage loopwire estimates for a reply its server did not count."""
    prompt = estimate_request_tokens(request.messages, request.tools)
    completed = estimate_message_tokens(reply)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completed,
        total_tokens=prompt + completed,
        llm_calls=1,
        estimated_calls=1,
    )


def free_port() -> int:
    """A local port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- complete() ---------------------------------------------------------------


async def test_complete_returns_text_usage_and_finish_reason(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """A plain reply becomes a `Completion` with its text, usage and stop reason."""
    fake_openai.script(Reply(content="Hello there!", usage=FakeUsage(12, 3)))

    completion = await client.complete(ask("Say hello"))

    assert completion == Completion(
        content="Hello there!",
        tool_calls=(),
        usage=Usage(
            prompt_tokens=12, completion_tokens=3, total_tokens=15, llm_calls=1
        ),
        finish_reason="stop",
    )
    assert fake_openai.requests == [
        {"model": "test-model", "messages": [{"role": "user", "content": "Say hello"}]}
    ]


async def test_complete_sends_exact_body_and_maps_tool_calls(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """The request body carries every message, tool and option; tool calls come back."""
    fake_openai.script(
        Reply(
            tool_calls=[
                ("get_weather", {"city": "Oslo"}),
                ("get_time", '{"tz": "CET"}'),
            ],
            usage=FakeUsage(40, 9),
        )
    )
    earlier_call = ToolCall(
        id="call_a", name="get_weather", arguments='{"city": "Rome"}'
    )
    request = LLMRequest(
        messages=(
            Message.system("You are terse."),
            Message.user("Weather in Rome, then Oslo?"),
            Message.assistant(None, [earlier_call]),
            Message.tool("call_a", "get_weather", '{"temp_c": 21}'),
            Message.assistant("Rome is 21°C."),
        ),
        tools=(WEATHER,),
        tool_choice="auto",
        model="override-model",
        temperature=0.2,
        purpose="act",
    )

    completion = await client.complete(request)

    assert completion == Completion(
        content="",
        tool_calls=(
            ToolCall(
                id="call_fake_1", name="get_weather", arguments='{"city": "Oslo"}'
            ),
            ToolCall(id="call_fake_2", name="get_time", arguments='{"tz": "CET"}'),
        ),
        usage=Usage(
            prompt_tokens=40, completion_tokens=9, total_tokens=49, llm_calls=1
        ),
        finish_reason="tool_calls",
    )
    assert fake_openai.requests == [
        {
            "model": "override-model",
            "temperature": 0.2,
            "tool_choice": "auto",
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Current weather for a city.",
                        "parameters": WEATHER_SCHEMA,
                    },
                }
            ],
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Weather in Rome, then Oslo?"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": '{"city": "Rome"}',
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_a", "content": '{"temp_c": 21}'},
                {"role": "assistant", "content": "Rome is 21°C."},
            ],
        }
    ]


async def test_complete_without_tools_sends_neither_tools_nor_tool_choice(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """With no tools, the body omits `tools` and `tool_choice` even if one is set."""
    fake_openai.script(Reply(content="ok"))

    completion = await client.complete(
        ask("plain", tool_choice="none", purpose="final")
    )

    assert completion.usage.estimated_calls == 1  # the reply carried no usage
    assert fake_openai.requests == [
        {"model": "test-model", "messages": [{"role": "user", "content": "plain"}]}
    ]


async def test_complete_generates_ids_for_tool_calls_without_one(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """Tool calls sent with no id get `call_N` ids that keep counting across calls."""
    fake_openai.script(
        Reply(tool_calls=[("a", {}), ("b", {"x": 1})], omit_tool_call_ids=True),
        Reply(tool_calls=[("c", "")], omit_tool_call_ids=True),
    )

    first = await client.complete(ask(tools=(WEATHER,)))
    second = await client.complete(ask(tools=(WEATHER,)))

    assert first.tool_calls == (
        ToolCall(id="call_1", name="a", arguments="{}"),
        ToolCall(id="call_2", name="b", arguments='{"x": 1}'),
    )
    assert second.tool_calls == (ToolCall(id="call_3", name="c", arguments="{}"),)


# -- stream() -----------------------------------------------------------------


async def test_stream_yields_deltas_then_one_completion_with_usage(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """A stream yields text deltas, then one `Completion` carrying the usage."""
    fake_openai.script(Reply(content="Hello, streaming world", usage=FakeUsage(8, 5)))

    events = await collect(client.stream(ask("stream please")))

    assert events == [
        TextDelta(text="Hell"),
        TextDelta(text="o, s"),
        TextDelta(text="trea"),
        TextDelta(text="ming"),
        TextDelta(text=" wor"),
        TextDelta(text="ld"),
        Completion(
            content="Hello, streaming world",
            usage=Usage(
                prompt_tokens=8, completion_tokens=5, total_tokens=13, llm_calls=1
            ),
            finish_reason="stop",
        ),
    ]
    assert fake_openai.requests == [
        {
            "model": "test-model",
            "messages": [{"role": "user", "content": "stream please"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ]


async def test_stream_assembles_tool_call_fragments(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """Streamed argument fragments of several tool calls join into whole calls."""
    first_args = '{"city": "Oslo", "units": "metric", "days": [1, 2, 3]}'
    second_args = {"query": "fjords", "limit": 5}
    fake_openai.script(
        Reply(
            content="Checking.",
            tool_calls=[("get_weather", first_args), ("search", second_args)],
            usage=FakeUsage(30, 20),
            argument_fragments=5,
        )
    )

    events = await collect(client.stream(ask(tools=(WEATHER,), tool_choice="required")))

    assert events == [
        TextDelta(text="Chec"),
        TextDelta(text="king"),
        TextDelta(text="."),
        Completion(
            content="Checking.",
            tool_calls=(
                ToolCall(id="call_fake_1", name="get_weather", arguments=first_args),
                ToolCall(
                    id="call_fake_2", name="search", arguments=json.dumps(second_args)
                ),
            ),
            usage=Usage(
                prompt_tokens=30, completion_tokens=20, total_tokens=50, llm_calls=1
            ),
            finish_reason="tool_calls",
        ),
    ]
    assert fake_openai.requests[0]["tool_choice"] == "required"


async def test_stream_assembles_fragments_from_servers_omitting_index_and_ids(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """Fragments lacking index and id still join into the right calls, with new ids."""
    fake_openai.script(
        Reply(
            tool_calls=[("one", {"a": "xyz"}), ("two", {"b": [1, 2]})],
            omit_stream_index=True,
            omit_tool_call_ids=True,
            argument_fragments=4,
        )
    )

    request = ask(tools=(WEATHER,))
    events = await collect(client.stream(request))

    calls = (
        ToolCall(id="call_1", name="one", arguments='{"a": "xyz"}'),
        ToolCall(id="call_2", name="two", arguments='{"b": [1, 2]}'),
    )
    assert events == [
        Completion(
            tool_calls=(
                ToolCall(id="call_1", name="one", arguments='{"a": "xyz"}'),
                ToolCall(id="call_2", name="two", arguments='{"b": [1, 2]}'),
            ),
            usage=estimated(request, Message.assistant("", tool_calls=calls)),
            finish_reason="tool_calls",
        )
    ]


async def test_stream_retries_without_stream_options_when_rejected_and_remembers(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """A 400 on `stream_options` retries without it, and later streams skip it."""
    fake_openai.script(
        ErrorReply(400, "Unrecognized request argument supplied: stream_options"),
        Reply(content="fine", usage=FakeUsage(1, 1)),
        Reply(content="again", usage=FakeUsage(1, 1)),
    )

    first = await collect(client.stream(ask("one")))
    second = await collect(client.stream(ask("two")))

    # Without stream_options the server sends no usage chunk: estimated
    assert first == [
        TextDelta(text="fine"),
        Completion(
            content="fine",
            usage=estimated(ask("one"), Message.assistant("fine")),
            finish_reason="stop",
        ),
    ]
    assert second == [
        TextDelta(text="agai"),
        TextDelta(text="n"),
        Completion(
            content="again",
            usage=estimated(ask("two"), Message.assistant("again")),
            finish_reason="stop",
        ),
    ]
    assert [r.get("stream_options") for r in fake_openai.requests] == [
        {"include_usage": True},
        None,
        None,
    ]
    assert [r["messages"][0]["content"] for r in fake_openai.requests] == [
        "one",
        "one",
        "two",
    ]


async def test_stream_other_bad_request_is_an_error_without_retry(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """Any other 400 while streaming raises `LLMError` after a single request."""
    fake_openai.script(ErrorReply(400, "model 'nope' not found"))

    with pytest.raises(LLMError) as caught:
        await collect(client.stream(ask(model="nope")))

    assert str(caught.value) == "the LLM server answered 400: model 'nope' not found"
    assert len(fake_openai.requests) == 1


# -- errors -------------------------------------------------------------------


async def test_http_500_becomes_llm_error(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """A 500 reply raises `LLMError` quoting the status and server message."""
    fake_openai.script(ErrorReply(500, "the model crashed", error_type="server_error"))

    with pytest.raises(LLMError) as caught:
        await client.complete(ask())

    assert str(caught.value) == "the LLM server answered 500: the model crashed"


async def test_http_401_becomes_llm_error_when_streaming(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """A 401 reply to a stream raises `LLMError` quoting the server message."""
    fake_openai.script(ErrorReply(401, "Incorrect API key provided."))

    with pytest.raises(LLMError) as caught:
        await collect(client.stream(ask()))

    assert (
        str(caught.value) == "the LLM server answered 401: Incorrect API key provided."
    )


async def test_retries_are_bounded(fake_openai: FakeOpenAIServer) -> None:
    """With one retry allowed, the client gives up after two 503s."""
    fake_openai.script(
        ErrorReply(503, "overloaded", retry_after_ms=1),
        ErrorReply(503, "still overloaded", retry_after_ms=1),
        Reply(content="never reached"),
    )
    llm = OpenAIClient(model="m", base_url=fake_openai.base_url, max_retries=1)
    try:
        with pytest.raises(LLMError) as caught:
            await llm.complete(ask())
    finally:
        await llm.aclose()

    assert str(caught.value) == (
        "the LLM server answered 503: still overloaded (gave up after 2 attempts)"
    )
    assert len(fake_openai.requests) == 2
    assert fake_openai.pending_replies == 1


async def test_retry_recovers_from_a_transient_error(
    fake_openai: FakeOpenAIServer,
) -> None:
    """A single 500 followed by a good reply succeeds on the retry."""
    fake_openai.script(ErrorReply(500, "blip", retry_after_ms=1), Reply(content="ok"))
    llm = OpenAIClient(model="m", base_url=fake_openai.base_url, max_retries=2)
    try:
        completion = await llm.complete(ask())
    finally:
        await llm.aclose()

    assert completion.content == "ok"
    assert len(fake_openai.requests) == 2


async def test_connection_refused_becomes_llm_error() -> None:
    """A closed port raises `LLMError` saying the connection was refused."""
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    llm = OpenAIClient(model="m", base_url=base_url, max_retries=0)
    try:
        with pytest.raises(LLMError) as caught:
            await llm.complete(ask())
    finally:
        await llm.aclose()

    assert str(caught.value) == "cannot reach the LLM server: connection refused"


async def test_timeout_becomes_llm_error(fake_openai: FakeOpenAIServer) -> None:
    """A hung reply raises a timeout `LLMError` and the upstream request is closed."""
    fake_openai.script(HangReply())
    llm = OpenAIClient(
        model="m", base_url=fake_openai.base_url, timeout_s=0.2, max_retries=0
    )
    try:
        with pytest.raises(LLMError) as caught:
            await llm.complete(ask())
    finally:
        await llm.aclose()

    assert str(caught.value) == "the LLM request timed out after 0.2s"
    await asyncio.wait_for(fake_openai.cancelled.wait(), timeout=5)


async def test_unscripted_request_fails_loudly(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """A request the fake server has no reply for fails with a message naming it."""
    with pytest.raises(LLMError) as caught:
        await client.complete(ask())

    assert str(caught.value) == (
        "the LLM server answered 500: fake OpenAI server: no scripted reply left "
        "for request #1; call script() with more replies"
    )


# -- cancellation -------------------------------------------------------------


async def test_cancelling_complete_closes_the_upstream_request(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """Cancelling a pending `complete` closes the request on the server."""
    fake_openai.script(HangReply())
    task = asyncio.create_task(client.complete(ask()))
    await fake_openai.wait_for_requests(1)

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(fake_openai.cancelled.wait(), timeout=5)


async def test_cancelling_stream_before_headers_closes_the_upstream_request(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """Cancelling a stream before any response closes the request on the server."""
    fake_openai.script(HangReply())
    task = asyncio.create_task(collect(client.stream(ask())))
    await fake_openai.wait_for_requests(1)

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(fake_openai.cancelled.wait(), timeout=5)


async def test_cancelling_stream_mid_body_closes_the_upstream_request(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """Cancelling a stream after its first delta closes the request on the server."""
    fake_openai.script(HangReply(partial_content="partial"))
    first_delta = asyncio.Event()
    received: list[StreamEvent] = []

    async def consume() -> None:
        async for event in client.stream(ask()):
            received.append(event)
            first_delta.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_delta.wait(), timeout=5)

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(fake_openai.cancelled.wait(), timeout=5)
    assert received[0] == TextDelta(text="part")


async def test_breaking_out_of_a_stream_closes_the_upstream_request(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """Closing a stream early after one delta closes the request on the server."""
    fake_openai.script(HangReply(partial_content="partial"))

    events = client.stream(ask())
    first = await anext(events)
    await events.aclose()  # type: ignore[attr-defined]

    assert first == TextDelta(text="part")
    await asyncio.wait_for(fake_openai.cancelled.wait(), timeout=5)


async def test_client_properties(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """The client reports its model, the `openai` provider and its base URL."""
    assert client.model == "test-model"
    assert client.provider == "openai"
    assert client.base_url == fake_openai.base_url


def test_only_the_openai_compat_modules_import_the_sdk() -> None:
    """The `openai` SDK stays behind the provider (and the embedder)."""
    backend = Path(__file__).resolve().parent.parent / "backend"
    importers = set()
    for path in backend.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            if any(name.split(".")[0] == "openai" for name in names):
                importers.add(path.relative_to(backend).as_posix())
    outside = {p for p in importers if not p.startswith("llm/openai_compat/")}
    assert "llm/openai_compat/client.py" in importers
    assert outside == set()


# -- usage --------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_usage_is_the_servers_own_cached_and_reasoning_tokens_included(
    client: OpenAIClient, fake_openai: FakeOpenAIServer, streamed: bool
) -> None:
    """The server's usage, cached prompt tokens and reasoning tokens
    included, is the reply's exactly, streamed (its last chunk) or not."""
    reported = FakeUsage(1200, 80, cached_tokens=1024, reasoning_tokens=64)
    fake_openai.script(Reply(content="Done thinking.", usage=reported))
    if streamed:
        reply = (await collect(client.stream(ask("think"))))[-1]
    else:
        reply = await client.complete(ask("think"))
    assert isinstance(reply, Completion)
    assert reply.usage == Usage(
        prompt_tokens=1200,
        completion_tokens=80,
        total_tokens=1280,
        llm_calls=1,
        cached_tokens=1024,
        reasoning_tokens=64,
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_a_reply_without_usage_is_estimated_and_marked_so(
    client: OpenAIClient, fake_openai: FakeOpenAIServer, streamed: bool
) -> None:
    """A server that reports no usage: the tokens are loopwire's estimate of
    the request and the reply, and the usage says it was estimated."""
    fake_openai.script(Reply(content="Twelve bytes", usage=None))
    request = ask("count me")
    if streamed:
        reply = (await collect(client.stream(request)))[-1]
    else:
        reply = await client.complete(request)
    assert isinstance(reply, Completion)
    prompt = estimate_request_tokens(request.messages)
    completed = estimate_message_tokens(Message.assistant("Twelve bytes"))
    assert reply.usage == Usage(
        prompt_tokens=prompt,
        completion_tokens=completed,
        total_tokens=prompt + completed,
        llm_calls=1,
        estimated_calls=1,
    )
    assert (prompt, completed) == (8 + 4 + 2, 4 + 3)
