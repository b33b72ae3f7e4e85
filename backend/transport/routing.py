"""Every route of the app, in the order Starlette matches them."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route, WebSocketRoute

from backend.identity.identities import Identities
from backend.settings import Settings
from backend.transport import (
    admin,
    api,
    branches,
    conversations,
    exports,
    files,
    http,
    instructions,
    openai_api,
    shares,
    source_documents,
    tool_grants,
    usage_api,
)
from backend.transport.ag_ui import routes as ag_ui_routes
from backend.transport.agent_api import AgentAPI
from backend.transport.login import Login
from backend.transport.oidc import OidcLogin
from backend.transport.openapi import openapi_route
from backend.transport.ui_stream import routes as ui_stream_routes
from backend.transport.websocket import websocket_endpoint


def oidc_routes(
    identities: Identities, login: Login, settings: Settings
) -> list[Route]:
    """`/login/oidc` and its callback, when an OIDC provider is configured."""
    if identities.oidc is None:
        return []
    return OidcLogin(identities.oidc, login, public_url=settings.public_url).routes()


def routes(identities: Identities, login: Login, settings: Settings) -> list[BaseRoute]:
    return [
        *http.routes(),
        *login.routes(),
        *oidc_routes(identities, login, settings),
        *admin.routes(),
        *api.routes(),
        *tool_grants.routes(),
        *instructions.routes(),
        *usage_api.routes(),
        *AgentAPI().routes(),
        *ag_ui_routes(),
        *openai_api.routes(),
        *ui_stream_routes(),
        Route("/openapi.json", openapi_route),
        *exports.routes(),
        *shares.routes(),
        *conversations.routes(),
        *branches.routes(),
        *files.routes(),
        *source_documents.routes(),
        WebSocketRoute("/ws", websocket_endpoint),
    ]
