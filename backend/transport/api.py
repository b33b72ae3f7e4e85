"""REST routes for scripts: answering approvals over HTTP.

`POST /api/sessions/{session_id}/approvals/{tool_call_id}` with
`{"approved": bool, "reason": str?}` resolves a pending approval exactly like a
`tool_approval_response` frame would, for the session's own user only
(another user's session is "not found"). Errors are JSON
`{"error_type": ..., "message": ...}` with a fitting status code.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.bounded_json import load_json
from backend.chat.service import ChatService
from backend.errors import InvalidMessage, NoSuchConversation, ProtocolError
from backend.protocol import ToolApprovalResponseMessage
from backend.transport.auth import user_of
from backend.transport.limits import Limited

MAX_BODY_BYTES = 16 * 1024
MAX_PROBLEMS = 20
"""Validation problems listed in one error (field names come from the
client: each is cut to a preview, and the rest are only counted)."""
Body = TypeVar("Body", bound=BaseModel)


class ApprovalBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    approved: bool
    reason: Annotated[str, Field(max_length=2000)] | None = None


def _preview(name: str, limit: int = 40) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")


def whole_number(text: str) -> int | None:
    """`text` as a count (ASCII digits only, at most 18 of them), else None.
    (`str.isdigit` alone takes `²` and other digits `int` refuses.)"""
    return int(text) if WHOLE_NUMBER.fullmatch(text) else None


def error(status: int, error_type: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"error_type": error_type, "message": message}, status_code=status
    )


def limited(exc: Limited) -> JSONResponse:
    """429 for a client past one of its limits, with `Retry-After` when
    waiting helps."""
    response = error(429, exc.error_type, str(exc))
    if exc.retry_after is not None:
        response.headers["Retry-After"] = exc.retry_after
    return response


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON, read no further than `limit` bytes; or an error
    response (413 past the limit, 400 for JSON that does not parse)."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/json":
        return error(
            415,
            "invalid_message",
            "send the body as JSON (Content-Type: application/json)",
        )
    declared = whole_number(request.headers.get("content-length", ""))
    if declared is not None and declared > limit:
        return error(
            413, "invalid_message", f"body is {declared} bytes; the limit is {limit}"
        )
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            return error(
                413, "invalid_message", f"body is over {limit} bytes, the limit"
            )
    try:
        return load_json(bytes(raw) or b"null")
    except InvalidMessage as exc:
        return error(400, "invalid_message", str(exc))


async def read_model(
    request: Request, model: type[Body], what: str, limit: int = MAX_BODY_BYTES
) -> Body | JSONResponse:
    """The body (at most `limit` bytes), validated as `model`, or the error
    response saying why not (400, naming each bad field in `fields` and in
    the message; 413 past the limit)."""
    data = await read_json(request, limit)
    if isinstance(data, JSONResponse):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        fields = [
            {
                "field": _preview(".".join(str(p) for p in e["loc"]) or "body"),
                "problem": "unknown field"
                if e["type"] == "extra_forbidden"
                else e["msg"].removeprefix("Value error, "),
            }
            for e in errors[:MAX_PROBLEMS]
        ]
        problems = "; ".join(f"{f['field']}: {f['problem']}" for f in fields)
        if len(errors) > MAX_PROBLEMS:
            problems += f"; and {len(errors) - MAX_PROBLEMS} more"
        return JSONResponse(
            {
                "error_type": "invalid_message",
                "message": f"invalid {what}: {problems}",
                "fields": fields,
            },
            status_code=400,
        )


async def resolve_approval(request: Request) -> Response:
    service: ChatService = request.app.state.chat
    body = await read_model(request, ApprovalBody, "approval")
    if isinstance(body, JSONResponse):
        return body
    tool_call_id = request.path_params["tool_call_id"]
    message = ToolApprovalResponseMessage(
        type="tool_approval_response",
        tool_call_id=tool_call_id,
        approved=body.approved,
        reason=body.reason,
    )
    try:
        await service.control(
            request.path_params["session_id"], user_of(request), message
        )
    except NoSuchConversation:
        return error(404, "not_found", "no such session")
    except ProtocolError as exc:
        return error(409, exc.error_type, str(exc))
    status = "approved" if body.approved else "rejected"
    return JSONResponse({"tool_call_id": tool_call_id, "status": status})


def routes() -> list[Route]:
    return [
        Route(
            "/api/sessions/{session_id}/approvals/{tool_call_id}",
            resolve_approval,
            methods=["POST"],
        )
    ]
