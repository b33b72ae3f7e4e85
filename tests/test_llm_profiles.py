"""Server profiles (`LOOPWIRE_LLM_PROFILE`): what each sends, and how every
client learns from a server that refuses a parameter (fake server, no network)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from backend.app import make_llm
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
from backend.llm.openai_compat.profiles import (
    PROFILES,
    Profile,
    ProfileName,
    refused,
)
from backend.llm.openai_compat.wire import payload
from backend.tools.base import ToolRegistry
from tests.conftest import make_settings
from tests.fake_openai import ErrorReply, FakeOpenAIServer, FakeUsage, Reply

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
WEATHER = ToolSpec(
    name="get_weather", description="Current weather.", parameters=WEATHER_SCHEMA
)
WEATHER_PARAM = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather.",
        "parameters": WEATHER_SCHEMA,
    },
}
USER = [{"role": "user", "content": "hi"}]
TOOLS_REFUSED = "Unrecognized request argument supplied: tool_choice"
LOG = "backend.llm.openai_compat.client"


def ask(**kwargs: Any) -> LLMRequest:
    return LLMRequest(messages=(Message.user("hi"),), **kwargs)


def with_tools(choice: str = "auto") -> LLMRequest:
    return ask(tools=(WEATHER,), tool_choice=choice, temperature=0.2)


async def collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


def open_client(fake: FakeOpenAIServer, profile: str = "auto") -> OpenAIClient:
    return OpenAIClient(
        model="test-model", base_url=fake.base_url, max_retries=0, profile=profile
    )


@pytest.fixture
async def client(fake_openai: FakeOpenAIServer) -> AsyncIterator[OpenAIClient]:
    llm = open_client(fake_openai)
    try:
        yield llm
    finally:
        await llm.aclose()


def body(**extra: Any) -> dict[str, Any]:
    """The request body for `with_tools()`, plus `extra`."""
    return {"model": "test-model", "messages": USER, **extra}


TOOLED = {"tools": [WEATHER_PARAM], "temperature": 0.2}
STREAMED = {"stream": True, "stream_options": {"include_usage": True}}
EXPECTED: dict[str, dict[str, Any]] = {
    "openai": {**TOOLED, "tool_choice": "auto"},
    "ollama": TOOLED,
    "vllm": {**TOOLED, "tool_choice": "auto"},
    "lmstudio": {**TOOLED, "tool_choice": "auto"},
    "llamacpp": {**TOOLED, "tool_choice": "auto", "parallel_tool_calls": True},
    "deepseek": {**TOOLED, "tool_choice": "auto"},
    "auto": {**TOOLED, "tool_choice": "auto"},
}
"""What each profile adds to a call offering a tool with `tool_choice: "auto"`."""


# -- what each profile sends ---------------------------------------------------


def test_every_profile_name_is_a_setting_value() -> None:
    """`PROFILES` holds exactly the values `LOOPWIRE_LLM_PROFILE` takes."""
    assert list(PROFILES) == list(get_args(ProfileName))
    assert set(EXPECTED) == set(PROFILES)
    assert all(PROFILES[name].name == name for name in PROFILES)


@pytest.mark.parametrize("name", list(EXPECTED))
async def test_each_profile_sends_its_parameters(
    fake_openai: FakeOpenAIServer, name: str
) -> None:
    """A profile's call and stream carry exactly its parameters."""
    fake_openai.script(Reply(content="one"), Reply(content="two"))
    llm = open_client(fake_openai, name)
    try:
        await llm.complete(with_tools())
        await collect(llm.stream(with_tools()))
    finally:
        await llm.aclose()

    assert fake_openai.requests == [
        body(**EXPECTED[name]),
        body(**EXPECTED[name], **STREAMED),
    ]
    assert llm.profile == PROFILES[name]
    assert llm.refusals == {}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ollama", body()),
        ("auto", body(tools=[WEATHER_PARAM], tool_choice="none")),
    ],
)
async def test_tool_choice_none_offers_no_tools_where_it_is_not_sent(
    fake_openai: FakeOpenAIServer, name: str, expected: dict[str, Any]
) -> None:
    """`tool_choice: "none"` reaches a server that takes it; one that ignores
    it is offered no tools (the temperature is sent either way)."""
    fake_openai.script(Reply(content="fine"))
    llm = open_client(fake_openai, name)
    try:
        await llm.complete(with_tools("none"))
    finally:
        await llm.aclose()

    expected = {**expected, "temperature": 0.2}
    assert fake_openai.requests == [expected]


