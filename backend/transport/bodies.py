"""What clients send: a JSON request body, read within bounds and validated
as a route's model, and what is wrong with one that does not validate (the
WebSocket's frames say it the same way). A body that cannot be taken is
`Refused`: 415 not JSON, 413 past the limit, 400 unparseable or invalid."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request

from backend.bounded_json import load_json
from backend.errors import InvalidMessage
from backend.text import shorten
from backend.transport.refusal import Refused

MAX_BODY_BYTES = 16 * 1024
MAX_PROBLEMS = 20
"""Validation problems listed in one error (field names come from the
client: each is cut to a preview, and the rest are only counted)."""
FIELD_CHARS = 40
WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")
Body = TypeVar("Body", bound=BaseModel)


class StrictBody(BaseModel):
    """A request body: its fields exactly, of exactly their types."""

    model_config = ConfigDict(extra="forbid", strict=True)


def whole_number(text: str) -> int | None:
    """`text` as a count (ASCII digits only, at most 18 of them), else None.
    (`str.isdigit` alone takes `²` and other digits `int` refuses.)"""
    return int(text) if WHOLE_NUMBER.fullmatch(text) else None


def media_type(request: Request) -> str:
    """The body's media type, as `Content-Type` names it (lower case)."""
    return request.headers.get("content-type", "").partition(";")[0].strip().lower()


def expect_media_type(request: Request, expected: str, how: str) -> None:
    """415 (saying `how` to send it) unless the body is `expected`."""
    if media_type(request) != expected:
        raise Refused(415, "invalid_message", how)


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON, read no further than `limit` bytes."""
    expect_media_type(
        request,
        "application/json",
        "send the body as JSON (Content-Type: application/json)",
    )
    declared = whole_number(request.headers.get("content-length", ""))
    if declared is not None and declared > limit:
        raise Refused(
            413, "invalid_message", f"body is {declared} bytes; the limit is {limit}"
        )
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise Refused(
                413, "invalid_message", f"body is over {limit} bytes, the limit"
            )
    try:
        return load_json(bytes(raw) or b"null")
    except InvalidMessage as exc:
        raise Refused(400, "invalid_message", str(exc)) from exc


async def read_model(
    request: Request, model: type[Body], what: str, limit: int = MAX_BODY_BYTES
) -> Body:
    """The body (at most `limit` bytes), validated as `model`; 400 naming
    each bad field in `fields` and in the message."""
    data = await read_json(request, limit)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        fields, problems = describe(exc, most=MAX_PROBLEMS)
        raise Refused(
            400, "invalid_message", f"invalid {what}: {problems}", fields=fields
        ) from exc


def describe(
    exc: ValidationError, *, most: int, tagged: bool = False, whole: str = "body"
) -> tuple[list[dict[str, str]], str]:
    """The first `most` problems as `{"field", "problem"}` and as text,
    `field: problem; …; and N more`. Field names come from the client
    (unknown fields), so each is cut short. `tagged`: the first item of a
    location is a tagged union's tag, left out; `whole`: the name of the
    value itself."""
    errors = exc.errors(include_url=False)
    fields = [
        {
            "field": shorten(
                ".".join(str(p) for p in e["loc"][1 if tagged else 0 :]) or whole,
                FIELD_CHARS,
            ),
            "problem": "unknown field"
            if e["type"] == "extra_forbidden"
            else e["msg"].removeprefix("Value error, "),
        }
        for e in errors[:most]
    ]
    text = "; ".join(f"{f['field']}: {f['problem']}" for f in fields)
    if len(errors) > most:
        text += f"; and {len(errors) - most} more"
    return fields, text
