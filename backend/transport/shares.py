"""Read-only share links: a conversation as it was when shared, readable
by anyone with the link, without signing in (`chat/share_snapshot.py`
says what a snapshot holds).

- `POST /api/conversations/{id}/shares` (the owner; 404 for anyone else):
  a new link, 201 `{id, url, title, created_at, messages}`; 409 past
  `MAX_SHARES` links for the conversation;
- `GET /api/conversations/{id}/shares`: `{shares: [...]}`, newest first;
- `DELETE /api/shares/{share_id}` (the owner): 204; 404 for another's;
- open to all (`auth.OPEN_SHARES`): `GET /api/shares/{share_id}`, the
  snapshot as JSON, and `GET /s/{share_id}`, the page showing it
  (`frontend/templates/share.html`) under a strict CSP, `noindex` and
  `no-referrer`. An unknown, revoked or malformed id is a plain 404, the
  malformed ones before any database query.

The id is the link's secret (`secrets.token_urlsafe(32)`). With
`LOOPWIRE_SHARING=false` the owner's routes answer 403 `sharing_off` and
the open ones 404.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.chat.service import ChatService
from backend.chat.share_snapshot import snapshot
from backend.errors import NoSuchConversation, ProtocolError
from backend.settings import Settings
from backend.store.base import Store, StoreError
from backend.store.records import ConversationRecord
from backend.store.share_records import ShareRecord
from backend.transport.auth import user_of
from backend.transport.http import CONTENT_SECURITY_POLICY, templates
from backend.transport.openapi_parts import CONVERSATION
from backend.transport.refusal import Refused

MAX_SHARES = 20
"""Links one conversation may have at once."""
SHARE_ID = re.compile(r"[A-Za-z0-9_-]{43}")
"""What `secrets.token_urlsafe(32)` makes."""
PAGE_PATH = "/s/"
SHARED_HEADERS = {
    "Cache-Control": "no-store",
    "X-Robots-Tag": "noindex, nofollow",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
PAGE_HEADERS = {**SHARED_HEADERS, "Content-Security-Policy": CONTENT_SECURITY_POLICY}
SHARING_OFF = "sharing is turned off on this server (LOOPWIRE_SHARING)"
UNAVAILABLE = "the store is unavailable; try again later"


def new_share_id() -> str:
    return secrets.token_urlsafe(32)


@contextlib.contextmanager
def _stored() -> Iterator[None]:
    try:
        yield
    except StoreError as exc:
        raise Refused(503, "store_error", UNAVAILABLE) from exc


def _store(request: Request, *, public: bool = False) -> Store:
    settings: Settings = request.app.state.settings
    service: ChatService = request.app.state.chat
    if not settings.sharing or service.store is None:
        if public:
            raise Refused(404, "not_found", "no such share")
        reason = SHARING_OFF if not settings.sharing else "this server keeps nothing"
        raise Refused(403, "sharing_off", reason)
    return service.store


def share_url(request: Request, share_id: str) -> str:
    """The link: under `LOOPWIRE_PUBLIC_URL` when set, else as requested."""
    settings: Settings = request.app.state.settings
    base = settings.public_url or str(request.base_url)
    return f"{base.rstrip('/')}{PAGE_PATH}{share_id}"


def summary(request: Request, record: ShareRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "url": share_url(request, record.id),
        "title": record.title,
        "created_at": record.created_at,
        "messages": len(record.snapshot.messages),
    }


async def _owned(request: Request, store: Store) -> ConversationRecord:
    conversation_id = request.path_params["conversation_id"]
    with _stored():
        record = await store.conversation(conversation_id)
    if record is None or record.owner != user_of(request):
        raise Refused(404, "not_found", f"no conversation {conversation_id[:64]!r}")
    return record


async def create(request: Request) -> Response:
    store = _store(request)
    record = await _owned(request, store)
    service: ChatService = request.app.state.chat
    with contextlib.suppress(ProtocolError, NoSuchConversation):
        # the owner could not be asked: the store has it up to its last save
        await service.flush_session(record.id, record.owner)
    with _stored():
        if len(await store.shares(record.id)) >= MAX_SHARES:
            raise Refused(
                409,
                "too_many_shares",
                f"a conversation has at most {MAX_SHARES} share links: "
                "stop sharing one of them first",
            )
        messages, files = await store.messages(record.id), await store.files(record.id)
        share = ShareRecord(
            id=new_share_id(),
            conversation_id=record.id,
            owner=record.owner,
            title=record.title,
            snapshot=snapshot(messages, files),
            created_at=time.time(),
        )
        await store.add_share(share)
    location = {"Location": f"/api/shares/{share.id}"}
    return JSONResponse(summary(request, share), 201, headers=location)


async def listed(request: Request) -> Response:
    store = _store(request)
    record = await _owned(request, store)
    with _stored():
        shares = await store.shares(record.id)
    body = {"shares": [summary(request, share) for share in shares]}
    return JSONResponse(body, headers={"Cache-Control": "no-store"})


async def delete(request: Request) -> Response:
    store = _store(request)
    share_id = request.path_params["share_id"]
    deleted = False
    if SHARE_ID.fullmatch(share_id):
        with _stored():
            deleted = await store.delete_share(share_id, user_of(request))
    if not deleted:
        raise Refused(404, "not_found", "no such share of yours")
    return Response(status_code=204)


async def _shared(request: Request) -> ShareRecord | None:
    """The share the path names, if sharing is on and it exists."""
    store = _store(request, public=True)
    share_id = request.path_params["share_id"]
    if not SHARE_ID.fullmatch(share_id):
        return None
    with _stored():
        return await store.share(share_id)


async def snapshot_json(request: Request) -> Response:
    share = await _shared(request)
    if share is None:
        raise Refused(404, "not_found", "no such share", headers=SHARED_HEADERS)
    body = {
        "id": share.id,
        "title": share.title,
        "created_at": share.created_at,
        **share.snapshot.model_dump(mode="json"),
    }
    return JSONResponse(body, headers=SHARED_HEADERS)


async def page(request: Request) -> Response:
    try:
        share = await _shared(request)
    except Refused as exc:
        if exc.status != 404:
            raise
        share = None
    at = time.gmtime(share.created_at if share else 0)
    dates = {
        "shared_on": time.strftime("%d %B %Y", at),
        "shared_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", at),
    }
    response = templates.TemplateResponse(
        request,
        "share.html",
        {"share": share, **dates},
        status_code=200 if share else 404,
    )
    response.headers.update(PAGE_HEADERS)
    return response


def routes() -> list[Route]:
    return [
        Route(
            "/api/conversations/{conversation_id}/shares",
            create,
            methods=["POST"],
        ),
        Route(
            "/api/conversations/{conversation_id}/shares",
            listed,
            methods=["GET"],
        ),
        Route("/api/shares/{share_id}", snapshot_json, methods=["GET"]),
        Route("/api/shares/{share_id}", delete, methods=["DELETE"]),
        Route(PAGE_PATH + "{share_id}", page, methods=["GET"]),
    ]


_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
_SHARE_ID = {
    "name": "share_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{43}$"},
}
_OWNER = "no such conversation (or share) of the caller's"


def _answer(text: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    content = {"application/json": {"schema": schema}} if schema else _ERROR
    return {"description": text, "content": content}


def share_paths() -> dict[str, Any]:
    """The routes in the OpenAPI document (`transport/openapi.py`)."""
    link = {"type": "object", "required": ["id", "url", "title", "created_at"]}
    return {
        "/api/conversations/{conversation_id}/shares": {
            "post": {
                "summary": "Share a conversation: a read-only link to it as it is now",
                "parameters": [CONVERSATION],
                "responses": {
                    "201": _answer("the link (`messages`: how many it shows)", link),
                    "403": _answer(SHARING_OFF),
                    "404": _answer(_OWNER),
                    "409": _answer(f"the conversation has {MAX_SHARES} links already"),
                },
            },
            "get": {
                "summary": "The conversation's share links, newest first",
                "parameters": [CONVERSATION],
                "responses": {
                    "200": _answer("`{shares: [...]}`", {"type": "object"}),
                    "403": _answer(SHARING_OFF),
                    "404": _answer(_OWNER),
                },
            },
        },
        **_public_paths(),
    }


def _public_paths() -> dict[str, Any]:
    html: dict[str, Any] = {"text/html": {}}
    return {
        "/api/shares/{share_id}": {
            "get": {
                "summary": "A shared conversation's snapshot (no sign-in needed)",
                "security": [],
                "parameters": [_SHARE_ID],
                "responses": {
                    "200": _answer(
                        "title, created_at, messages (role, text, tools), files",
                        {"type": "object"},
                    ),
                    "404": _answer("no such share (revoked, or sharing is off)"),
                },
            },
            "delete": {
                "summary": "Stop sharing: the link answers 404 from now on",
                "parameters": [_SHARE_ID],
                "responses": {
                    "204": {"description": "revoked"},
                    "404": _answer(_OWNER),
                },
            },
        },
        "/s/{share_id}": {
            "get": {
                "summary": "The page of a shared conversation (no sign-in needed)",
                "security": [],
                "parameters": [_SHARE_ID],
                "responses": {
                    "200": {"description": "the page", "content": html},
                    "404": {"description": "no such share", "content": html},
                },
            }
        },
    }
