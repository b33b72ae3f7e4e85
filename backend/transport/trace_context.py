"""`TraceContext`: a request's W3C `traceparent` header is honoured.

Installed only when traces are on. The caller's context is made current
for the whole request (a WebSocket: the whole connection), so what it
starts is traced under the caller's span: a run started by
`POST /api/agent`, a stop sent over HTTP and forwarded to the instance that
owns the run. A malformed header is ignored, as the W3C specification asks.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from backend.telemetry.tracing import continued


class TraceContext:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            for name, value in scope["headers"]:
                if name == b"traceparent":
                    with continued(value.decode("latin-1")):
                        await self.app(scope, receive, send)
                    return
        await self.app(scope, receive, send)
