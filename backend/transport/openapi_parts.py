"""Pieces of the OpenAPI document (`transport/openapi.py`) that the route
modules use to describe their own routes: the path parameters, request
bodies and responses every part of the API shares.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

ERROR = {"$ref": "#/components/schemas/Error"}
TOOL_CALL = {
    "name": "tool_call_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
}
FILE = {"$ref": "#/components/schemas/FileInfo"}
FILE_LIST = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": FILE}},
}
UPLOAD_FORM = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "description": {"type": "string", "maxLength": 2000},
                },
            }
        }
    },
}
CONVERSATION = {
    "name": "conversation_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
}
LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "description": "Resume: the frames after this seq, then the run to its end.",
    "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"},
}


def body(model: type[BaseModel]) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"required": True, "content": {"application/json": {"schema": ref}}}


def errors(*codes: int) -> dict[str, Any]:
    meaning = {
        400: "a bad body or parameter (`fields` names each problem)",
        401: "not signed in",
        403: "the admin role is needed",
        404: "no such conversation for this user",
        408: "the body did not arrive in time",
        409: "busy, or nothing waiting for this (files: the conversation has "
        "as many as it takes)",
        413: "the body is over the limit (files: `quota_exceeded` when the "
        "user's files would be over their quota)",
        415: "the body is not application/json (files: not multipart, or a "
        "kind of file not taken)",
        503: "the server is restarting or its store is unavailable",
    }
    return {
        str(code): {
            "description": meaning[code],
            "content": {"application/json": {"schema": ERROR}},
        }
        for code in (*codes, 401)
    }


def json_body(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"type": "object"}}},
    }


def events(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }


def control(summary: str, model: type[BaseModel]) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "parameters": [CONVERSATION],
            "requestBody": body(model),
            "responses": {"200": json_body("done"), **errors(400, 404, 409, 415)},
        }
    }


def returns(model: type[BaseModel], description: str) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {
        "description": description,
        "content": {"application/json": {"schema": ref}},
    }
