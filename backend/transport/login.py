"""The login form: a browser trades a token for a session cookie.

- `GET /login` — the form (or straight to the chat when already signed in,
  or when the server has no authentication).
- `POST /login` with `token=…` (a form, at most 4 KiB) — on success a
  `303` to the chat and the cookie: HttpOnly (scripts cannot read it),
  SameSite=Strict (other sites' requests do not carry it), Secure when the
  page is served over HTTPS. A wrong token shows the form again (401);
  an address that keeps guessing is slowed to 10 tries a minute (429).
- `POST /logout` — the cookie is cleared.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from backend.settings import Settings
from backend.transport.auth import identify
from backend.transport.http import PAGE_HEADERS, templates
from backend.transport.limits import TokenBucket
from backend.users import COOKIE_NAME, Users

FORM_BYTES = 4096
GUESSES_PER_MINUTE = 10
TRACKED_ADDRESSES = 10_000


class Guesses:
    """Failed logins per client address: a bucket each, the oldest forgotten
    past `TRACKED_ADDRESSES`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def allowed(self, address: str) -> bool:
        """May `address` try again? (Its bucket is only spent on failures.)"""
        bucket = self._buckets.get(address)
        return bucket is None or bucket.peek() >= 1

    def failed(self, address: str) -> None:
        bucket = self._buckets.get(address)
        if bucket is None:
            rate = GUESSES_PER_MINUTE / 60
            bucket = TokenBucket(rate, GUESSES_PER_MINUTE, self._clock)
            self._buckets[address] = bucket
            if len(self._buckets) > TRACKED_ADDRESSES:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(address)
        bucket.take()


class Login:
    def __init__(self, users: Users, settings: Settings) -> None:
        self.users = users
        self.secure_default = (settings.public_url or "").startswith("https://")
        self.guesses = Guesses()

    def routes(self) -> list[Route]:
        return [
            Route("/login", self.form, methods=["GET", "HEAD"]),
            Route("/login", self.submit, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
        ]

    async def form(self, request: Request) -> Response:
        if not self.users.enabled or identify(self.users, request.headers):
            return RedirectResponse("/", status_code=303)
        return self._page(request)

    async def submit(self, request: Request) -> Response:
        if not self.users.enabled:
            return RedirectResponse("/", status_code=303)
        address = request.client.host if request.client else "unknown"
        if not self.guesses.allowed(address):
            return self._page(request, "Too many wrong tokens; wait a minute.", 429)
        token = await _form_token(request)
        if token is None:
            return self._page(request, "Send the token from the form.", 400)
        user = self.users.by_token(token)
        if user is None:
            self.guesses.failed(address)
            return self._page(request, "That token is not valid here.", 401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE_NAME,
            self.users.cookie(user),
            max_age=int(self.users.cookie_ttl_s),
            path="/",
            httponly=True,
            samesite="strict",
            secure=self._secure(request),
        )
        response.headers["Cache-Control"] = "no-store"
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(
            COOKIE_NAME,
            path="/",
            httponly=True,
            samesite="strict",
            secure=self._secure(request),
        )
        return response

    def _secure(self, request: Request) -> bool:
        return self.secure_default or request.url.scheme == "https"

    def _page(self, request: Request, problem: str = "", status: int = 200) -> Response:
        response = templates.TemplateResponse(
            request, "login.html", {"problem": problem}, status_code=status
        )
        response.headers.update(PAGE_HEADERS)
        return response


async def _form_token(request: Request) -> str | None:
    """The `token` field of a form body of at most `FORM_BYTES`; None if the
    body is not such a form."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return None
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > FORM_BYTES:
            return None
    try:
        fields = parse_qs(raw.decode("ascii"), max_num_fields=4, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return None
    values = fields.get("token", [])
    return values[0].strip() if len(values) == 1 else None
