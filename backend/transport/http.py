"""HTTP routes: the chat page, health, and server information.

The page is a Jinja2 template plus static ES modules (`frontend/`). What the
scripts need to start is handed over in a JSON block (`#lw-config`), never in
inline script, so the Content-Security-Policy can forbid inline code. Model
output is rendered through DOMPurify, the only Trusted Types policy allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from backend.chat.service import ChatService

FRONTEND_DIR = Path(__file__).resolve().parent.parent.parent / "frontend"
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "manifest-src 'self'",
        "form-action 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types dompurify",
    ]
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

templates = Jinja2Templates(directory=FRONTEND_DIR / "templates")


def page_config(service: ChatService) -> dict[str, Any]:
    """What the page's scripts start from, before the WebSocket says more."""
    return {
        "ws_path": "/ws",
        "info": service.server_info().model_dump(mode="json"),
    }


async def index(request: Request) -> Response:
    service: ChatService = request.app.state.chat
    response = templates.TemplateResponse(
        request,
        "index.html",
        {
            "model": service.llm.model,
            "provider": service.llm.provider,
            "config": page_config(service),
        },
    )
    response.headers.update(PAGE_HEADERS)
    return response


async def health(request: Request) -> Response:
    """`ok`, with the state of each MCP server (`up`, `down: …`, `failed: …`)."""
    mcp = getattr(request.app.state, "mcp", None)
    servers = mcp.status() if mcp is not None else {}
    return JSONResponse({"status": "ok", "mcp": servers})


async def info(request: Request) -> Response:
    service: ChatService = request.app.state.chat
    return JSONResponse(service.server_info().model_dump(mode="json"))


def routes() -> list[Route | Mount]:
    return [
        Route("/", index),
        Route("/healthz", health),
        Route("/api/info", info),
        Mount("/static", StaticFiles(directory=FRONTEND_DIR / "static"), name="static"),
    ]
