"""A `ChatService` in process, read the way a client reads it.

Frames come from the session's outbox exactly as a socket's writer sends
them (JSON text, in `seq` order), and each is validated against the
protocol's `ServerMessage` union. Messages go in through the transport's own
parser, so they are checked as a client's would be.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from backend.app import StrategyFactory, make_service
from backend.chat.service import ChatService
from backend.chat.session import Session
from backend.chat.subscription import Subscription
from backend.llm.base import LLMClient
from backend.prompts import PromptProvider
from backend.store.sql import SqlStore
from backend.telemetry.signals import NO_TELEMETRY, Telemetry
from backend.tools.base import ToolRegistry
from backend.transport.websocket import parse_message
from tests.conftest import make_settings
from tests.ws_client import FrameReader


class ServiceClient(FrameReader):
    def __init__(self, service: ChatService, session: Session) -> None:
        self.service = service
        self.session = session
        self.subscription: Subscription = session.outbox.subscribe(after_seq=None)
        self.seen = []

    async def send(self, **frame: Any) -> None:
        await self.service.handle(self.session, parse_message(frame))

    async def receive_text(self) -> str:
        return await self.subscription.next_frame()


@asynccontextmanager
async def serving(
    llm: LLMClient,
    registry: ToolRegistry,
    *,
    strategies: StrategyFactory | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
    **settings: Any,
) -> AsyncIterator[ServiceClient]:
    """A started service, saving to a real (in-memory SQLite) store, with one
    session and a client reading it."""
    store = SqlStore("sqlite://")
    await store.open()
    service = make_service(
        make_settings(**settings),
        llm,
        registry,
        PromptProvider(),
        strategies,
        store,
        telemetry=telemetry,
    )
    try:
        async with service:
            session, _ = await service.open_session()
            yield ServiceClient(service, session)
    finally:
        await store.close()
