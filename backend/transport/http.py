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
from backend.telemetry.metrics import CONTENT_TYPE
from backend.transport.auth import role_of, user_of
from backend.users import ADMIN, Users

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
    "Referrer-Policy": "same-origin",
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
    users: Users = request.app.state.users
    sharing = bool(request.app.state.settings.sharing)
    response = templates.TemplateResponse(
        request,
        "index.html",
        {
            "model": service.llm.model,
            "provider": service.llm.provider,
            "config": {
                **page_config(service),
                "sharing": sharing,
                "admin": role_of(request) == ADMIN,
            },
            "signed_in_as": user_of(request) if users.enabled else None,
        },
    )
    response.headers.update(PAGE_HEADERS)
    return response


async def health(request: Request) -> Response:
    """Health, open to all: `{"status": "ok"}` and nothing about the setup;
    503 `{"status": "unavailable", "reason": …}` while the instance cannot
    reach the Redis it coordinates through (the URL without its password),
    so that a load balancer sends its clients to the others."""
    service: ChatService = request.app.state.chat
    trouble = service.bus.trouble
    if trouble is not None:
        return JSONResponse(
            {"status": "unavailable", "reason": trouble},
            status_code=503,
            headers={"Cache-Control": "no-store"},
        )
    return JSONResponse({"status": "ok"}, headers={"Cache-Control": "no-store"})


async def info(request: Request) -> Response:
    """What `session_ready` says about the server, and each MCP server's state
    in one word (`up`, `down`, `failed`, `disabled`, `closed`); the reasons,
    which may name commands and URLs, are in the log."""
    service: ChatService = request.app.state.chat
    mcp = getattr(request.app.state, "mcp", None)
    states = mcp.status() if mcp is not None else {}
    body = service.server_info().model_dump(mode="json")
    body["mcp"] = {name: state.partition(":")[0] for name, state in states.items()}
    return JSONResponse(body)


async def metrics(request: Request) -> Response:
    """This instance's metrics in Prometheus's text format
    (`telemetry/metrics.py`); protected like the API unless
    `LOOPWIRE_METRICS_PUBLIC=1`."""
    service: ChatService = request.app.state.chat
    return Response(
        service.telemetry.metrics.exposition(),
        media_type=CONTENT_TYPE,
        headers={"Cache-Control": "no-store"},
    )


def routes() -> list[Route | Mount]:
    return [
        Route("/", index),
        Route("/c/{conversation_id}", index),  # the page, opened on a conversation
        Route("/healthz", health),
        Route("/api/info", info),
        Route("/metrics", metrics),
        Mount("/static", StaticFiles(directory=FRONTEND_DIR / "static"), name="static"),
    ]
