"""`Incidents`: the outermost middleware. Every HTTP response carries an
`X-Request-ID`; a request that fails unexpectedly is logged with its id and
traceback, and the client gets a JSON 500 naming only the id — never a
stack trace, an exception's text or a path on the server."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.errors import incident
from backend.transport.refusal import http_refusal

log = logging.getLogger(__name__)


class Incidents:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = incident()
        started = False

        async def labelled(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, labelled)
        except Exception:
            log.exception(
                "request %s: %s %s failed", request_id, scope["method"], scope["path"]
            )
            if started:  # too late for a status: the response ends cut short
                return
            await http_refusal(
                send,
                500,
                "internal_error",
                f"something went wrong on the server (incident {request_id}; "
                "the server log has the details)",
                [(b"x-request-id", request_id.encode())],
                path=scope["path"],
            )
