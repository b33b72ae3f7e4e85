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
    BudgetBody,
    InputBody,
    StepsBody,
    StopBody,
    ToolResultBody,
)
from backend.transport.branches import branch_paths
from backend.transport.conversations import Rename
from backend.transport.exports import export_paths
from backend.transport.instructions import instruction_paths
from backend.transport.openai_requests import ChatCompletionRequest, openapi_paths
from backend.transport.openapi_conversations import conversation_paths, file_paths
from backend.transport.openapi_parts import (
    CONVERSATION,
    LAST_EVENT_ID,
    TOOL_CALL,
    body,
    control,
    errors,
    events,
    json_body,
    returns,
)
from backend.transport.shares import share_paths
from backend.transport.source_documents import document_paths
from backend.transport.tool_grants import tool_grant_paths
from backend.transport.ui_stream import ui_stream_paths
from backend.transport.ui_stream_body import UIStreamRequest
from backend.transport.usage_api import usage_paths

OPENAPI_PATH = Path("docs/openapi.json")
MODELS: tuple[type[BaseModel], ...] = (
    AgentRequest,
    InputBody,
    StopBody,
    StepsBody,
    BudgetBody,
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
                    "200": returns(SignInList, "the sign-ins"),
                    **errors(400, 403),
                },
            }
        },
        "/api/admin/signins/{signin_id}": {
            "delete": {
                "summary": "Revoke a sign-in",
                "parameters": [signin],
                "responses": {
                    "204": {"description": "revoked"},
                    **errors(403, 404),
                },
            }
        },
        "/api/admin/users/{user}/revoke": {
            "post": {
                "summary": "Revoke all of a user's sign-ins",
                "parameters": [user],
                "responses": {
                    "200": returns(Revoked, "the ids revoked"),
                    **errors(403),
                },
            }
        },
        "/api/admin/usage": {
            "get": {
                "summary": "Per user: conversations, stored runs, bytes of files",
                "responses": {"200": returns(Usage, "by user"), **errors(403)},
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
                "requestBody": body(AgentRequest),
                "responses": {
                    "200": {
                        "description": "stream: the frames as events, then "
                        "`done`; not streaming: one JSON document",
                        "content": {
                            "text/event-stream": {"schema": {"type": "string"}},
                            "application/json": {"schema": {"type": "object"}},
                        },
                    },
                    **errors(400, 404, 409, 415, 503),
                },
            }
        },
        f"{base}/events": {
            "get": {
                "summary": "Replay a conversation's frames and follow its run",
                "parameters": [CONVERSATION, LAST_EVENT_ID],
                "responses": {
                    "200": events("the frames as events, then `done`"),
                    **errors(400, 404),
                },
            }
        },
        f"{base}/input": control("Answer the pending question", InputBody),
        f"{base}/stop": control("Stop the run", StopBody),
        f"{base}/steps": control("Grant the run more steps", StepsBody),
        f"{base}/budget": control("Raise the run's budget", BudgetBody),
        f"{base}/approvals/{{tool_call_id}}": {
            "post": {
                "summary": "Approve or reject a tool call",
                "parameters": [CONVERSATION, TOOL_CALL],
                "requestBody": body(ApprovalBody),
                "responses": {
                    "200": json_body("approved or rejected"),
                    **errors(400, 404, 409, 415),
                },
            }
        },
        f"{base}/tool-results/{{tool_call_id}}": {
            "post": {
                "summary": "Return the result of a client tool's call",
                "parameters": [CONVERSATION, TOOL_CALL],
                "requestBody": body(ToolResultBody),
                "responses": {
                    "200": json_body("returned"),
                    **errors(400, 404, 409, 415),
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
            **instruction_paths(),
            **usage_paths(),
            **conversation_paths(base),
            **export_paths(),
            **share_paths(),
            **branch_paths(),
            **document_paths(),
            **file_paths(base),
            **_admin_paths(),
            **openapi_paths(),
            "/api/info": {
                "get": {
                    "summary": "What the server offers",
                    "responses": {"200": json_body("as session_ready says")},
                }
            },
            "/healthz": {
                "get": {
                    "summary": "Liveness",
                    "security": [],
                    "responses": {"200": json_body('{"status": "ok"}')},
                }
            },
            "/metrics": {
                "get": {
                    "summary": "This instance's metrics, in Prometheus's text "
                    "format (open with LOOPWIRE_METRICS_PUBLIC=1)",
                    "responses": {
                        "200": {
                            "description": "docs/observability.md lists them",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
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
