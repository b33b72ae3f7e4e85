"""`/v1/chat/completions` and `/v1/models`, driven by the official `openai`
Python SDK against a live server with a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from backend.app import create_app
from backend.transport.auth import SIGN_IN
from tests.cluster_harness import HEADER as INSTANCE
from tests.cluster_harness import ClusterHarness
from tests.conftest import Harness, StartServer, make_settings
from tests.fake_openai import FakeOpenAIServer
from tests.fakes import (
    Hang,
    Saver,
    ScriptedLLM,
    approval_registry,
    asks_which_unit,
    calls,
    observe,
    reason,
    test_registry,
)
from tests.live_server import serving
from tests.test_cluster import QUESTION, dropped_elsewhere
from tests.ws_client import labels

TOKEN = "openai-api-token-0123456789"
HEADER = "X-Loopwire-Conversation"
ADD = ("add", {"expression": "2+3"})


def one_step() -> list[Any]:
    return [
        reason("Add them.", tools=["add"]),
        calls(ADD),
        observe("It is 5.", should_continue=False, final="2 + 3 = 5"),
    ]


def usage_of(prompt_tokens: int, *replies: str) -> dict[str, int]:
    """The usage `ScriptedLLM` reports for `replies` (a word a token)."""
    words = sum(len(r.split()) for r in replies)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": words,
        "total_tokens": prompt_tokens + words,
    }


def one_step_usage() -> dict[str, int]:
    """`one_step()`'s three calls (the tool call has no text)."""
    return usage_of(30, *(r for r in one_step() if isinstance(r, str)))


ONE_STEP_REASONING = [
    "I will work it out.\n\n",
    '→ add({"expression": "2+3"})\n',
    '← add: {"expression": "2+3", "result": 5.0}\n\n',
    "The result is in.\n\n",
]


async def serve(
    start_server: StartServer, *script: Any, registry: Any = None, **settings: Any
) -> Harness:
    return await start_server(
        ScriptedLLM(*script),
        registry or test_registry(),
        auth_token=TOKEN,
        **settings,
    )


def sdk(harness: Harness, api_key: str = TOKEN) -> openai.AsyncOpenAI:
    return sdk_at(harness.server.url("/v1"), api_key)


def sdk_at(base_url: str, api_key: str = TOKEN) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def frames_of(harness: Harness, conversation: str) -> list[dict[str, Any]]:
    session = harness.service.sessions[conversation]
    return [json.loads(text) for _seq, text in session.outbox.after(0)]


async def run_ended(harness: Harness, conversation: str) -> None:
    session = harness.service.sessions[conversation]
    while session.run is not None:  # its end is being written
        await session.run.task


# ------------------------------------------------------------ models


async def test_each_loop_strategy_is_a_model(start_server: StartServer) -> None:
    """`/v1/models` lists one model per loop strategy, the default first."""
    harness = await serve(start_server)
    async with sdk(harness) as client:
        listed = await client.models.list()
    assert [(m.id, m.object, m.owned_by) for m in listed.data] == [
        ("loopwire-react", "model", "loopwire"),
        ("loopwire-act", "model", "loopwire"),
        ("loopwire-plan_execute", "model", "loopwire"),
        ("loopwire-llm_only", "model", "loopwire"),
    ]


# ------------------------------------------------------------ runs


async def test_a_completion_is_the_run_answer_and_its_phases(
    start_server: StartServer,
) -> None:
    """Non-streaming: the answer is `content`, the phases `reasoning_content`."""
    harness = await serve(start_server, *one_step())
    async with sdk(harness) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="loopwire-react", messages=user("2+3?")
        )
    answer = raw.parse()
    conversation = raw.headers[HEADER]
    (choice,) = answer.choices
    assert (choice.message.content, choice.finish_reason) == ("2 + 3 = 5", "stop")
    assert choice.message.reasoning_content == "".join(ONE_STEP_REASONING)  # type: ignore[attr-defined]
    assert answer.usage is not None
    assert answer.usage.model_dump(exclude_none=True) == one_step_usage()
    assert answer.object == "chat.completion" and answer.model == "loopwire-react"
    assert answer.system_fingerprint == conversation
    run = frames_of(harness, conversation)[0]["run_id"]
    assert answer.id == f"chatcmpl-{run}"
    assert harness.service.sessions[conversation].history[0].content == "2+3?"


