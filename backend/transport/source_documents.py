"""`GET /api/sources/{source}/documents/{path}`: a cited document, opened.

A citation (`chat_response.sources[].url`) links here. Only a document the
source's index holds is served, from inside the source's folder. Whatever
it holds, it is never rendered as a page of this origin: Markdown, text and
HTML come as plain text, a PDF as a PDF, and every answer forbids content
sniffing and runs sandboxed (`Content-Security-Policy: sandbox`).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from backend.sources.library import Library
from backend.sources.links import PREFIX
from backend.text import shorten
from backend.transport.openapi_parts import errors
from backend.transport.refusal import Refused

_PDF = "application/pdf"
_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox",
    "Cache-Control": "private, no-cache",
}


async def source_document(request: Request) -> Response:
    source = request.path_params["source"]
    path = request.path_params["path"]
    library: Library | None = getattr(request.app.state, "library", None)
    if library is None or PurePosixPath(path).is_absolute() or ".." in path.split("/"):
        raise Refused(404, "not_found", "no such document")
    file = await library.document(source, path)
    if file is None:
        named = shorten(path, 120)
        raise Refused(404, "not_found", f"no document {named!r} in {source!r}")
    pdf = file.suffix.lower() == ".pdf"
    return FileResponse(
        file,
        media_type=_PDF if pdf else "text/plain; charset=utf-8",
        headers=_HEADERS,
        content_disposition_type="inline",
        filename=file.name,
    )


def routes() -> list[Route]:
    return [
        Route(
            f"{PREFIX}/{{source}}/documents/{{path:path}}",
            source_document,
            methods=["GET"],
        )
    ]


def document_paths() -> dict[str, Any]:
    """The route in the OpenAPI document (`transport/openapi.py`)."""
    named = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in ("source", "path")
    ]
    return {
        f"{PREFIX}/{{source}}/documents/{{path}}": {
            "get": {
                "summary": "A cited document (`chat_response.sources[].url`): "
                "text as text/plain, a PDF as a PDF, never as a page (sandboxed)",
                "parameters": named,
                "responses": {
                    "200": {
                        "description": "the document",
                        "content": {"text/plain": {}, "application/pdf": {}},
                    },
                    **errors(404),
                },
            }
        }
    }
