"""Hosts and origins are checked before anything else, on every route.

Against a live server: crafted browser origins and a DNS-rebinding Host are
refused before a socket is accepted (no model call happens); a cross-site
POST to the approvals route is refused; loopback, configured and public
origins are served; every HTTP response carries the security headers.
"""

from __future__ import annotations

import asyncio
import base64
import os

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, test_registry

CRAFTED_ORIGINS = [
    "http://evil.example",
    "https://evil.example",
    "http://evil.example:8000",
    "null",
    "http://127.0.0.1.evil.example",
    "http://localhost.evil.example",
    "http://127.0.0.1@evil.example",
    "http://evil.example/127.0.0.1",
    "http://127.0.0.1:8000.evil.example",
    "http://evil.example#127.0.0.1",
    "file://",
    "chrome-extension://abcdefghijklmnop",
    "ws://127.0.0.1:8000",
    "javascript:alert(1)",
    "data:text/html,hi",
    "http://127.0.0.2",
    "http://0.0.0.0:8000",
    "http://[::2]",
    "http://10.0.0.1",
    "http://192.168.1.10:8000",
    "https://localhost.",
    "http://xn--80ak6aa92e.com",
    "http://" + "a" * 5000 + ".example",
]


async def served(
    start_server: StartServer, *replies: str, **settings: object
) -> tuple[Harness, ScriptedLLM]:
    """A server whose model answers `replies`, in turn."""
    llm = ScriptedLLM(*replies)
    return await start_server(llm, test_registry(), **settings), llm


async def handshake_status(harness: Harness, **headers: str) -> int:
    """The HTTP status a WebSocket handshake gets (101: accepted)."""
    try:
        async with connect(
            harness.server.url("/ws", scheme="ws"), additional_headers=headers
        ) as connection:
            await connection.recv()  # session_ready
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


async def raw_handshake(port: int, host: str) -> bytes:
    """A WebSocket handshake with any Host header; the status line back."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    status = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return status


async def test_crafted_origins_are_refused_before_the_handshake(
    start_server: StartServer,
) -> None:
    """Foreign, look-alike and non-web origins get 403 at handshake; no model call."""
    harness, llm = await served(start_server)
    statuses = {
        origin: await handshake_status(harness, Origin=origin)
        for origin in CRAFTED_ORIGINS
    }
    assert statuses == dict.fromkeys(CRAFTED_ORIGINS, 403)
    assert llm.requests == []


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1:5173", "http://localhost:8000", "https://[::1]", None],
)
async def test_loopback_origins_and_scripts_without_one_are_served(
    start_server: StartServer, origin: str | None
) -> None:
    """Loopback origins and clients sending no `Origin` complete the handshake."""
    harness, _ = await served(start_server)
    headers = {"Origin": origin} if origin else {}
    assert await handshake_status(harness, **headers) == 101


async def test_configured_and_public_origins_are_served(
    start_server: StartServer,
) -> None:
    """Allowed and public-URL origins connect; the public host on another port fails."""
    harness, _ = await served(
        start_server,
        allowed_origins="https://app.example",
        public_url="https://chat.example:8443",
    )
    assert await handshake_status(harness, Origin="https://app.example") == 101
    assert await handshake_status(harness, Origin="https://chat.example:8443") == 101
    assert await handshake_status(harness, Origin="https://chat.example") == 403


async def test_a_rebinding_host_is_refused_on_every_route(
    start_server: StartServer,
) -> None:
    """A foreign `Host` header gets 400 on socket, page and API, with no model call."""
    harness, llm = await served(start_server)
    port = harness.server.port
    assert port is not None
    assert (await raw_handshake(port, f"evil.example:{port}")).startswith(
        b"HTTP/1.1 400"
    )
    assert (await raw_handshake(port, f"127.0.0.1:{port}")).startswith(b"HTTP/1.1 101")
    async with httpx.AsyncClient() as http:
        page = await http.get(
            harness.server.url("/"), headers={"Host": f"evil.example:{port}"}
        )
        info = await http.get(
            harness.server.url("/api/info"), headers={"Host": "evil.example"}
        )
    assert page.status_code == info.status_code == 400
    assert page.json()["error_type"] == "forbidden_host"
    assert llm.requests == []


async def test_public_and_allowed_hosts_are_served(start_server: StartServer) -> None:
    """The public URL's host and allowed hosts, any port, are served; others get 400."""
    harness, _ = await served(
        start_server, public_url="https://chat.example", allowed_hosts="lan.example"
    )
    async with httpx.AsyncClient() as http:
        statuses = [
            (
                await http.get(harness.server.url("/healthz"), headers={"Host": h})
            ).status_code
            for h in ("chat.example", "lan.example:8000", "other.example")
        ]
    assert statuses == [200, 200, 400]


async def test_a_cross_site_post_to_the_approvals_route_is_refused(
    start_server: StartServer,
) -> None:
    """Approvals refuse a foreign origin (403) or non-JSON body (415) before lookup."""
    harness, _ = await served(start_server)
    url = harness.server.url("/api/sessions/" + "0" * 32 + "/approvals/call_1")
    async with httpx.AsyncClient() as http:
        cross_site = await http.post(
            url,
            content=b'{"approved": true}',
            headers={"Origin": "http://evil.example", "Content-Type": "text/plain"},
        )
        form = await http.post(
            url, content=b"approved=true", headers={"Content-Type": "text/plain"}
        )
        proper = await http.post(url, json={"approved": True})
    assert (cross_site.status_code, cross_site.json()["error_type"]) == (
        403,
        "forbidden_origin",
    )
    assert form.status_code == 415
    assert proper.status_code == 404  # past the checks: no such session


async def test_every_http_response_has_the_security_headers(
    start_server: StartServer,
) -> None:
    """Pages, API, health and 404 answers all carry nosniff, DENY, CSP and referrer."""
    harness, _ = await served(start_server)
    async with httpx.AsyncClient() as http:
        responses = [
            await http.get(harness.server.url(path))
            for path in ("/", "/healthz", "/api/info", "/no-such-page")
        ]
    for response in responses:
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert response.headers["referrer-policy"] == "same-origin"
