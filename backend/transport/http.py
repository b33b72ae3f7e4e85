"""HTTP routes: the chat page, health, and server information."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from backend.chat.service import ChatService

FRONTEND_DIR = Path(__file__).resolve().parent.parent.parent / "frontend"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)

templates = Jinja2Templates(directory=FRONTEND_DIR / "templates")


async def index(request: Request) -> Response:
    service: ChatService = request.app.state.chat
    response = templates.TemplateResponse(
        request,
        "index.html",
        {"model": service.llm.model, "provider": service.llm.provider},
    )
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


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
