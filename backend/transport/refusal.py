"""Refusing a request before any route runs: an HTTP error with a JSON body,
or for a WebSocket a refused handshake (no socket is ever accepted).

Bodies are `{"error_type": ..., "message": ...}`, like every HTTP error."""

from __future__ import annotations

import json
from collections.abc import Sequence

from starlette.types import Receive, Scope, Send

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"referrer-policy", b"same-origin"),
]
Header = tuple[bytes, bytes]


def body(error_type: str, message: str) -> bytes:
    return json.dumps({"error_type": error_type, "message": message}).encode()


async def http_refusal(
    send: Send,
    status: int,
    error_type: str,
    message: str,
    headers: Sequence[Header] = (),
) -> None:
    content = body(error_type, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(content)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": content})


async def handshake_refusal(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    error_type: str,
    message: str,
    headers: Sequence[Header] = (),
) -> None:
    """Refuse a WebSocket handshake with `status` and a JSON reason where the
    server supports it (uvicorn does), else with a bare HTTP 403."""
    await receive()  # websocket.connect
    if "websocket.http.response" in scope.get("extensions", {}):
        content = body(error_type, message)
        await send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(content)).encode()),
                    *headers,
                ],
            }
        )
        await send({"type": "websocket.http.response.body", "body": content})
        return
    await send({"type": "websocket.close", "code": 1008})
