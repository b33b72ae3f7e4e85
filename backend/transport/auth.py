"""`Authenticate`: who is asking, for every request that passes the `Guard`.

With authentication on (`Identities.enabled`), a request names its user
with `Authorization: Bearer <token>` (a token of the tokens file, or a JWT
from the identity provider: scripts) or the session cookie of a sign-in
(browsers); tokens never travel in URLs. Without it, every caller is the
user `local`, an admin. The user and their role are put in the ASGI scope
for the routes (`user_of`, `role_of`), which scope everything they touch to
that user.

Wrong credentials spend a bucket of the client address (`Guesses`); once
it is empty, requests that carry credentials get 429 with `Retry-After`
before any is compared.

Only `/healthz` (bare liveness), the login routes, the static files (the
repository's own, the same for everyone) and reading a share link
(`OPEN_SHARES`) are open, and `/metrics` with `LOOPWIRE_METRICS_PUBLIC=1`.
Anything else without a user is refused before a route runs: the page
redirects to the login form, a WebSocket handshake gets HTTP 401 (no
socket is accepted) and any other route a JSON 401 (in OpenAI's shape
under `/v1/`: `refusal.body_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from starlette.datastructures import Headers
from starlette.requests import HTTPConnection, cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.identity.identities import Identities
from backend.transport.guesses import Guesses
from backend.transport.limits import client_address
from backend.transport.refusal import Header, handshake_refusal, http_refusal
from backend.users import ADMIN, COOKIE_NAME, LOCAL_USER, ROLES, Identity, Role

USER_KEY = "loopwire.user"
ROLE_KEY = "loopwire.role"
OPEN_PATHS = frozenset(
    {"/healthz", "/login", "/logout", "/login/oidc", "/login/oidc/callback"}
)
OPEN_PREFIXES = ("/static/",)
METRICS = "/metrics"
"""Open too with `LOOPWIRE_METRICS_PUBLIC=1`."""
OPEN_SHARES = ("/s/", "/api/shares/")
"""A share link's page and snapshot: read-only, open to anyone with the
link (`transport/shares.py`); revoking one needs its owner."""
PAGES = frozenset({"/"})
CONVERSATION_PAGE = "/c/"
"""The page opened on a conversation: `/c/<id>`."""
SIGN_IN = "sign in first: the login page's cookie, or Authorization: Bearer <token>"
TOO_MANY = "too many wrong credentials from this address; try again in {} s"


def user_of(connection: HTTPConnection) -> str:
    """The user the request is from; fails closed if nobody said."""
    user = connection.scope.get(USER_KEY)
    if not isinstance(user, str):
        raise RuntimeError("no user in scope: is the Authenticate middleware in place?")
    return user


def role_of(connection: HTTPConnection) -> Role:
    """The role of the user the request is from; fails closed like `user_of`."""
    role = connection.scope.get(ROLE_KEY)
    if role not in ROLES:
        raise RuntimeError("no role in scope: is the Authenticate middleware in place?")
    return ADMIN if role == ADMIN else "user"


@dataclass(frozen=True, slots=True)
class Credentials:
    kind: Literal["bearer", "cookie"]
    value: str


def credentials(headers: Headers) -> Credentials | None:
    """What the request presents: its `Authorization` header (whatever the
    scheme) before its session cookie; None if neither."""
    authorization = headers.get("authorization")
    if authorization is not None:
        scheme, _, value = authorization.partition(" ")
        return Credentials(
            "bearer", value.strip() if scheme.lower() == "bearer" else ""
        )
    cookie = cookie_parser(headers.get("cookie", "")).get(COOKIE_NAME)
    return None if cookie is None else Credentials("cookie", cookie)


async def identify(identities: Identities, presented: Credentials) -> Identity | None:
    if not presented.value:
        return None
    if presented.kind == "bearer":
        return await identities.by_bearer(presented.value)
    return await identities.by_cookie(presented.value)


class Authenticate:
    def __init__(
        self,
        app: ASGIApp,
        identities: Identities,
        guesses: Guesses,
        *,
        metrics_public: bool = False,
    ) -> None:
        """`metrics_public`: `GET /metrics` needs no credentials."""
        self.app = app
        self.identities = identities
        self.guesses = guesses
        self.open_paths = OPEN_PATHS | ({METRICS} if metrics_public else set())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self.identities.enabled:
            scope[USER_KEY], scope[ROLE_KEY] = LOCAL_USER, ADMIN
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path in self.open_paths or path.startswith(OPEN_PREFIXES) or _shared(scope):
            await self.app(scope, receive, send)  # open to all; no user in scope
            return
        presented = credentials(Headers(scope=scope))
        address = client_address(scope)
        if presented is not None and not self.guesses.allowed(address):
            await _too_many(scope, receive, send, self.guesses.retry_after(address))
            return
        identity = None
        if presented is not None:
            identity = await identify(self.identities, presented)
            if identity is None:
                self.guesses.failed(address)
        if identity is None:
            await _refuse(scope, receive, send, presented)
            return
        scope[USER_KEY], scope[ROLE_KEY] = identity.user, identity.role
        await self.app(scope, receive, send)


def _shared(scope: Scope) -> bool:
    """A request that reads a share link."""
    reads = scope["type"] == "http" and scope["method"] in ("GET", "HEAD")
    return reads and str(scope["path"]).startswith(OPEN_SHARES)


async def _refuse(
    scope: Scope, receive: Receive, send: Send, presented: Credentials | None
) -> None:
    """401 (a handshake, or JSON), or the login form for the page; a refused
    cookie is cleared, so the browser stops presenting it."""
    if scope["type"] == "websocket":
        await handshake_refusal(scope, receive, send, 401, "unauthorized", SIGN_IN)
        return
    headers = []
    if presented is not None and presented.kind == "cookie":
        headers.append(clear_cookie(scope))
    if _is_page(scope["path"]) and scope["method"] in ("GET", "HEAD"):
        await _redirect(send, "/login", headers)
        return
    headers.append((b"www-authenticate", b'Bearer realm="loopwire"'))
    await http_refusal(send, 401, "unauthorized", SIGN_IN, headers, path=scope["path"])


async def _too_many(scope: Scope, receive: Receive, send: Send, wait_s: int) -> None:
    message = TOO_MANY.format(max(1, wait_s))
    retry = [(b"retry-after", str(max(1, wait_s)).encode())]
    if scope["type"] == "websocket":
        await handshake_refusal(
            scope, receive, send, 429, "rate_limited", message, retry
        )
    else:
        await http_refusal(
            send, 429, "rate_limited", message, retry, path=scope["path"]
        )


def clear_cookie(scope: Scope) -> Header:
    """A `Set-Cookie` header that deletes the session cookie."""
    secure = "; Secure" if scope.get("scheme") in ("https", "wss") else ""
    value = f'{COOKIE_NAME}=""; Max-Age=0; Path=/; HttpOnly; SameSite=Strict{secure}'
    return (b"set-cookie", value.encode())


def _is_page(path: str) -> bool:
    """The chat page, at `/` or opened on a conversation (`/c/<id>`)."""
    return path in PAGES or path.startswith(CONVERSATION_PAGE)


async def _redirect(send: Send, location: str, headers: list[Header]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode()),
                (b"content-length", b"0"),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
