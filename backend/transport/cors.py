"""Cross-origin calls to the HTTP API, when `LOOPWIRE_CORS_ORIGINS` names
the origins whose pages may make them (off by default).

Starlette's `CORSMiddleware` answers for the API's paths (`/api/`, `/v1/`)
only, and only for a request from one of those origins; anything else goes
on as if CORS were off: no CORS headers at all. A page may send the
headers the API reads (`Authorization`, `Content-Type`, `Last-Event-ID`,
`X-Loopwire-Conversation`) and read the ones the adapters answer with
(`x-vercel-ai-ui-message-stream`, `X-Loopwire-Conversation`). Credentials
(cookies) are allowed only for a list of origins, never for `*`.

It sits inside the `Guard`, which checks the host first and lets a CORS
origin's calls of the API through (from `*` only without a cookie), and
outside `Authenticate`,
so a preflight, which carries no credentials, is answered before them.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.settings import Settings

API_PATHS = ("/api/", "/v1/")
METHODS = ("GET", "POST", "PATCH", "DELETE")
REQUEST_HEADERS = (
    "Authorization",
    "Content-Type",
    "Last-Event-ID",
    "X-Loopwire-Conversation",
)
RESPONSE_HEADERS = ("x-vercel-ai-ui-message-stream", "X-Loopwire-Conversation")


def cors_middleware(settings: Settings) -> list[Middleware]:
    """`Cors` when `LOOPWIRE_CORS_ORIGINS` is set, else nothing."""
    return [Middleware(Cors, origins=settings.cors)] if settings.cors else []


class Cors:
    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=origins,
            allow_methods=METHODS,
            allow_headers=REQUEST_HEADERS,
            allow_credentials="*" not in origins,
            expose_headers=RESPONSE_HEADERS,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._answers(scope):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _answers(self, scope: Scope) -> bool:
        """An HTTP request to the API from an allowed origin."""
        if scope["type"] != "http" or not scope["path"].startswith(API_PATHS):
            return False
        origin = Headers(scope=scope).get("origin")
        return origin is not None and self.cors.is_allowed_origin(origin)
