"""The login form: a browser trades a token for a sign-in.

- `GET /login` — the form (or straight to the chat when already signed in,
  or when the server has no authentication); with OIDC configured, also a
  "Sign in with …" link (`transport/oidc.py`).
- `POST /login` with `token=…` (a form, at most 4 KiB) — on success a
  sign-in is stored (`identity/signins.py`) and the browser gets a `303`
  to the chat and its cookie: HttpOnly (scripts cannot read it),
  SameSite=Strict (other sites' requests do not carry it), Secure when the
  page is served over HTTPS. A wrong token shows the form again (401); an
  address that keeps guessing is slowed to 10 tries a minute (429).
- `POST /logout` — the sign-in is revoked on the server and the cookie
  cleared.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from backend.identity.identities import Identities
from backend.settings import Settings
from backend.store.user_records import SignInMethod
from backend.transport.auth import clear_cookie
from backend.transport.bodies import media_type
from backend.transport.guesses import Guesses
from backend.transport.http import PAGE_HEADERS, templates
from backend.transport.limits import client_address
from backend.users import COOKIE_NAME, Identity

FORM_BYTES = 4096
GUESSES_PER_MINUTE = 10


class Login:
    def __init__(
        self, identities: Identities, settings: Settings, credentials: Guesses
    ) -> None:
        """`credentials`: the per-address bucket of wrong cookies and bearer
        tokens (`Authenticate`'s); the form's own is `self.guesses`."""
        self.identities = identities
        self.users = identities.users
        self.secure_default = (settings.public_url or "").startswith("https://")
        self.guesses = Guesses(GUESSES_PER_MINUTE)
        self.credentials = credentials

    def routes(self) -> list[Route]:
        return [
            Route("/login", self.form, methods=["GET", "HEAD"]),
            Route("/login", self.submit, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
        ]

    async def form(self, request: Request) -> Response:
        if not self.identities.enabled:
            return RedirectResponse("/", status_code=303)
        cookie = request.cookies.get(COOKIE_NAME)
        if cookie is None:
            return self.page(request)
        if await self._signed_in(request, cookie) is not None:
            return RedirectResponse("/", status_code=303)
        response = self.page(request)  # the cookie is refused: forget it
        name, value = clear_cookie(request.scope)
        response.headers.append(name.decode(), value.decode())
        return response

    async def submit(self, request: Request) -> Response:
        if not self.identities.enabled:
            return RedirectResponse("/", status_code=303)
        address = client_address(request.scope)
        if not self.guesses.allowed(address):
            response = self.page(request, "Too many wrong tokens; wait a minute.", 429)
            response.headers["Retry-After"] = str(
                max(1, self.guesses.retry_after(address))
            )
            return response
        token = await _form_token(request)
        if token is None:
            return self.page(request, "Send the token from the form.", 400)
        user = self.users.by_token(token)
        identity = self.users.identity(user) if user is not None else None
        if identity is None:
            self.guesses.failed(address)
            return self.page(request, "That token is not valid here.", 401)
        return await self.signed_in(request, identity, "token")

    async def signed_in(
        self,
        request: Request,
        identity: Identity,
        method: SignInMethod,
        response: Response | None = None,
    ) -> Response:
        """Store a sign-in and give the browser its cookie (on `response`,
        or a `303` to the chat)."""
        agent = request.headers.get("user-agent", "")
        cookie = await self.identities.signins.create(identity, method, agent)
        response = response or RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE_NAME,
            cookie,
            max_age=int(self.identities.signins.ttl_s),
            path="/",
            httponly=True,
            samesite="strict",
            secure=self.secure(request),
        )
        response.headers["Cache-Control"] = "no-store"
        return response

    async def logout(self, request: Request) -> Response:
        cookie = request.cookies.get(COOKIE_NAME)
        address = client_address(request.scope)
        if cookie is not None and self.credentials.allowed(address):
            signins = self.identities.signins
            if not await signins.sign_out(cookie):
                self.credentials.failed(address)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(
            COOKIE_NAME,
            path="/",
            httponly=True,
            samesite="strict",
            secure=self.secure(request),
        )
        return response

    async def _signed_in(self, request: Request, cookie: str) -> Identity | None:
        """Who the cookie signs in, if the address may still try cookies."""
        address = client_address(request.scope)
        if not self.credentials.allowed(address):
            return None
        identity = await self.identities.by_cookie(cookie)
        if identity is None:
            self.credentials.failed(address)
        return identity

    def secure(self, request: Request) -> bool:
        return self.secure_default or request.url.scheme == "https"

    def page(self, request: Request, problem: str = "", status: int = 200) -> Response:
        oidc = self.identities.oidc
        response = templates.TemplateResponse(
            request,
            "login.html",
            {
                "problem": problem,
                "tokens": self.users.has_tokens,
                "provider": oidc.name if oidc is not None else None,
            },
            status_code=status,
        )
        response.headers.update(PAGE_HEADERS)
        return response


async def _form_token(request: Request) -> str | None:
    """The `token` field of a form body of at most `FORM_BYTES`; None if the
    body is not such a form."""
    if media_type(request) != "application/x-www-form-urlencoded":
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