def test_a_client_refuses_an_unknown_profile() -> None:
    """`OpenAIClient(profile=...)` with an unknown name lists the known ones."""
    with pytest.raises(ValueError) as caught:
        OpenAIClient(model="m", profile="tgi")
    assert str(caught.value) == (
        "unknown LLM profile 'tgi' "
        "(one of: openai, ollama, vllm, lmstudio, llamacpp, deepseek, auto)"
    )


def test_an_unknown_profile_setting_is_refused_naming_the_valid_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`LOOPWIRE_LLM_PROFILE=tgi` fails validation, listing every profile."""
    monkeypatch.setenv("LOOPWIRE_LLM_PROFILE", "tgi")
    with pytest.raises(ValidationError) as caught:
        make_settings()
    message = str(caught.value)
    assert "llm_profile" in message
    assert (
        "'openai', 'ollama', 'vllm', 'lmstudio', 'llamacpp', 'deepseek' or 'auto'"
        in message
    )


async def test_the_app_builds_its_client_with_the_configured_profile(
    fake_openai: FakeOpenAIServer,
) -> None:
    """`make_llm` hands `LOOPWIRE_LLM_PROFILE` to the OpenAI client."""
    settings = make_settings(llm_base_url=fake_openai.base_url, llm_profile="llamacpp")
    llm = make_llm(settings, ToolRegistry())
    try:
        assert isinstance(llm, OpenAIClient)
        assert llm.profile == PROFILES["llamacpp"]
    finally:
        await llm.aclose()


# -- learning from refusals ----------------------------------------------------


async def test_auto_drops_a_refused_tool_choice_in_complete_for_good(
    client: OpenAIClient,
    fake_openai: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 400 naming `tool_choice` is answered at once without it (no retry
    is spent: the client has none), logged once, and never sent again."""
    fake_openai.script(
        ErrorReply(400, TOOLS_REFUSED),
        Reply(content="first", usage=FakeUsage(3, 1)),
        Reply(content="second"),
        Reply(content="third"),
    )
    with caplog.at_level(logging.INFO, logger=LOG):
        first = await client.complete(with_tools())
        await client.complete(with_tools())
        await collect(client.stream(with_tools()))

    assert first == Completion(
        content="first",
        usage=Usage(prompt_tokens=3, completion_tokens=1, total_tokens=4, llm_calls=1),
        finish_reason="stop",
    )
    assert fake_openai.requests == [
        body(**TOOLED, tool_choice="auto"),
        body(**TOOLED),
        body(**TOOLED),
        body(**TOOLED, **STREAMED),
    ]
    assert client.refusals == {"tool_choice": TOOLS_REFUSED}
    assert client.profile == PROFILES["auto"].without("tool_choice")
    assert client.profile.sends() == {
        "stream_options": True,
        "parallel_tool_calls": None,
        "tool_choice": False,
        "tools": True,
        "temperature": True,
        "max_tokens": True,
    }
    logged = [r for r in caplog.records if r.name == LOG]
    assert [(r.levelno, r.getMessage()) for r in logged] == [
        (
            logging.INFO,
            f"the LLM server {fake_openai.base_url} refused tool_choice, so it is "
            f"no longer sent (profile auto): {TOOLS_REFUSED}",
        )
    ]


