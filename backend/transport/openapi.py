"""The HTTP API described as OpenAPI 3.1 (served at `/openapi.json`, kept
in `docs/openapi.json`; `make schema` rewrites it, a test keeps it true).

Request bodies are the routes' own pydantic models, so the document cannot
drift from what the routes accept. The WebSocket protocol has its own JSON
Schema (`docs/protocol.schema.json`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from backend.protocol import FileInfo
from backend.transport.admin import Revoked, SignInList, Usage
from backend.transport.ag_ui import ag_ui_paths
from backend.transport.agent_api import AgentRequest
from backend.transport.api import (
    ApprovalBody,
    InputBody,
    StepsBody,
    StopBody,
    ToolResultBody,
)
from backend.transport.conversations import Rename
from backend.transport.exports import export_paths
from backend.transport.openai_requests import ChatCompletionRequest, openapi_paths
from backend.transport.tool_grants import tool_grant_paths
from backend.transport.ui_stream import ui_stream_paths
from backend.transport.ui_stream_body import UIStreamRequest

OPENAPI_PATH = Path("docs/openapi.json")
ERROR = {"$ref": "#/components/schemas/Error"}
TOOL_CALL = {
    "name": "tool_call_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
}
MODELS: tuple[type[BaseModel], ...] = (
    AgentRequest,
    InputBody,
    StopBody,
    StepsBody,
    ApprovalBody,
    ToolResultBody,
    Rename,
    FileInfo,
    SignInList,
    Revoked,
    Usage,
    ChatCompletionRequest,
    UIStreamRequest,
)
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


def _body(model: type[BaseModel]) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"required": True, "content": {"application/json": {"schema": ref}}}


def _errors(*codes: int) -> dict[str, Any]:
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


def _json(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"type": "object"}}},
    }


def _events(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }


def _control(summary: str, model: type[BaseModel]) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "parameters": [CONVERSATION],
            "requestBody": _body(model),
            "responses": {"200": _json("done"), **_errors(400, 404, 409, 415)},
        }
    }


def _returns(model: type[BaseModel], description: str) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {
        "description": description,
        "content": {"application/json": {"schema": ref}},
    }


def _admin_paths() -> dict[str, Any]:
    """`transport/admin.py`'s routes: all need the admin role (else 403)."""
    signin = {
        "name": "signin_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
    }
    user = {
        "name": "user",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
    }
    return {
        "/api/admin/signins": {
            "get": {
                "summary": "Live sign-ins (not revoked, not expired), newest first",
                "parameters": [
                    {"name": "user", "in": "query", "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": _returns(SignInList, "the sign-ins"),
                    **_errors(400, 403),
                },
            }
        },
        "/api/admin/signins/{signin_id}": {
            "delete": {
                "summary": "Revoke a sign-in",
                "parameters": [signin],
                "responses": {
                    "204": {"description": "revoked"},
                    **_errors(403, 404),
                },
            }
        },
        "/api/admin/users/{user}/revoke": {
            "post": {
                "summary": "Revoke all of a user's sign-ins",
                "parameters": [user],
                "responses": {
                    "200": _returns(Revoked, "the ids revoked"),
                    **_errors(403),
                },
            }
        },
        "/api/admin/usage": {
            "get": {
                "summary": "Per user: conversations, stored runs, bytes of files",
                "responses": {"200": _returns(Usage, "by user"), **_errors(403)},
            }
        },
    }


def _schemas() -> dict[str, Any]:
    """The `Error` body and the routes' own models."""
    schemas: dict[str, Any] = {
        "Error": {
            "type": "object",
            "required": ["error_type", "message"],
            "properties": {
                "error_type": {"type": "string"},
                "message": {"type": "string"},
                "fields": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "field": {"type": "string"},
                            "problem": {"type": "string"},
                        },
                    },
                },
            },
        }
    }
    for model in MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return schemas


