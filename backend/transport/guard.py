"""`Guard`: the ASGI middleware every request passes first.

- **Host**: only the names the server is meant to be reached by — the
  loopback names, the host of `LOOPWIRE_PUBLIC_URL`, and
  `LOOPWIRE_ALLOWED_HOSTS` — so a page on another site cannot reach it
  through DNS rebinding (its requests carry the attacker's host name).
- **Origin**: a WebSocket handshake or a state-changing HTTP request from a
  browser must come from an allowed origin: a loopback origin, the public
  URL's, or one in `LOOPWIRE_ALLOWED_ORIGINS`. It is never compared with the
  Host header, which the attacker controls. An origin of
  `LOOPWIRE_CORS_ORIGINS` may also call the HTTP API (`/api/`, `/v1/`, not
  the WebSocket or the UI); with `*`, only a request without a cookie
  (a bearer token it must know), so no page rides on a signed-in browser.
- Refusals happen before anything else: an HTTP error, or for a WebSocket
  a refused handshake (HTTP 403 with a JSON reason where the server allows
  one), so no socket is accepted and no model is called.
- Every HTTP response gets `nosniff`, a no-framing policy and
  `Referrer-Policy: same-origin` (a browser sends `Origin: null` on a
  form post under `no-referrer`, and nothing leaves for other sites either way).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.settings import Settings
from backend.text import shorten
from backend.transport.cors import API_PATHS
from backend.transport.refusal import (
    SECURITY_HEADERS,
    handshake_refusal,
    http_refusal,
)

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
LOOPBACK_ORIGIN = re.compile(
    r"https?://(?:localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?"
)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SHOWN = 80
"""Characters of a refused host or origin quoted back."""


def hostname(host: str) -> str:
    """`example.com:8000` → `example.com`; `[::1]:8000` → `::1`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, _, port = host.rpartition(":")
    return name if name and port.isdigit() else host


class Policy:
    """Which hosts and origins the settings allow."""

    def __init__(self, settings: Settings) -> None:
        public = urlsplit(settings.public_url) if settings.public_url else None
        self.hosts = {hostname(h) for h in settings.hosts}
        self.origins = {o.rstrip("/").lower() for o in settings.origins}
        self.cors = set(settings.cors)
        if public is not None and public.hostname:
            self.hosts.add(public.hostname.lower())
            self.origins.add(f"{public.scheme}://{public.netloc}".lower())

    def host_allowed(self, host: str) -> bool:
        name = hostname(host)
        return "*" in self.hosts or name in LOOPBACK or name in self.hosts

    def origin_allowed(self, origin: str) -> bool:
        origin = origin.rstrip("/").lower()
        if "*" in self.origins or origin in self.origins:
            return True
        return LOOPBACK_ORIGIN.fullmatch(origin) is not None

    def cors_allowed(self, origin: str, scope: Scope, headers: Headers) -> bool:
        """A cross-origin call of the HTTP API that `LOOPWIRE_CORS_ORIGINS`
        allows."""
        if scope["type"] != "http" or not scope["path"].startswith(API_PATHS):
            return False
        origin = origin.rstrip("/").lower()
        return origin in self.cors or ("*" in self.cors and "cookie" not in headers)


class Guard:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.policy = Policy(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        problem = self._problem(scope, headers)
        if problem is not None:
            status, error_type, message = problem
            if kind == "http":
                await http_refusal(
                    send, status, error_type, message, path=scope["path"]
                )
            else:
                await handshake_refusal(
                    scope, receive, send, status, error_type, message
                )
            return
        if kind == "websocket":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [h for h in SECURITY_HEADERS if h[0] not in present]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, secured)

    def _problem(self, scope: Scope, headers: Headers) -> tuple[int, str, str] | None:
        host = headers.get("host", "")
        if not self.policy.host_allowed(host):
            return (
                400,
                "forbidden_host",
                f"host {shorten(host, SHOWN)} is not served here "
                "(LOOPWIRE_PUBLIC_URL or LOOPWIRE_ALLOWED_HOSTS name the hosts "
                "this server answers to)",
            )
        origin = headers.get("origin")
        changes = scope["type"] == "websocket" or scope["method"] not in SAFE_METHODS
        if (
            origin
            and changes
            and not self.policy.origin_allowed(origin)
            and not self.policy.cors_allowed(origin, scope, headers)
        ):
            return (
                403,
                "forbidden_origin",
                f"origin {shorten(origin, SHOWN)} is not allowed "
                f"(LOOPWIRE_ALLOWED_ORIGINS lists the ones that are{_cors(scope)})",
            )
        return None


def _cors(scope: Scope) -> str:
    """Where a call of the HTTP API may look besides."""
    api = scope["type"] == "http" and scope["path"].startswith(API_PATHS)
    return "; LOOPWIRE_CORS_ORIGINS, the ones that may call the API" if api else ""
