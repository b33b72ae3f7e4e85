"""Signing in through an OpenID Connect provider (`identity/oidc.py`).

- `GET /login/oidc` — a `303` to the provider's authorization page. What
  the callback must check (`state`, `nonce`, the PKCE verifier) goes with
  the browser in a cookie signed with a key derived from the client secret
  (every instance has it, so the callback may land on any), scoped to
  `/login/oidc`, SameSite=Lax (the provider's redirect back is a
  navigation from another site) and valid `PENDING_S`.
- `GET /login/oidc/callback?code=…&state=…` — the state must match the
  cookie's; the code is traded for tokens, the ID token verified, and a
  sign-in stored as for the login form. The answer is a page that moves on
  to the chat itself: a `303` at the end of a redirect chain that started
  on the provider's site would not carry the new SameSite=Strict cookie.
  A failed callback shows the login form with the reason (400) and spends
  the address's bucket of the login form (10 a minute).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from backend.identity.oidc import OidcProvider, Pending, SignInFailed
from backend.transport.http import PAGE_HEADERS, templates
from backend.transport.limits import client_address
from backend.transport.login import Login

log = logging.getLogger(__name__)

PENDING_COOKIE = "loopwire_oidc"
PENDING_S = 600
CALLBACK = "/login/oidc/callback"
MAX_PARAMETER_CHARS = 2048


class OidcLogin:
    def __init__(
        self,
        provider: OidcProvider,
        login: Login,
        *,
        public_url: str | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.provider = provider
        self.login = login
        self.public_url = public_url
        self.clock = clock
        self._key = hashlib.sha256(
            b"loopwire-oidc\0" + provider.client_secret.encode()
        ).digest()

    def routes(self) -> list[Route]:
        return [
            Route("/login/oidc", self.start, methods=["GET"]),
            Route(CALLBACK, self.callback, methods=["GET"]),
        ]

    async def start(self, request: Request) -> Response:
        try:
            url, pending = await self.provider.begin(self._redirect_uri(request))
        except SignInFailed as exc:
            log.warning("OIDC sign-in cannot start: %s", exc)
            return self.login.page(request, f"Cannot sign in: {exc}.", 502)
        response = RedirectResponse(url, status_code=303)
        response.set_cookie(
            PENDING_COOKIE,
            self.seal(pending),
            max_age=PENDING_S,
            path="/login/oidc",
            httponly=True,
            samesite="lax",
            secure=self.login.secure(request),
        )
        response.headers["Cache-Control"] = "no-store"
        return response

    async def callback(self, request: Request) -> Response:
        address = client_address(request.scope)
        guesses = self.login.guesses
        if not guesses.allowed(address):
            return self._failed(
                request, "Too many failed sign-ins; wait a minute.", 429
            )
        try:
            code, pending = self._answer(request)
            identity = await self.provider.finish(
                code, pending, self._redirect_uri(request)
            )
        except SignInFailed as exc:
            guesses.failed(address)
            return self._failed(request, f"The sign-in failed: {exc}.", 400)
        response = templates.TemplateResponse(request, "signed_in.html", {})
        response.headers.update(PAGE_HEADERS)
        self._forget(request, response)
        return await self.login.signed_in(request, identity, "oidc", response)

    def _answer(self, request: Request) -> tuple[str, Pending]:
        """The code, and the pending sign-in whose state the answer names."""
        query = request.query_params
        if "error" in query:
            reason = query.get("error_description") or query["error"]
            raise SignInFailed(f"the provider said {reason[:200]!r}")
        code, state = query.get("code", ""), query.get("state", "")
        if not code or not state or max(len(code), len(state)) > MAX_PARAMETER_CHARS:
            raise SignInFailed("the provider's answer has no code or state")
        pending = self.unseal(request.cookies.get(PENDING_COOKIE, ""))
        if pending is None:
            raise SignInFailed("this browser started no sign-in, or it ran out")
        if not hmac.compare_digest(state.encode(), pending.state.encode()):
            raise SignInFailed("the answer is not for this browser's sign-in")
        return code, pending

    def seal(self, pending: Pending) -> str:
        """`pending` and its expiry as a signed cookie value."""
        payload = json.dumps(
            [pending.state, pending.nonce, pending.verifier, self.clock() + PENDING_S]
        ).encode()
        body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
        return f"{body}.{self._sign(body)}"

    def unseal(self, value: str) -> Pending | None:
        """The pending sign-in a cookie value holds, if its signature holds
        and it has not run out."""
        body, _, signature = value.partition(".")
        if not body or not hmac.compare_digest(
            signature.encode(), self._sign(body).encode()
        ):
            return None
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            state, nonce, verifier, expiry = json.loads(raw)
        except (ValueError, TypeError):
            return None
        if not isinstance(expiry, float | int) or expiry < self.clock():
            return None
        return Pending(str(state), str(nonce), str(verifier))

    def _sign(self, body: str) -> str:
        mac = hmac.new(self._key, body.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def _redirect_uri(self, request: Request) -> str:
        if self.public_url:
            return self.public_url.rstrip("/") + CALLBACK
        return str(request.base_url).rstrip("/") + CALLBACK

    def _failed(self, request: Request, problem: str, status: int) -> Response:
        response = self.login.page(request, problem, status)
        self._forget(request, response)
        return response

    def _forget(self, request: Request, response: Response) -> None:
        response.delete_cookie(
            PENDING_COOKIE,
            path="/login/oidc",
            httponly=True,
            samesite="lax",
            secure=self.login.secure(request),
        )