async def test_auto_drops_a_refused_tool_choice_in_stream_for_good(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """A stream refused for `tool_choice` streams without it, and later calls
    and streams never carry it."""
    fake_openai.script(
        ErrorReply(400, "tool_choice: extra inputs are not permitted"),
        Reply(content="fine"),
        Reply(content="again"),
        Reply(content="more"),
    )

    events = await collect(client.stream(with_tools()))
    await client.complete(with_tools())
    await collect(client.stream(with_tools()))

    assert events[0] == TextDelta(text="fine")
    reply = events[1]
    assert isinstance(reply, Completion)
    assert (reply.content, reply.finish_reason) == ("fine", "stop")
    assert reply.usage.estimated_calls == 1  # the fake reported none
    assert fake_openai.requests == [
        body(**TOOLED, tool_choice="auto", **STREAMED),
        body(**TOOLED, **STREAMED),
        body(**TOOLED),
        body(**TOOLED, **STREAMED),
    ]
    assert list(client.refusals) == ["tool_choice"]


async def test_a_named_profile_learns_as_auto_does(
    fake_openai: FakeOpenAIServer,
) -> None:
    """llama.cpp refusing `parallel_tool_calls` makes that profile stop
    sending it, keeping everything else it sends."""
    fake_openai.script(
        ErrorReply(400, "Unsupported param: parallel_tool_calls"),
        Reply(content="ok"),
    )
    llm = open_client(fake_openai, "llamacpp")
    try:
        await llm.complete(with_tools())
    finally:
        await llm.aclose()

    assert fake_openai.requests == [
        body(**EXPECTED["llamacpp"]),
        body(**TOOLED, tool_choice="auto"),
    ]
    assert llm.profile.name == "llamacpp"
    assert llm.profile.parallel_tool_calls is None


async def test_vllm_without_auto_tool_choice_gets_no_native_tools(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """vLLM's refusal of "auto" drops tool_choice and the tools; the model's
    tool call written as text still becomes a call of the offered tool."""
    refusal = (
        '"auto" tool choice requires --enable-auto-tool-choice and '
        "--tool-call-parser to be set"
    )
    fake_openai.script(
        ErrorReply(400, refusal),
        Reply(
            content='<tool_call>{"name": "get_weather", "arguments": '
            '{"city": "Oslo"}}</tool_call>'
        ),
    )

    completion = await client.complete(with_tools())

    assert fake_openai.requests == [
        body(**TOOLED, tool_choice="auto"),
        body(temperature=0.2),
    ]
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [
        ("get_weather", '{"city": "Oslo"}')
    ]
    assert client.refusals == {"tool_choice": refusal, "tools": refusal}


async def test_refusals_one_after_another_are_each_learned(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """A server that refuses one parameter, then another, gets a request
    without either; both are remembered, in order."""
    fake_openai.script(
        ErrorReply(400, "Unrecognized request argument supplied: stream_options"),
        ErrorReply(422, "temperature: Extra inputs are not permitted"),
        Reply(content="done"),
    )

    await collect(client.stream(with_tools()))

    assert fake_openai.requests == [
        body(**TOOLED, tool_choice="auto", **STREAMED),
        body(**TOOLED, tool_choice="auto", stream=True),
        body(tools=[WEATHER_PARAM], tool_choice="auto", stream=True),
    ]
    assert list(client.refusals) == ["stream_options", "temperature"]


# -- refusals that are errors --------------------------------------------------


async def test_a_bad_request_naming_no_parameter_is_an_error(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """A 400 about something else fails the call after one request; the
    profile is unchanged."""
    fake_openai.script(ErrorReply(400, "model 'nope' not found"))

    with pytest.raises(LLMError) as caught:
        await client.complete(with_tools())

    assert str(caught.value) == "the LLM server answered 400: model 'nope' not found"
    assert len(fake_openai.requests) == 1
    assert client.refusals == {}
    assert client.profile == PROFILES["auto"]


async def test_a_refusal_of_a_parameter_not_sent_is_an_error(
    client: OpenAIClient, fake_openai: FakeOpenAIServer
) -> None:
    """A server that still refuses once the parameter is gone is not asked
    forever: the second refusal names nothing sent, and fails the call."""
    refusal = "Unrecognized request argument supplied: stream_options"
    fake_openai.script(ErrorReply(400, refusal), ErrorReply(400, refusal))

    with pytest.raises(LLMError) as caught:
        await collect(client.stream(ask()))

    assert str(caught.value) == f"the LLM server answered 400: {refusal}"
    assert fake_openai.requests == [
        body(**STREAMED),
        body(stream=True),
    ]
    assert client.refusals == {"stream_options": refusal}


# -- the matching itself -------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "param", "expected"),
    [
        (
            "Unrecognized request argument supplied: stream_options",
            None,
            ["stream_options"],
        ),
        ("unknown field `PARALLEL_TOOL_CALLS`", None, ["parallel_tool_calls"]),
        ("tool_choice param requires --jinja flag", None, ["tool_choice"]),
        ("tools param requires --jinja flag", None, ["tools"]),
        ("registry.ollama.ai/library/gemma:2b does not support tools", None, ["tools"]),
        (
            "Unsupported value: does not work with this model.",
            "temperature",
            ["temperature"],
        ),
        ("stream_options_extra is invalid", None, []),
        ("Invalid 'messages': empty", "messages", []),
        ("model 'x' not found", None, []),
    ],
)
def test_refused_finds_the_parameters_a_message_names(
    message: str, param: str | None, expected: list[str]
) -> None:
    """Whole words of a refusal, or OpenAI's `param` field, name what to drop."""
    sent = body(**TOOLED, tool_choice="auto", parallel_tool_calls=True, **STREAMED)
    assert refused(sent, message, param) == expected


def test_refused_names_only_parameters_that_were_sent() -> None:
    """A message naming a parameter the request did not carry drops nothing."""
    assert refused(body(), "Unrecognized argument: stream_options") == []


def test_a_profile_without_a_parameter_keeps_the_rest() -> None:
    """`without` turns off one parameter (`None` for `parallel_tool_calls`)."""
    llamacpp = PROFILES["llamacpp"]
    assert llamacpp.without("stream_options") == Profile(
        "llamacpp", llamacpp.summary, stream_options=False, parallel_tool_calls=True
    )
    assert llamacpp.without("parallel_tool_calls") == Profile(
        "llamacpp", llamacpp.summary
    )


# -- the thinking behind tool calls, sent back -----------------------------------

CALL = ToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo"}')
TURNS = (
    Message.user("weather in Oslo?"),
    Message.assistant(None, (CALL,), "Oslo first."),
    Message.tool("c1", "get_weather", "rain"),
    Message.assistant("Rain in Oslo."),
    Message.user("and Bergen?"),
    Message.assistant(None, (CALL.model_copy(update={"id": "c2"}),), "Now Bergen."),
    Message.tool("c2", "get_weather", "sun"),
)
"""Two turns, each with a tool call and the thinking behind it."""


def test_deepseek_sends_this_turns_thinking_back_with_its_tool_calls() -> None:
    """The `deepseek` profile gives this turn's tool-calling message its
    `reasoning_content`; the earlier turn's goes without, as DeepSeek asks."""
    request = LLMRequest(messages=TURNS)
    sent = payload(request, default_model="m", profile=PROFILES["deepseek"])
    reasoning = [m.get("reasoning_content") for m in sent["messages"]]
    assert reasoning == [None, None, None, None, None, "Now Bergen.", None]
    plain = payload(request, default_model="m", profile=PROFILES["auto"])
    assert all("reasoning_content" not in m for m in plain["messages"])


def test_a_reply_limit_is_sent_under_the_name_each_server_takes() -> None:
    """A call's `max_tokens` (a final answer after a budget) goes to OpenAI's
    own API as `max_completion_tokens`, to the others as `max_tokens`, and
    not at all when unset or once a server refused it."""
    limited = LLMRequest(messages=TURNS[:1], max_tokens=256)
    sent = {
        name: payload(limited, default_model="m", profile=PROFILES[name])
        for name in ("openai", "auto", "vllm")
    }
    assert sent["openai"]["max_completion_tokens"] == 256
    assert "max_tokens" not in sent["openai"]
    assert sent["auto"]["max_tokens"] == sent["vllm"]["max_tokens"] == 256
    dropped = PROFILES["auto"].without("max_tokens")
    assert "max_tokens" not in payload(limited, default_model="m", profile=dropped)
    unset = payload(LLMRequest(messages=TURNS[:1]), default_model="m")
    assert "max_tokens" not in unset and "max_completion_tokens" not in unset


async def test_auto_learns_to_send_the_thinking_back_from_a_refusal(
    fake_openai: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A 400 asking for `reasoning_content` is answered by sending it, at once
    and from then on."""
    missing = (
        "Missing `reasoning_content` field in the assistant message at message "
        "index 5. For more information, please refer to the thinking mode guide."
    )
    fake_openai.script(
        ErrorReply(400, missing), Reply(content="Sun in Bergen."), Reply(content="ok")
    )
    llm = open_client(fake_openai)
    try:
        with caplog.at_level(logging.INFO, logger=LOG):
            reply = await llm.complete(LLMRequest(messages=TURNS))
            await llm.complete(LLMRequest(messages=TURNS))
    finally:
        await llm.aclose()
    assert reply.content == "Sun in Bergen."
    first, second, third = fake_openai.requests
    assert "reasoning_content" not in first["messages"][5]
    assert second["messages"][5]["reasoning_content"] == "Now Bergen."
    assert third["messages"][5]["reasoning_content"] == "Now Bergen."
    assert llm.profile.reasoning_back is True
    assert [r.getMessage() for r in caplog.records] == [
        f"the LLM server {llm.base_url} wants the thinking behind tool calls "
        f"sent back (profile auto): {missing}"
    ]
