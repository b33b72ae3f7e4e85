"""`LOOPWIRE_CORS_ORIGINS`: CORS headers for the HTTP API, only when set,
only for the listed origins, against a live server."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from backend.cli import settings_problem
from tests.conftest import Harness, StartServer, make_settings
from tests.fakes import ScriptedLLM, reason, test_registry

TOKEN = "cors-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
APP = "https://app.example.com"
PREFLIGHT = {
    "Origin": APP,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": (
        "authorization, content-type, x-loopwire-conversation"
    ),
}
ASK = {"model": "loopwire-react", "messages": [{"role": "user", "content": "hi"}]}


async def serve(start_server: StartServer, *script: Any, **settings: Any) -> Harness:
    return await start_server(
        ScriptedLLM(*script), test_registry(), auth_token=TOKEN, **settings
    )


def client(harness: Harness) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=harness.server.url(""), timeout=30)


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {
        name: value
        for name, value in response.headers.items()
        if name.startswith("access-control-")
    }


async def test_a_preflight_from_an_allowed_origin_is_answered(
    start_server: StartServer,
) -> None:
    """An allowed origin's preflight gets 200 and the API's methods, request
    headers and credentials, before authentication; nothing runs."""
    harness = await serve(start_server, cors_origins=f"{APP}, https://other.example")
    async with client(harness) as http:
        answer = await http.options("/v1/chat/completions", headers=PREFLIGHT)
    assert answer.status_code == 200
    assert cors_headers(answer) == {
        "access-control-allow-origin": APP,
        "access-control-allow-methods": "GET, POST, PATCH, DELETE",
        "access-control-allow-headers": (
            "Accept, Accept-Language, Authorization, Content-Language, "
            "Content-Type, Last-Event-ID, X-Loopwire-Conversation"
        ),
        "access-control-allow-credentials": "true",
        "access-control-max-age": "600",
    }
    assert harness.service.llm.requests == []


async def test_another_origin_gets_no_cors_headers(start_server: StartServer) -> None:
    """A preflight or a request from an unlisted origin is answered as if
    CORS were off: no CORS headers (the preflight, without a token, a 401)."""
    harness = await serve(start_server, cors_origins=APP)
    async with client(harness) as http:
        preflight = await http.options(
            "/v1/chat/completions",
            headers={**PREFLIGHT, "Origin": "https://evil.example"},
        )
        listing = await http.get(
            "/v1/models", headers={**AUTH, "Origin": "https://evil.example"}
        )
    assert (preflight.status_code, cors_headers(preflight)) == (401, {})
    assert (listing.status_code, cors_headers(listing)) == (200, {})


async def test_without_the_setting_there_are_no_cors_headers(
    start_server: StartServer,
) -> None:
    """Unset (the default), no response carries a CORS header."""
    harness = await serve(start_server)
    async with client(harness) as http:
        preflight = await http.options("/v1/chat/completions", headers=PREFLIGHT)
        listing = await http.get("/v1/models", headers={**AUTH, "Origin": APP})
    assert (preflight.status_code, cors_headers(preflight)) == (401, {})
    assert (listing.status_code, cors_headers(listing)) == (200, {})


async def test_a_completion_from_an_allowed_origin_may_be_read(
    start_server: StartServer,
) -> None:
    """A POST from an allowed origin passes the origin check and its answer
    names the origin and the headers a page may read."""
    harness = await serve(
        start_server, reason("x", finish=True, final="ok"), cors_origins=APP
    )
    async with client(harness) as http:
        answer = await http.post(
            "/v1/chat/completions", json=ASK, headers={**AUTH, "Origin": APP}
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "ok"
    assert cors_headers(answer) == {
        "access-control-allow-origin": APP,
        "access-control-allow-credentials": "true",
        "access-control-expose-headers": (
            "x-vercel-ai-ui-message-stream, X-Loopwire-Conversation"
        ),
    }
    assert answer.headers["vary"] == "Origin"


async def test_any_origin_is_allowed_without_credentials(
    start_server: StartServer,
) -> None:
    """With `*`, any origin's request passes and may be read (even a 401, so
    a page can show why), but credentials are never allowed."""
    harness = await serve(start_server, cors_origins="*")
    async with client(harness) as http:
        refused = await http.post(
            "/v1/chat/completions", json=ASK, headers={"Origin": "https://any.example"}
        )
        preflight = await http.options(
            "/api/agent", headers={**PREFLIGHT, "Origin": "https://any.example"}
        )
    assert refused.status_code == 401
    assert cors_headers(refused) == {
        "access-control-allow-origin": "*",
        "access-control-expose-headers": (
            "x-vercel-ai-ui-message-stream, X-Loopwire-Conversation"
        ),
    }
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in preflight.headers


async def test_pages_outside_the_api_get_no_cors_headers(
    start_server: StartServer,
) -> None:
    """Only `/api/` and `/v1/` answer cross-origin calls."""
    harness = await serve(start_server, cors_origins=APP)
    async with client(harness) as http:
        health = await http.get("/healthz", headers={"Origin": APP})
    assert (health.status_code, cors_headers(health)) == (200, {})


async def test_a_cors_origin_reaches_only_the_http_api(
    start_server: StartServer,
) -> None:
    """A listed origin may call the API, not open the WebSocket; from `*`, a
    call that carries a cookie is refused (a page may not ride on a
    signed-in browser), in the shape of the API it calls."""
    listed = await serve(start_server, cors_origins=APP)
    anyone = await serve(start_server, cors_origins="*")
    evil = {"Origin": "https://evil.example", "Cookie": "loopwire_session=x"}
    async with client(listed) as http, client(anyone) as other:
        handshake = await http.get(
            "/ws",
            headers={
                "Origin": APP,
                "Connection": "Upgrade",
                "Upgrade": "websocket",
                "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            },
        )
        ridden = await other.post("/v1/chat/completions", json=ASK, headers=evil)
        bare = await other.post(
            "/v1/chat/completions", json=ASK, headers={"Origin": evil["Origin"]}
        )
    assert handshake.status_code == 403
    assert (ridden.status_code, ridden.json()["error"]["code"]) == (
        403,
        "forbidden_origin",
    )
    assert bare.status_code == 401  # through the guard, then no token


@pytest.mark.parametrize(
    "value",
    [
        "https://app.example.com/chat",
        "https://app.example.com/",
        "app.example.com",
        "ftp://app.example.com",
        "https://app.example.com:99999",
        "https://app.example.com?x=1",
    ],
)
def test_a_bad_origin_refuses_to_start(value: str) -> None:
    """Anything but `*` or scheme://host[:port] is refused in one clear line."""
    with pytest.raises(ValidationError) as bad:
        make_settings(cors_origins=f"{APP}, {value}")
    assert settings_problem(bad.value) == (
        f"invalid setting LOOPWIRE_CORS_ORIGINS: {value!r} is not an origin: "
        "http(s)://host[:port] with no path, query or trailing slash "
        "(e.g. https://app.example.com), or *"
    )
