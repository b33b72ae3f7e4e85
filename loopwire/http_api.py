"""The server's HTTP API as the client's helpers call it: where it is
(`api_root`) and one blocking request (`call`, run in a thread by the
async helpers: `conversations`, `branches`, `shares`, `instructions`)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from loopwire.errors import ClientError, ConnectionFailed

TIMEOUT_S = 30


def api_root(url: str) -> str:
    """The server's HTTP root for `url`, a WebSocket URL (`ws://host/ws`)
    or an HTTP one."""
    parts = urllib.parse.urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/")
    if parts.scheme in ("ws", "wss") and path.endswith("/ws"):
        path = path[: -len("/ws")]
    return urllib.parse.urlunsplit((scheme, parts.netloc, path, "", ""))


def call(
    method: str,
    address: str,
    token: str | None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The JSON the server answers (None for 204 No Content). A refusal
    raises `ClientError` with the server's message; no answer,
    `ConnectionFailed`."""
    data = None if body is None else json.dumps(body).encode()
    if data is None and method != "GET":
        data = b""
    request = urllib.request.Request(address, data=data, method=method)
    request.add_header("Accept", "application/json")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            if response.status == 204:
                return None
            answer: dict[str, Any] = json.load(response)
            return answer
    except urllib.error.HTTPError as exc:
        raise ClientError(f"{exc.code}: {_message(exc)}") from exc
    except OSError as exc:
        raise ConnectionFailed(f"cannot talk to {address}: {exc}") from exc


def get(address: str, token: str | None) -> dict[str, Any]:
    """`call` for a GET that answers a JSON object."""
    answer = call("GET", address, token)
    if answer is None:
        raise ClientError(f"{address} answered with no content")
    return answer


def _message(exc: urllib.error.HTTPError) -> str:
    """The server's `message`, else its body as text."""
    body = exc.read().decode(errors="replace")
    try:
        return str(json.loads(body)["message"])
    except (ValueError, KeyError, TypeError):
        return body or str(exc.reason)