async def test_a_stream_sends_phases_then_answer_then_usage(
    start_server: StartServer,
) -> None:
    """Streaming: role, each phase as a reasoning delta, the answer, stop, usage."""
    harness = await serve(start_server, *one_step())
    async with sdk(harness) as client:
        stream = await client.chat.completions.create(
            model="loopwire-react",
            messages=user("2+3?"),
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
    deltas = [
        (c.choices[0].delta.model_extra or {}).get("reasoning_content")
        or c.choices[0].delta.content
        for c in chunks
        if c.choices
    ]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert deltas == ["", *ONE_STEP_REASONING, "2 + 3 = 5", None]
    assert [c.choices[0].finish_reason for c in chunks[:-1]] == [None] * 6 + ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.model_dump(exclude_none=True) == one_step_usage()
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({(c.id, c.system_fingerprint) for c in chunks}) == 1


async def test_a_stateless_client_gives_its_history_to_a_new_conversation(
    start_server: StartServer,
) -> None:
    """Without an id the earlier messages precede the new one in the run's message."""
    harness = await serve(start_server, reason("x", finish=True, final="Hi again."))
    messages = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": [{"type": "text", "text": "Again?"}]},
    ]
    async with sdk(harness) as client:
        answer = await client.chat.completions.create(
            model="loopwire-react", messages=messages
        )
    assert answer.choices[0].message.content == "Hi again."
    assert answer.system_fingerprint is not None
    history = harness.service.sessions[answer.system_fingerprint].history
    assert history[0].content == (
        "The conversation so far, as the client sent it:\n\nuser: Hello\n\n"
        "assistant: Hi!\n\nThe user's new message:\n\nAgain?"
    )


# ------------------------------------------------------------ pauses


async def test_a_question_round_trips_by_conversation_id(
    start_server: StartServer,
) -> None:
    """A question ends the reply; the next message with the id answers it."""
    harness = await serve(
        start_server,
        *asks_which_unit(),
    )
    async with sdk(harness) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="loopwire-react",
            messages=user("convert 10 miles"),
            extra_headers={HEADER: "new"},
        )
        asked = raw.parse()
        conversation = raw.headers[HEADER]
        answered = await client.chat.completions.create(
            model="loopwire-react",
            messages=[
                *user("convert 10 miles"),
                {"role": "assistant", "content": "Which unit?"},
                *user("km"),
            ],
            metadata={"conversation_id": conversation},
        )
    assert (asked.choices[0].message.content, asked.choices[0].finish_reason) == (
        "Which unit?",
        "stop",
    )
    assert answered.choices[0].message.content == "16.09 km"
    assert asked.usage is not None and answered.usage is not None
    assert asked.usage.model_dump(exclude_none=True) == usage_of(20, reason("ask"))
    assert answered.usage.model_dump(exclude_none=True) == usage_of(
        20, observe("km it is"), reason("done", finish=True, final="16.09 km")
    )
    assert answered.system_fingerprint == conversation
    run_labels = labels(frames_of(harness, conversation))
    assert run_labels.count("agent_start") == 1  # one run, answered
    assert run_labels[-2:] == ["agent_completion", "response_complete"]
    history = harness.service.sessions[conversation].history
    assert [(m.role, m.content) for m in history] == [
        ("user", "convert 10 miles"),
        ("assistant", None),
        ("tool", "km"),  # the answer, the request_input call's result
        ("assistant", "16.09 km"),
    ]


