"""The branches API: the versions of a conversation that edits set aside
(`chat/branches.py`).

- `GET /api/conversations/{id}/branches` — where the conversation forks and
  the versions at each fork (`chat/branch_views.py`), as stored.
- `POST /api/conversations/{id}/branches/{branch_id}` — switch to that
  version, on whichever instance holds the conversation (as the
  `switch_branch` frame does): what it set aside and brought back. 409
  while a run is active; 400 for a branch that cannot be switched to.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.chat.branch_views import forks
from backend.chat.service import ChatService
from backend.errors import NoSuchConversation, ProtocolError
from backend.protocol import SwitchBranchMessage
from backend.store.base import StoreError
from backend.transport.auth import user_of
from backend.transport.conversations import found_conversation
from backend.transport.openapi_parts import CONVERSATION, errors, json_body
from backend.transport.refusal import Refused

BASE = "/api/conversations/{conversation_id}/branches"


async def list_branches(request: Request) -> Response:
    try:
        _, store, record = await found_conversation(request)
        shown = forks(
            await store.branches(record.id),
            await store.runs(record.id),
            await store.messages(record.id),
        )
    except StoreError as exc:
        raise Refused(
            503, "store_error", "the conversation store is unavailable"
        ) from exc
    return JSONResponse({"forks": shown})


async def switch_branch(request: Request) -> Response:
    service: ChatService = request.app.state.chat
    conversation_id = request.path_params["conversation_id"]
    message = SwitchBranchMessage(
        type="switch_branch", branch_id=request.path_params["branch_id"]
    )
    try:
        done = await service.control(conversation_id, user_of(request), message)
    except NoSuchConversation as exc:
        raise Refused(404, "not_found", f"no conversation {conversation_id!r}") from exc
    except ProtocolError as exc:
        raise Refused.by_service(exc) from exc
    return JSONResponse(done)


def routes() -> list[Route]:
    return [
        Route(BASE, list_branches, methods=["GET"]),
        Route(BASE + "/{branch_id}", switch_branch, methods=["POST"]),
    ]


def branch_paths() -> dict[str, Any]:
    """The routes in the OpenAPI document (`transport/openapi.py`)."""
    branch = {
        "name": "branch_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
    }
    return {
        BASE: {
            "get": {
                "summary": "Where the conversation forks, and the versions at "
                "each fork (`current` is the one shown)",
                "parameters": [CONVERSATION],
                "responses": {"200": json_body('{"forks": [...]}'), **errors(404)},
            }
        },
        BASE + "/{branch_id}": {
            "post": {
                "summary": "Switch to that version: the messages from where it "
                "forks are set aside as a branch in turn",
                "parameters": [CONVERSATION, branch],
                "responses": {
                    "200": json_body("what was set aside and brought back"),
                    **errors(400, 404, 409, 503),
                },
            }
        },
    }
