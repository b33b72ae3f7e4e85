"""The caller's tool grants over HTTP (`chat/tool_grants.py`):

- `GET /api/tool-grants`: `{grants: [{id, tool, conversation_id,
  created_at}]}`, oldest first (`conversation_id` null: all of the
  caller's conversations);
- `DELETE /api/tool-grants/{grant_id}`: take one back: the caller's runs
  in progress on this instance ask again from their next call, runs
  started after it ask on every instance (within `TTL_S`); a run in
  progress on another instance keeps what it started with. 404 for a
  grant that is not the caller's.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.chat.service import ChatService
from backend.store.base import StoreError
from backend.store.user_records import ToolGrantRecord
from backend.transport.auth import user_of
from backend.transport.refusal import Refused

UNAVAILABLE = "the store is unavailable; try again later"


def _shown(grant: ToolGrantRecord) -> dict[str, Any]:
    return grant.model_dump(exclude={"user"})


async def listed(request: Request) -> Response:
    service: ChatService = request.app.state.chat
    try:
        grants = await service.grants.of(user_of(request))
    except StoreError as exc:
        raise Refused(503, "store_error", UNAVAILABLE) from exc
    return JSONResponse({"grants": [_shown(grant) for grant in grants]})


async def revoke(request: Request) -> Response:
    service: ChatService = request.app.state.chat
    user, grant_id = user_of(request), request.path_params["grant_id"]
    try:
        revoked = await service.grants.revoke(user, grant_id)
        if revoked is not None:
            await service.regrant(user)
    except StoreError as exc:
        raise Refused(503, "store_error", UNAVAILABLE) from exc
    if revoked is None:
        raise Refused(404, "not_found", f"no tool grant {grant_id[:64]!r}")
    return JSONResponse({"revoked": _shown(revoked)})


def routes() -> list[Route]:
    return [
        Route("/api/tool-grants", listed, methods=["GET"]),
        Route("/api/tool-grants/{grant_id}", revoke, methods=["DELETE"]),
    ]


def tool_grant_paths() -> dict[str, Any]:
    """The routes in the OpenAPI document (`transport/openapi.py`)."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    grant = {"name": "grant_id", "in": "path", "required": True}
    ok = {"content": {"application/json": {"schema": {"type": "object"}}}}
    return {
        "/api/tool-grants": {
            "get": {
                "summary": "The tools the caller allowed to run without asking",
                "responses": {
                    "200": {"description": "`{grants: [...]}`", **ok},
                    "503": {
                        "description": "the store is unavailable",
                        "content": error,
                    },
                },
            }
        },
        "/api/tool-grants/{grant_id}": {
            "delete": {
                "summary": "Take back a tool grant (the tool asks again)",
                "parameters": [{**grant, "schema": {"type": "string"}}],
                "responses": {
                    "200": {"description": "`{revoked: {...}}`", **ok},
                    "404": {"description": "not the caller's grant", "content": error},
                    "503": {
                        "description": "the store is unavailable",
                        "content": error,
                    },
                },
            }
        },
    }
