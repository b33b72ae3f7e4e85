"""The caller's own custom instructions over HTTP (`chat/instructions.py`):

- `GET /api/me/instructions`: `{"instructions": str, "max_chars": int}`;
- `PUT /api/me/instructions` with `{"instructions": "…"}`: keep them for
  every run the caller starts from now on (empty: none); longer than
  `max_chars` is a 400 naming the limit.

A conversation's own instructions are set with `PATCH
/api/conversations/{id}` (`transport/conversations.py`).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.chat.instructions import Instructions
from backend.chat.service import ChatService
from backend.errors import InvalidMessage
from backend.store.base import StoreError
from backend.transport.auth import user_of
from backend.transport.bodies import StrictBody, read_model
from backend.transport.openapi_parts import errors, json_body
from backend.transport.refusal import Refused

PATH = "/api/me/instructions"
UNAVAILABLE = "the store is unavailable; try again later"


class UserInstructions(StrictBody):
    instructions: str


def _instructions(request: Request) -> Instructions:
    service: ChatService = request.app.state.chat
    if service.store is None:
        raise Refused(404, "not_found", "this server keeps no instructions")
    return service.runs.instructions


def _shown(instructions: Instructions, text: str) -> Response:
    return JSONResponse({"instructions": text, "max_chars": instructions.max_chars})


async def read(request: Request) -> Response:
    instructions = _instructions(request)
    try:
        text = await instructions.of_user(user_of(request))
    except StoreError as exc:
        raise Refused(503, "store_error", UNAVAILABLE) from exc
    return _shown(instructions, text)


async def write(request: Request) -> Response:
    instructions = _instructions(request)
    body = await read_model(request, UserInstructions, "instructions")
    try:
        text = await instructions.set_user(user_of(request), body.instructions)
    except InvalidMessage as exc:
        raise Refused(400, exc.error_type, str(exc)) from exc
    except StoreError as exc:
        raise Refused(503, "store_error", UNAVAILABLE) from exc
    return _shown(instructions, text)


def routes() -> list[Route]:
    return [
        Route(PATH, read, methods=["GET"]),
        Route(PATH, write, methods=["PUT"]),
    ]


def instruction_paths() -> dict[str, Any]:
    """The routes in the OpenAPI document (`transport/openapi.py`)."""
    shown = json_body('`{"instructions": str, "max_chars": int}`')
    schema = UserInstructions.model_json_schema()
    return {
        PATH: {
            "get": {
                "summary": "The caller's own instructions, for all their runs",
                "responses": {"200": shown, **errors(404, 503)},
            },
            "put": {
                "summary": "Set the caller's own instructions (empty: none)",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": schema}},
                },
                "responses": {"200": shown, **errors(400, 404, 415, 503)},
            },
        }
    }
