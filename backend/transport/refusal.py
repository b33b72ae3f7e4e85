"""Refusing a request, the one way each layer has.

- A route raises `Refused`; `create_app` registers `answer_refused`, the
  one handler that turns it into the JSON response.
- A middleware, before any route runs, sends `http_refusal`, or for a
  WebSocket `handshake_refusal` (no socket is ever accepted).

Bodies are `{"error_type": ..., "message": ...}`, like every HTTP error,
except under `/v1/` (the OpenAI-compatible API), where they are OpenAI's
`{"error": {"message", "type", "param", "code"}}` (`openai_body`), so an
OpenAI client reads a middleware's refusal as it reads the routes'."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from backend.errors import BudgetExhausted, LoopwireError, ProtocolError
from backend.transport.limits import Limited

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"referrer-policy", b"same-origin"),
]
Header = tuple[bytes, bytes]
STATUS = {
    "invalid_message": 400,
    "invalid_answer": 422,
    "busy": 409,
    "no_pending_input": 409,
    "no_pending_approval": 409,
    "no_active_run": 409,
    "store_error": 503,
    "unavailable": 503,
    "moved": 503,
    "budget_exhausted": 429,
}
"""The status for each refusal of the chat service (`ProtocolError.error_type`)."""


class Refused(LoopwireError):
    """A route refuses its request: `answer_refused` sends `status`, the
    JSON `{"error_type", "message"}` (and `fields`, naming a body's bad
    fields) and `headers`."""

    def __init__(
        self,
        status: int,
        error_type: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        *,
        fields: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = dict(headers or {})
        self.fields = fields

    @classmethod
    def by_service(cls, exc: ProtocolError) -> Refused:
        """The chat service's refusal, with its status (400 if unlisted); a
        spent daily budget's says when to try again (`Retry-After`)."""
        headers = {}
        if isinstance(exc, BudgetExhausted):
            wait = max(math.ceil(exc.resets_at - time.time()), 1)
            headers["Retry-After"] = str(wait)
        status = STATUS.get(exc.error_type, 400)
        return cls(status, exc.error_type, str(exc), headers)

    @classmethod
    def limited(cls, exc: Limited) -> Refused:
        """429 for a client past one of its limits, with `Retry-After` when
        waiting helps."""
        retry = {} if exc.retry_after is None else {"Retry-After": exc.retry_after}
        return cls(429, exc.error_type, str(exc), retry)

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error_type": self.error_type, "message": self.message}
        if self.fields is not None:
            body["fields"] = self.fields
        return body


async def answer_refused(request: Request, exc: Exception) -> Response:
    """The response to a route's `Refused` (the app's exception handler)."""
    if not isinstance(exc, Refused):  # registered for `Refused` only
        raise exc
    response = JSONResponse(exc.body(), status_code=exc.status)
    response.headers.update(exc.headers)
    return response


OPENAI_PATHS = "/v1/"
"""The OpenAI-compatible API's paths: refusals there are in OpenAI's shape."""


def openai_body(
    status: int, error_type: str, message: str, param: str | None = None
) -> dict[str, Any]:
    """A refusal in OpenAI's shape: `code` is loopwire's `error_type`,
    `type` OpenAI's class of error for `status`."""
    kind = "invalid_request_error"
    if status == 429:
        kind = "rate_limit_error"
    elif status >= 500:
        kind = "server_error"
    error = {"message": message, "type": kind, "param": param, "code": error_type}
    return {"error": error}


def body(error_type: str, message: str) -> bytes:
    return json.dumps({"error_type": error_type, "message": message}).encode()


def body_for(path: str | None, status: int, error_type: str, message: str) -> bytes:
    """A refusal's body as the API at `path` speaks (loopwire's if unknown)."""
    if path is not None and path.startswith(OPENAI_PATHS):
        return json.dumps(openai_body(status, error_type, message)).encode()
    return body(error_type, message)


async def _refusal(
    send: Send, kind: str, status: int, content: bytes, headers: Sequence[Header]
) -> None:
    """A JSON refusal as ASGI messages of `kind` (`http` or `websocket.http`)."""
    start_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
        *headers,
    ]
    await send(
        {"type": f"{kind}.response.start", "status": status, "headers": start_headers}
    )
    await send({"type": f"{kind}.response.body", "body": content})


async def http_refusal(
    send: Send,
    status: int,
    error_type: str,
    message: str,
    headers: Sequence[Header] = (),
    *,
    path: str | None = None,
) -> None:
    """A JSON refusal in the shape of the API at `path` (`body_for`)."""
    extra = [(b"cache-control", b"no-store"), *headers, *SECURITY_HEADERS]
    content = body_for(path, status, error_type, message)
    await _refusal(send, "http", status, content, extra)


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
        await _refusal(send, "websocket.http", status, content, headers)
        return
    await send({"type": "websocket.close", "code": 1008})