async def test_an_approval_is_decided_by_the_next_message(
    start_server: StartServer,
) -> None:
    """With an id an approval ends the reply; "yes" runs the tool."""
    saver = Saver()
    harness = await serve(
        start_server,
        reason("save it"),
        calls(("save", {"text": "milk"})),
        observe(should_continue=False, final="Saved: milk."),
        registry=approval_registry(saver),
    )
    async with sdk(harness) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="loopwire-react",
            messages=user("remember milk"),
            extra_headers={HEADER: "new"},
        )
        conversation = raw.headers[HEADER]
        assert saver.saved == []
        decided = await client.chat.completions.create(
            model="loopwire-react",
            messages=user("Yes!"),
            extra_headers={HEADER: conversation},
        )
    assert raw.parse().choices[0].message.content == (
        'Approval needed: the agent wants to run save({"text": "milk"}) — '
        "Save a note (asks the user first).\nReply yes to run it, or no to decline."
    )
    assert decided.choices[0].message.content == "Saved: milk."
    assert saver.saved == ["milk"]


async def test_a_streamed_approval_declined_by_the_next_message(
    start_server: StartServer,
) -> None:
    """A streamed reply ends at the approval; "no" declines it and the tool never runs."""
    saver = Saver()
    harness = await serve(
        start_server,
        reason("save it"),
        calls(("save", {"text": "milk"})),
        "I did not save it.",
        registry=approval_registry(saver),
    )
    async with sdk(harness) as client:
        stream = await client.chat.completions.create(
            model="loopwire-react",
            messages=user("remember milk"),
            stream=True,
            extra_headers={HEADER: "new"},
        )
        first = [c async for c in stream]
        conversation = first[0].system_fingerprint
        assert conversation is not None
        decided = await client.chat.completions.create(
            model="loopwire-react",
            messages=user("no"),
            extra_headers={HEADER: conversation},
        )
    contents = [c.choices[0].delta.content for c in first if c.choices]
    assert contents[-2].startswith("Approval needed: the agent wants to run save(")
    assert first[-1].choices[0].finish_reason == "stop"
    message = decided.choices[0].message
    assert message.content == "I did not save it."
    assert message.reasoning_content == (  # type: ignore[attr-defined]
        "✗ save (rejected): the user declined to run save (reason: no)\n\n"
    )
    assert saver.saved == []


async def test_a_stateless_client_never_runs_a_tool_needing_approval(
    start_server: StartServer,
) -> None:
    """Without an id an approval is declined at once and the tool never runs."""
    saver = Saver()
    harness = await serve(
        start_server,
        reason("save it"),
        calls(("save", {"text": "milk"})),
        "I did not save it.",
        registry=approval_registry(saver),
    )
    async with sdk(harness) as client:
        answer = await client.chat.completions.create(
            model="loopwire-react", messages=user("remember milk")
        )
    message = answer.choices[0].message
    assert message.content == "I did not save it."
    assert message.reasoning_content.endswith(  # type: ignore[attr-defined]
        '→ save({"text": "milk"})\n✗ save (rejected): the user declined to run '
        "save (reason: this client sent no conversation id, so it cannot be "
        "asked; send X-Loopwire-Conversation to answer approvals)\n\n"
    )
    assert saver.saved == []
    assert answer.system_fingerprint is not None
    reasons = [
        f["reason"]
        for f in frames_of(harness, answer.system_fingerprint)
        if f.get("update_type") == "agent_completion"
    ]
    assert reasons == ["rejected"]


