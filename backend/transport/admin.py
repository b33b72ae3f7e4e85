"""Admin routes: sign-ins and what each user keeps. Every one needs the
`admin` role (a `user` gets 403 `forbidden`).

- `GET /api/admin/signins[?user=…]` — live sign-ins (not revoked, not
  expired), newest first.
- `DELETE /api/admin/signins/{signin_id}` — revoke one (204; 404 if there
  is no such live one).
- `POST /api/admin/users/{user}/revoke` — revoke all of a user's sign-ins.
- `GET /api/admin/usage` — per user: conversations, stored runs, bytes of
  files.

A revocation is refused at once on this instance and within
`identity.signins.CACHE_S` on the others; a socket the sign-in opened
before stays open until it closes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps

from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.identity.claims import MAX_USER_CHARS
from backend.identity.signins import SignIns
from backend.store.base import Store
from backend.store.user_records import SignInMethod, SignInRecord, UsageRecord
from backend.transport.auth import role_of
from backend.transport.refusal import Refused
from backend.users import ADMIN, Role

FORBIDDEN = "this needs the admin role"
Endpoint = Callable[[Request], Awaitable[Response]]


class SignInInfo(BaseModel):
    """A live sign-in, as an admin sees it (never its secret)."""

    model_config = ConfigDict(frozen=True)

    id: str
    user: str
    role: Role
    method: SignInMethod
    created_at: float
    expires_at: float
    last_seen_at: float
    user_agent: str

    @classmethod
    def of(cls, record: SignInRecord) -> SignInInfo:
        return cls.model_validate(record.model_dump(exclude={"secret_hash"}))


class SignInList(BaseModel):
    items: list[SignInInfo]


class Revoked(BaseModel):
    user: str
    revoked: list[str]
    """The ids of the sign-ins revoked."""


class Usage(BaseModel):
    items: list[UsageRecord]


def admin_only(endpoint: Endpoint) -> Endpoint:
    @wraps(endpoint)
    async def guarded(request: Request) -> Response:
        if role_of(request) != ADMIN:
            raise Refused(403, "forbidden", FORBIDDEN)
        return await endpoint(request)

    return guarded


def _signins(request: Request) -> SignIns:
    signins: SignIns = request.app.state.signins
    return signins


@admin_only
async def list_signins(request: Request) -> Response:
    user = request.query_params.get("user")
    if user is not None and not 0 < len(user) <= MAX_USER_CHARS:
        raise Refused(400, "invalid_message", "user: 1 to 128 characters")
    records = await _signins(request).live(user)
    body = SignInList(items=[SignInInfo.of(record) for record in records])
    return JSONResponse(body.model_dump(mode="json"))


@admin_only
async def revoke_signin(request: Request) -> Response:
    signin_id = request.path_params["signin_id"]
    if await _signins(request).revoke(signin_id) is None:
        raise Refused(404, "not_found", f"no live sign-in {signin_id[:40]!r}")
    return Response(status_code=204)


@admin_only
async def revoke_user(request: Request) -> Response:
    user = request.path_params["user"]
    revoked = await _signins(request).revoke_user(user)
    return JSONResponse(Revoked(user=user, revoked=revoked).model_dump(mode="json"))


@admin_only
async def usage(request: Request) -> Response:
    store: Store = request.app.state.store
    return JSONResponse(Usage(items=await store.usage()).model_dump(mode="json"))


def routes() -> list[Route]:
    return [
        Route("/api/admin/signins", list_signins, methods=["GET"]),
        Route("/api/admin/signins/{signin_id}", revoke_signin, methods=["DELETE"]),
        Route("/api/admin/users/{user}/revoke", revoke_user, methods=["POST"]),
        Route("/api/admin/usage", usage, methods=["GET"]),
    ]