def _agent_paths(base: str) -> dict[str, Any]:
    """`transport/agent_api.py`'s runs and `transport/api.py`'s controls."""
    return {
        "/api/agent": {
            "post": {
                "summary": "Run the agent on a query",
                "parameters": [LAST_EVENT_ID],
                "requestBody": _body(AgentRequest),
                "responses": {
                    "200": {
                        "description": "stream: the frames as events, then "
                        "`done`; not streaming: one JSON document",
                        "content": {
                            "text/event-stream": {"schema": {"type": "string"}},
                            "application/json": {"schema": {"type": "object"}},
                        },
                    },
                    **_errors(400, 404, 409, 415, 503),
                },
            }
        },
        f"{base}/events": {
            "get": {
                "summary": "Replay a conversation's frames and follow its run",
                "parameters": [CONVERSATION, LAST_EVENT_ID],
                "responses": {
                    "200": _events("the frames as events, then `done`"),
                    **_errors(400, 404),
                },
            }
        },
        f"{base}/input": _control("Answer the pending question", InputBody),
        f"{base}/stop": _control("Stop the run", StopBody),
        f"{base}/steps": _control("Grant the run more steps", StepsBody),
        f"{base}/approvals/{{tool_call_id}}": {
            "post": {
                "summary": "Approve or reject a tool call",
                "parameters": [CONVERSATION, TOOL_CALL],
                "requestBody": _body(ApprovalBody),
                "responses": {
                    "200": _json("approved or rejected"),
                    **_errors(400, 404, 409, 415),
                },
            }
        },
        f"{base}/tool-results/{{tool_call_id}}": {
            "post": {
                "summary": "Return the result of a client tool's call",
                "parameters": [CONVERSATION, TOOL_CALL],
                "requestBody": _body(ToolResultBody),
                "responses": {
                    "200": _json("returned"),
                    **_errors(400, 404, 409, 415),
                },
            }
        },
    }


def _conversation_paths(base: str) -> dict[str, Any]:
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
                ],
                "responses": {"200": _json("a page"), **_errors(400)},
            }
        },
        base: {
            "get": {
                "summary": "One conversation: messages and runs",
                "parameters": [CONVERSATION],
                "responses": {"200": _json("the conversation"), **_errors(404)},
            },
            "patch": {
                "summary": "Rename it",
                "parameters": [CONVERSATION],
                "requestBody": _body(Rename),
                "responses": {"200": _json("renamed"), **_errors(400, 404, 415)},
            },
            "delete": {
                "summary": "Delete it with its runs and frames",
                "parameters": [CONVERSATION],
                "responses": {
                    "204": {"description": "deleted"},
                    **_errors(404, 409),
                },
            },
        },
    }


def _file_paths(base: str) -> dict[str, Any]:
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
                    **_errors(400, 404, 408, 409, 413, 415),
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
                    **_errors(404),
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
                    **_errors(404),
                },
            }
        },
    }


def openapi() -> dict[str, Any]:
    base = "/api/conversations/{conversation_id}"
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "loopwire HTTP API",
            "version": "1",
            "description": "Authentication: `Authorization: Bearer <token>` (a "
            "token of the tokens file, or a JWT from the configured identity "
            "provider) or the login cookie, when the server requires it; the "
            "`/api/admin/` routes need the admin role. Frames streamed as "
            "events follow the WebSocket protocol's schema.",
        },
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            **_agent_paths(base),
            **ag_ui_paths(),
            **ui_stream_paths(),
            **tool_grant_paths(),
            **_conversation_paths(base),
            **export_paths(),
            **_file_paths(base),
            **_admin_paths(),
            **openapi_paths(),
            "/api/info": {
                "get": {
                    "summary": "What the server offers",
                    "responses": {"200": _json("as session_ready says")},
                }
            },
            "/healthz": {
                "get": {
                    "summary": "Liveness",
                    "security": [],
                    "responses": {"200": _json('{"status": "ok"}')},
                }
            },
        },
    }


def text() -> str:
    return json.dumps(openapi(), indent=2, sort_keys=True) + "\n"


async def openapi_route(request: Request) -> Response:
    return JSONResponse(openapi())


if __name__ == "__main__":  # `make schema`
    OPENAPI_PATH.write_text(text(), encoding="utf-8")
    print(f"wrote {OPENAPI_PATH}", file=sys.stderr)