async def test_a_stateless_question_ends_the_reply_and_its_run(
    start_server: StartServer,
) -> None:
    """Without an id a question is the streamed reply's content and the run stops."""
    harness = await serve(
        start_server,
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
    )
    async with sdk(harness) as client:
        stream = await client.chat.completions.create(
            model="loopwire-react", messages=user("convert 10 miles"), stream=True
        )
        chunks = [c async for c in stream]
    contents = [c.choices[0].delta.content for c in chunks]
    assert contents == ["", None, "Which unit?", None]
    assert chunks[-1].choices[0].finish_reason == "stop"
    conversation = chunks[0].system_fingerprint
    assert conversation is not None
    await run_ended(harness, conversation)
    ends = [
        (f.get("update_type"), f.get("reason"))
        for f in frames_of(harness, conversation)
        if f.get("update_type") in ("agent_stopped", "agent_completion")
    ]
    assert ends == [("agent_stopped", None), ("agent_completion", "stopped")]


async def test_closing_the_stream_stops_the_run(start_server: StartServer) -> None:
    """A client that closes its stream mid-run stops the run."""
    hang = Hang()
    harness = await serve(start_server, hang)
    async with sdk(harness) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="loopwire-react", messages=user("go"), stream=True
        )
        conversation = raw.headers[HEADER]
        stream = raw.parse()
        first = await stream.__anext__()
        await hang.started.wait()
        await stream.close()
    assert first.choices[0].delta.role == "assistant"
    await hang.cancelled.wait()
    await run_ended(harness, conversation)
    ends = [
        (f.get("update_type"), f.get("reason"))
        for f in frames_of(harness, conversation)
        if f.get("update_type") in ("agent_stopped", "agent_completion")
    ]
    assert ends == [("agent_stopped", None), ("agent_completion", "stopped")]


async def test_a_question_survives_a_restart_and_resumes(tmp_path: Path) -> None:
    """A question asked over `/v1` outlives its server; the next message by
    the same conversation id answers it and the same run finishes."""
    settings = make_settings(
        database_url=f"sqlite:///{tmp_path / 'loopwire.db'}", auth_token=TOKEN
    )
    asking = ScriptedLLM(*asks_which_unit()[:2])
    app = create_app(settings, llm=asking, registry=test_registry())
    async with (
        serving(app, settings=settings) as server,
        sdk_at(server.url("/v1")) as client,
    ):
        raw = await client.chat.completions.with_raw_response.create(
            model="loopwire-react",
            messages=user("convert 10 miles"),
            extra_headers={HEADER: "new"},
        )
    asked, conversation = raw.parse(), raw.headers[HEADER]

    again = ScriptedLLM(*asks_which_unit()[2:])
    app = create_app(settings, llm=again, registry=test_registry())
    async with serving(app, settings=settings) as server:
        async with sdk_at(server.url("/v1")) as client:
            answered = await client.chat.completions.create(
                model="loopwire-react",
                messages=user("km"),
                extra_headers={HEADER: conversation},
            )
        session = app.state.chat.sessions[conversation]
        frames = [json.loads(text) for _seq, text in session.outbox.after(0)]
    assert (asked.choices[0].message.content, asked.choices[0].finish_reason) == (
        "Which unit?",
        "stop",
    )
    assert (answered.choices[0].message.content, answered.id) == ("16.09 km", asked.id)
    assert answered.system_fingerprint == conversation
    run = asked.id.removeprefix("chatcmpl-")
    ends = [
        (f["update_type"], f.get("reason"))
        for f in frames
        if f.get("run_id") == run and f.get("update_type") == "agent_completion"
    ]
    assert ends == [("agent_completion", "finished")]
    answered_messages = [(m.role, m.content) for m in again.requests[0].messages[1:4]]
    assert answered_messages == [
        ("user", "convert 10 miles"),
        ("assistant", None),
        ("tool", "km"),
    ]


# ------------------------------------------------------------ refusals


