"""The conversations' routes in the OpenAPI document (`transport/openapi.py`):
`transport/conversations.py`'s and `transport/files.py`'s.
"""

from __future__ import annotations

from typing import Any

from backend.origins import ORIGINS
from backend.transport.conversations import Rename
from backend.transport.openapi_parts import (
    CONVERSATION,
    FILE,
    FILE_LIST,
    UPLOAD_FORM,
    body,
    errors,
    json_body,
)

ORIGIN = {
    "name": "origin",
    "in": "query",
    "description": "only conversations started by these kinds of client, "
    f"comma-separated, each one of: {', '.join(ORIGINS)} (another is a 400)",
    "schema": {"type": "string", "example": "page,unknown"},
}


def conversation_paths(base: str) -> dict[str, Any]:
    """`transport/conversations.py`'s routes."""
    return {
        "/api/conversations": {
            "get": {
                "summary": "The caller's conversations, newest first; with `q`, "
                "those matching its words, best first (docs/search.md)",
                "parameters": [
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    {"name": "cursor", "in": "query", "schema": {"type": "string"}},
                    {"name": "q", "in": "query", "schema": {"type": "string"}},
                    ORIGIN,
                ],
                "responses": {"200": json_body("a page"), **errors(400)},
            }
        },
        base: {
            "get": {
                "summary": "One conversation: messages, runs and its custom "
                "instructions",
                "parameters": [CONVERSATION],
                "responses": {"200": json_body("the conversation"), **errors(404)},
            },
            "patch": {
                "summary": "Rename it, set its custom instructions (empty: "
                "none), or both; neither is a 400",
                "parameters": [CONVERSATION],
                "requestBody": body(Rename),
                "responses": {"200": json_body("renamed"), **errors(400, 404, 415)},
            },
            "delete": {
                "summary": "Delete it with its runs and frames",
                "parameters": [CONVERSATION],
                "responses": {
                    "204": {"description": "deleted"},
                    **errors(404, 409),
                },
            },
        },
    }


def file_paths(base: str) -> dict[str, Any]:
    """`transport/files.py`'s routes."""
    return {
        f"{base}/files": {
            "post": {
                "summary": "Upload a file (multipart: `file`, optional "
                "`description`); announced with `files_update`",
                "parameters": [CONVERSATION],
                "requestBody": UPLOAD_FORM,
                "responses": {
                    "201": {
                        "description": "the file",
                        "content": {"application/json": {"schema": FILE}},
                    },
                    **errors(400, 404, 408, 409, 413, 415),
                },
            },
            "get": {
                "summary": "The conversation's files, oldest first",
                "parameters": [CONVERSATION],
                "responses": {
                    "200": {
                        "description": '{"items": [FileInfo, …]}',
                        "content": {"application/json": {"schema": FILE_LIST}},
                    },
                    **errors(404),
                },
            },
        },
        f"{base}/files/{{file_id}}": {
            "get": {
                "summary": "Download a file (as an attachment)",
                "parameters": [
                    CONVERSATION,
                    {
                        "name": "file_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "the content, with its media type",
                        "content": {"application/octet-stream": {}},
                    },
                    **errors(404),
                },
            }
        },
    }
