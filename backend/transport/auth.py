"""`Authenticate`: who is asking, for every request that passes the `Guard`.

With authentication on (`Users.enabled`), a request names its user with
`Authorization: Bearer <token>` (scripts) or the session cookie the login
form sets (browsers); tokens never travel in URLs. Without it, every caller
is the user `local`. The user is put in the ASGI scope for the routes
(`user_of`), which scope everything they touch to that user.

Only `/healthz` (bare liveness), the login form and the static files (the
repository's own, the same for everyone) are open. Anything else without a
user is refused before a route runs: the page redirects to the login form,
a WebSocket handshake gets HTTP 401 (no socket is accepted) and any other
route a JSON 401.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.requests import HTTPConnection, cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.transport.refusal import handshake_refusal, http_refusal
from backend.users import COOKIE_NAME, LOCAL_USER, Users

USER_KEY = "loopwire.user"
OPEN_PATHS = frozenset({"/healthz", "/login", "/logout"})
OPEN_PREFIXES = ("/static/",)
PAGES = frozenset({"/"})
CONVERSATION_PAGE = "/c/"
"""The page opened on a conversation: `/c/<id>`."""
SIGN_IN = "sign in first: the login page's cookie, or Authorization: Bearer <token>"


def user_of(connection: HTTPConnection) -> str:
    """The user the request is from; fails closed if nobody said."""
    user = connection.scope.get(USER_KEY)
    if not isinstance(user, str):
        raise RuntimeError("no user in scope: is the Authenticate middleware in place?")
    return user


def identify(users: Users, headers: Headers) -> str | None:
    """The user a request's bearer token or session cookie names."""
    authorization = headers.get("authorization")
    if authorization:
        return users.by_authorization(authorization)
    cookie = cookie_parser(headers.get("cookie", "")).get(COOKIE_NAME)
    return users.by_cookie(cookie) if cookie else None


class Authenticate:
    def __init__(self, app: ASGIApp, users: Users) -> None:
        self.app = app
        self.users = users

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self.users.enabled:
            scope[USER_KEY] = LOCAL_USER
            await self.app(scope, receive, send)
            return
        user = identify(self.users, Headers(scope=scope))
        path: str = scope["path"]
        if user is not None:
            scope[USER_KEY] = user
        elif path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            pass  # open to all; `user_of` fails for it
        elif kind == "websocket":
            await handshake_refusal(scope, receive, send, 401, "unauthorized", SIGN_IN)
            return
        elif _is_page(path) and scope["method"] in ("GET", "HEAD"):
            await _redirect(send, "/login")
            return
        else:
            challenge = (b"www-authenticate", b'Bearer realm="loopwire"')
            await http_refusal(send, 401, "unauthorized", SIGN_IN, [challenge])
            return
        await self.app(scope, receive, send)


def _is_page(path: str) -> bool:
    """The chat page, at `/` or opened on a conversation (`/c/<id>`)."""
    return path in PAGES or path.startswith(CONVERSATION_PAGE)


async def _redirect(send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode()),
                (b"content-length", b"0"),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