async def test_a_token_is_required(start_server: StartServer) -> None:
    """Without the server's token the SDK gets a 401 in OpenAI's shape with
    loopwire's message, and no model is called."""
    harness = await serve(start_server)
    async with sdk(harness, api_key="wrong") as client:
        with pytest.raises(openai.AuthenticationError) as completion:
            await client.chat.completions.create(
                model="loopwire-react", messages=user("hi")
            )
        with pytest.raises(openai.AuthenticationError) as listing:
            await client.models.list()
    expected = {
        "message": SIGN_IN,
        "type": "invalid_request_error",
        "param": None,
        "code": "unauthorized",
    }
    for refused in (completion.value, listing.value):
        assert refused.status_code == 401 and refused.body == expected
        assert (refused.code, refused.type, refused.param) == (
            "unauthorized",
            "invalid_request_error",
            None,
        )
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        bare = await http.get("/v1/models")
    assert bare.status_code == 401
    assert bare.json() == {"error": expected}
    assert bare.headers["www-authenticate"] == 'Bearer realm="loopwire"'
    assert harness.service.llm.requests == []


async def test_too_many_wrong_tokens_is_a_rate_limit_error(
    start_server: StartServer,
) -> None:
    """Past the wrong-credential budget the SDK gets OpenAI's 429 with
    `Retry-After`, before any token is compared."""
    harness = await serve(start_server, auth_failures_per_minute=1)
    async with sdk(harness, api_key="wrong") as client:
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()
        with pytest.raises(openai.RateLimitError) as limited:
            await client.models.list()
    error = limited.value
    assert (error.status_code, error.code, error.type, error.param) == (
        429,
        "rate_limited",
        "rate_limit_error",
        None,
    )
    assert isinstance(error.body, dict)
    assert error.body["message"].startswith("too many wrong credentials")
    assert int(error.response.headers["Retry-After"]) > 0


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        (
            {"messages": []},
            "messages",
            "List should have at least 1 item after validation, not 0",
        ),
        (
            {"messages": [{"role": "assistant", "content": "hi"}]},
            "messages",
            "the last message must be the user's, with text",
        ),
        (
            {"stream": "yes"},
            "stream",
            "Input should be a valid boolean",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": "f"}}]},
            "tools",
            "loopwire runs its own tools: send the request without tools",
        ),
        (
            {"n": 2},
            "n",
            "loopwire makes one choice per request: leave n out or 1",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages.0.content",
            "only text parts ({type: text, text}) are taken",
        ),
    ],
)
async def test_a_bad_body_is_a_400_in_openai_shape(
    start_server: StartServer, body: dict[str, Any], param: str, message: str
) -> None:
    """Each bad field is a `BadRequestError` naming it, and nothing runs."""
    harness = await serve(start_server)
    request = {"model": "loopwire-react", "messages": user("hi"), **body}
    async with sdk(harness) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.post("/chat/completions", body=request, cast_to=object)
    error = refused.value
    assert (error.status_code, error.code, error.type) == (
        400,
        "invalid_message",
        "invalid_request_error",
    )
    assert error.param == param
    assert isinstance(error.body, dict)
    assert error.body["message"].endswith(f"{param}: {message}")
    assert harness.service.llm.requests == []


async def test_what_loopwire_refuses_is_an_openai_error(
    start_server: StartServer,
) -> None:
    """Unknown models are 404, refused system prompts 400, past the run limit 429."""
    harness = await serve(
        start_server,
        reason("x", finish=True, final="ok"),
        client_system_prompts=False,
        runs_per_minute=1,
        run_burst=1,
    )
    system = [{"role": "system", "content": "Be brief."}, *user("hi")]
    async with sdk(harness) as client:
        with pytest.raises(openai.NotFoundError) as unknown:
            await client.chat.completions.create(model="gpt-4o", messages=user("hi"))
        with pytest.raises(openai.NotFoundError) as no_upstream:
            await client.chat.completions.create(
                model="loopwire-react:nope", messages=user("hi")
            )
        with pytest.raises(openai.BadRequestError) as no_system:
            await client.chat.completions.create(
                model="loopwire-react", messages=system
            )
        with pytest.raises(openai.BadRequestError) as bad_id:
            await client.chat.completions.create(
                model="loopwire-react",
                messages=user("hi"),
                metadata={"conversation_id": "x"},
            )
        await client.chat.completions.create(
            model="loopwire-react", messages=user("hi")
        )
        with pytest.raises(openai.RateLimitError) as limited:
            await client.chat.completions.create(
                model="loopwire-react", messages=user("hi")
            )
    assert unknown.value.code == no_upstream.value.code == "model_not_found"
    assert no_system.value.body["message"] == (  # type: ignore[index]
        "this server does not take system messages from clients "
        "(LOOPWIRE_CLIENT_SYSTEM_PROMPTS=false); send the messages without them"
    )
    assert bad_id.value.body["message"] == (  # type: ignore[index]
        "a conversation id is 32 lowercase hex digits (or new, to start one)"
    )
    assert limited.value.type == "rate_limit_error"
    assert int(limited.value.response.headers["Retry-After"]) > 0


