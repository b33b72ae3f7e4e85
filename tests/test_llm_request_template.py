"""The chat completions request built once (`openai_compat/request_template.py`):
what reaches the server, and what a failure raises, are the SDK's own.

A recording server answers two clients made alike: `TemplatedOpenAI` (what
`OpenAIClient` holds) and the SDK's `openai.AsyncOpenAI` posting the same
bodies as `OpenAIClient` did before the template. Every request must reach
the server the same — method, path, every header in order, body — and a
refusal must raise the same exception, with the same body; also when the
API key changes between calls, and when the server has set a cookie (the
SDK then sends it back, so the request is the SDK's to build).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import pytest

from backend.llm.openai_compat.request_template import TemplatedOpenAI
from tests.live_server import serving

BODIES = [
    b'{"model":"m","messages":[]}',
    json.dumps({"messages": [{"role": "user", "content": "é ✓ " * 3000}]}).encode(),
    b'{"refuse":"stream_options"}',
    b"{}",
]
"""Bodies of every size, one not ASCII, one the server refuses."""

Seen = tuple[str, str, list[tuple[bytes, bytes]], bytes]


@dataclass
class Recorder:
    """An ASGI server that keeps every request it gets, and answers 200 (or
    400 naming the parameter a body asks it to refuse)."""

    seen: list[Seen] = field(default_factory=list)
    cookie: bytes | None = None
    """Set on every answer when given."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.seen.append((scope["method"], scope["path"], scope["headers"], body))
        status, answer = 200, b'{"id":"x","choices":[]}'
        refused = json.loads(body).get("refuse")
        if refused:
            error = {"message": f"{refused} is not supported", "param": refused}
            status, answer = 400, json.dumps({"error": error}).encode()
        headers = [(b"content-type", b"application/json")]
        if self.cookie is not None:
            headers.append((b"set-cookie", self.cookie))
        await send(
            {"type": "http.response.start", "status": status, "headers": headers}
        )
        await send({"type": "http.response.body", "body": answer})


def sdk_client(cls: type[openai.AsyncOpenAI], base_url: str) -> openai.AsyncOpenAI:
    """An SDK client as `OpenAIClient` makes its own."""
    http_client = openai.DefaultAioHttpClient(timeout=30.0)
    return cls(
        api_key="first",
        base_url=base_url,
        timeout=30.0,
        max_retries=0,
        http_client=http_client,
    )


async def before(sdk: openai.AsyncOpenAI, body: bytes, stream: bool) -> httpx2.Response:
    """How `OpenAIClient` posted a body before the template."""
    return await sdk.post(
        "/chat/completions",
        cast_to=httpx2.Response,
        content=body,
        options={"headers": {"Content-Type": "application/json"}},
        stream=stream,
    )


async def templated(
    sdk: openai.AsyncOpenAI, body: bytes, stream: bool
) -> httpx2.Response:
    assert isinstance(sdk, TemplatedOpenAI)
    return await sdk.post_chat_completions(body, stream=stream)


async def outcome(
    post: Any, sdk: openai.AsyncOpenAI, body: bytes, stream: bool
) -> tuple[object, ...]:
    """What posting `body` came to: the answer's status and body, or the
    exception's type, text, status and body."""
    try:
        response = await post(sdk, body, stream)
    except openai.APIStatusError as exc:
        return type(exc), str(exc), exc.status_code, exc.body
    content = await response.aread()
    await response.aclose()
    return response.status_code, content


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[Recorder, str]]:
    app = Recorder()
    async with serving(app, lifespan="off") as server:
        yield app, server.url("/v1")


async def both_send(
    app: Recorder, pair: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI]
) -> None:
    """Each body, streamed or not, from each client in turn: the same at the
    server, and the same outcome."""
    for stream in (False, True):
        for body in BODIES:
            mine = await outcome(templated, pair[0], body, stream)
            sdks = await outcome(before, pair[1], body, stream)
            assert mine == sdks
            assert app.seen[-2] == app.seen[-1]
            assert app.seen[-1][3] == body


@pytest.fixture
async def pair(
    recorder: tuple[Recorder, str],
) -> AsyncIterator[tuple[openai.AsyncOpenAI, openai.AsyncOpenAI]]:
    _, base_url = recorder
    mine = sdk_client(TemplatedOpenAI, base_url)
    sdks = sdk_client(openai.AsyncOpenAI, base_url)
    yield mine, sdks
    await mine.close()
    await sdks.close()


async def test_every_request_reaches_the_server_as_the_sdk_builds_it(
    recorder: tuple[Recorder, str],
    pair: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI],
) -> None:
    """Bodies of every size, streamed or not, a refusal among them: the same
    requests at the server, and the same `BadRequestError` for the refusal."""
    app, _ = recorder
    await both_send(app, pair)
    assert len(app.seen) == 2 * 2 * len(BODIES)
    refusal = await outcome(templated, pair[0], BODIES[2], stream=False)
    assert refusal[:3] == (
        openai.BadRequestError,
        "Error code: 400 - stream_options is not supported",
        400,
    )
    headers = dict(app.seen[-1][2])
    assert headers[b"authorization"] == b"Bearer first"
    assert headers[b"user-agent"].startswith(b"AsyncOpenAI/Python ")


async def test_a_new_api_key_is_sent_from_the_next_request_on(
    recorder: tuple[Recorder, str],
    pair: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI],
) -> None:
    """The key is part of what the template stands for: changed, the next
    request carries the new one, as the SDK's does."""
    app, _ = recorder
    await both_send(app, pair)
    for sdk in pair:
        sdk.api_key = "second"
    await both_send(app, pair)
    assert dict(app.seen[-1][2])[b"authorization"] == b"Bearer second"


async def test_a_cookie_the_server_set_is_sent_back_as_the_sdk_does(
    recorder: tuple[Recorder, str],
    pair: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI],
) -> None:
    """Once the server has set a cookie, the SDK's HTTP client sends it with
    every request; so do the requests built from the template."""
    app, _ = recorder
    await both_send(app, pair)
    app.cookie = b"lb=node-2; Path=/"
    await both_send(app, pair)
    assert dict(app.seen[-1][2])[b"cookie"] == b"lb=node-2"
