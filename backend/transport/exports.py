"""Export and import of a conversation (`chat/transcript_export.py`,
`chat/transcript_import.py` hold the formats).

- `GET /api/conversations/{id}/export?format=json|markdown` (default
  `json`): the caller's conversation as a download (`Content-Disposition:
  attachment`, the file named after its title); 404 for anyone else's.
- `POST /api/conversations/import` with a JSON export (at most
  `MAX_IMPORT_BYTES`): a new conversation of the caller's holding its
  messages, 201 with its summary and what was left out (runs, files).
  Refused with 413 past the limit, else 400 naming the first problem
  (`fields`); nothing is created then.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.chat.service import ChatService
from backend.chat.transcript_export import export_document, filename, markdown
from backend.chat.transcript_import import Imported, ImportProblem, read_export
from backend.errors import NoSuchConversation, ProtocolError
from backend.store.base import Batch, Store
from backend.store.records import ConversationRecord
from backend.transport.auth import user_of
from backend.transport.bodies import MAX_PROBLEMS, describe, read_json
from backend.transport.openapi_parts import CONVERSATION
from backend.transport.refusal import Refused

MAX_IMPORT_BYTES = 5 * 1024 * 1024
FORMATS = {
    "json": ("json", "application/json"),
    "markdown": ("md", "text/markdown; charset=utf-8"),
}
"""`format` → the file's extension, its media type."""
IMPORTED_TITLE = "Imported conversation"
"""The title of an imported conversation whose export had none."""


def _store(request: Request) -> tuple[ChatService, Store]:
    service: ChatService = request.app.state.chat
    if service.store is None:
        raise Refused(404, "not_found", "this server does not keep conversations")
    return service, service.store


async def export_conversation(request: Request) -> Response:
    service, store = _store(request)
    kind = request.query_params.get("format", "json")
    if kind not in FORMATS:
        raise Refused(400, "invalid_message", "format must be json or markdown")
    conversation_id = request.path_params["conversation_id"]
    record = await store.conversation(conversation_id)
    if record is None or record.owner != user_of(request):
        raise Refused(404, "not_found", f"no conversation {conversation_id!r}")
    with contextlib.suppress(ProtocolError, NoSuchConversation):
        # the owner could not be asked: the store has it up to its last save
        await service.flush_session(record.id, record.owner)
    messages = await store.messages(record.id)
    if kind == "markdown":
        body = markdown(record, messages)
    else:
        runs, files = await store.runs(record.id), await store.files(record.id)
        document = export_document(record, messages, runs, files)
        body = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    extension, media_type = FORMATS[kind]
    name = filename(record.title, extension)
    headers = {
        "Content-Disposition": f'attachment; filename="{name}"',
        "Cache-Control": "no-store",
    }
    return Response(body, media_type=media_type, headers=headers)


async def import_conversation(request: Request) -> Response:
    _, store = _store(request)
    data = await read_json(request, MAX_IMPORT_BYTES)
    try:
        imported = read_export(data)
    except ImportProblem as exc:
        fields = [{"field": exc.field, "problem": exc.problem}]
        raise Refused(
            400, "invalid_message", f"invalid export: {exc}", fields=fields
        ) from exc
    except ValidationError as exc:
        fields, problems = describe(exc, most=MAX_PROBLEMS)
        raise Refused(
            400, "invalid_message", f"invalid export: {problems}", fields=fields
        ) from exc
    now = time.time()
    record = ConversationRecord(
        id=uuid.uuid4().hex,
        owner=user_of(request),
        title=imported.title or IMPORTED_TITLE,
        created_at=now,
        updated_at=now,
        origin="import",
    )
    messages = list(enumerate(imported.messages))
    await store.write(Batch(record.id, now, create=record, messages=messages))
    location = {"Location": f"/api/conversations/{record.id}"}
    return JSONResponse(_answer(record, imported), 201, headers=location)


def _answer(record: ConversationRecord, imported: Imported) -> dict[str, Any]:
    """The new conversation's summary, and what the import left out."""
    left_out = {"runs": imported.runs_left_out, "files": imported.files_left_out}
    return {
        **record.model_dump(
            include={"id", "title", "created_at", "updated_at", "origin"}
        ),
        "messages": len(imported.messages),
        "closed_calls": imported.closed_calls,
        "left_out": left_out,
    }


def routes() -> list[Route]:
    return [
        Route(
            "/api/conversations/{conversation_id}/export",
            export_conversation,
            methods=["GET"],
        ),
        Route("/api/conversations/import", import_conversation, methods=["POST"]),
    ]


def export_paths() -> dict[str, Any]:
    """The routes in the OpenAPI document (`transport/openapi.py`)."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    kind = {
        "name": "format",
        "in": "query",
        "schema": {"type": "string", "enum": list(FORMATS), "default": "json"},
    }
    download = {
        "description": "the export, as an attachment named after the title",
        "content": {"application/json": {}, "text/markdown": {}},
    }
    created = {
        "description": "the new conversation's summary, its message count, the "
        "calls given a `cancelled` result and what was left out (runs, files)",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }

    def refusal(text: str) -> dict[str, Any]:
        return {"description": text, "content": error}

    return {
        "/api/conversations/{conversation_id}/export": {
            "get": {
                "summary": "Export a conversation as JSON (importable) or Markdown",
                "parameters": [CONVERSATION, kind],
                "responses": {
                    "200": download,
                    "400": refusal("an unknown format"),
                    "404": refusal("no such conversation for this user"),
                },
            }
        },
        "/api/conversations/import": {
            "post": {
                "summary": "Import a JSON export as a new conversation (its "
                "messages; not its runs or files)",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "responses": {
                    "201": created,
                    "400": refusal("not an export this server reads (`fields`)"),
                    "413": refusal(f"over {MAX_IMPORT_BYTES} bytes"),
                    "415": refusal("the body is not application/json"),
                },
            }
        },
    }