async def test_a_question_is_answered_through_another_instance(
    offline_cluster: ClusterHarness,
) -> None:
    """Behind nginx, the answer to a question, sent by conversation id through
    an instance that does not own the conversation, reaches the waiting run,
    which goes on where its owner keeps it and finishes."""
    cluster = offline_cluster
    ask = {"model": "loopwire-react", "messages": user(QUESTION[0])}
    first = await cluster.request(
        "POST", "/v1/chat/completions", json=ask, headers={HEADER: "new"}
    )
    assert first.status_code == 200, first.text
    owner, conversation = first.headers[INSTANCE], first.headers[HEADER]
    question = first.json()["choices"][0]
    assert question["finish_reason"] == "stop" and "?" in question["message"]["content"]

    await cluster.after(owner)
    answer = {"model": "loopwire-react", "messages": user("km")}
    second = await cluster.request(
        "POST",
        "/v1/chat/completions",
        json=answer,
        headers={HEADER: conversation},
    )
    assert second.status_code == 200, second.text
    assert second.headers[INSTANCE] != owner
    assert second.headers[HEADER] == conversation
    reply = second.json()["choices"][0]
    assert reply["finish_reason"] == "stop"
    assert "16.09" in reply["message"]["content"]


async def test_an_abort_through_another_instance_stops_the_run(
    pg_database_url: str, redis_url: str, fake_openai: FakeOpenAIServer
) -> None:
    """Behind nginx, a chunk stream closed on an instance that does not own
    the conversation stops the run its owner runs."""
    ask = {"model": "loopwire-react", "messages": user("think hard"), "stream": True}
    dropped = await dropped_elsewhere(
        pg_database_url,
        redis_url,
        fake_openai,
        "/v1/chat/completions",
        lambda conversation: {"json": ask, "headers": {HEADER: conversation}},
    )
    assert dropped.headers[HEADER] == dropped.conversation
    first = json.loads(dropped.first.removeprefix("data: "))
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}


async def test_a_form_question_names_its_choices_and_checks_the_answer(
    start_server: StartServer,
) -> None:
    """A question with choices says them in the reply; an answer outside
    them is a 422 in OpenAI's shape, and a fitting one goes on."""
    unit = {"type": "string", "enum": ["km", "mi"]}
    harness = await serve(
        start_server,
        reason("ask"),
        calls(("request_input", {"question": "Which unit?", "answer_schema": unit})),
        observe("km", should_continue=False, final="16.09 km"),
    )
    async with sdk(harness) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="loopwire-react",
            messages=user("convert 10 miles"),
            extra_headers={HEADER: "new"},
        )
        conversation = raw.headers[HEADER]
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            await client.chat.completions.create(
                model="loopwire-react",
                messages=user("leagues"),
                extra_headers={HEADER: conversation},
            )
        answered = await client.chat.completions.create(
            model="loopwire-react",
            messages=user("km"),
            extra_headers={HEADER: conversation},
        )
    assert raw.parse().choices[0].message.content == "Which unit? (one of: km, mi)"
    assert refused.value.code == "invalid_answer"
    assert answered.choices[0].message.content == "16.09 km"
