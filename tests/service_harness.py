"""A `ChatService` in process, read the way a client reads it.

Frames come from the session's outbox exactly as a socket's writer sends
them (JSON text, in `seq` order), and each is validated against the
protocol's `ServerMessage` union. Messages go in through the transport's own
parser, so they are checked as a client's would be.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from backend.app import make_service
from backend.chat.service import ChatService
from backend.chat.session import Session, Subscription
from backend.llm.base import LLMClient
from backend.prompts import PromptProvider
from backend.protocol import server_message_adapter
from backend.tools.base import ToolRegistry
from backend.transport.websocket import parse_message
from tests.conftest import make_settings
from tests.ws_client import Frame, label

RECEIVE_LIMIT_S = 10.0


class ServiceClient:
    def __init__(self, service: ChatService, session: Session) -> None:
        self.service = service
        self.session = session
        self.subscription: Subscription = session.outbox.subscribe(after_seq=None)
        self.seen: list[Frame] = []

    def send(self, **frame: Any) -> None:
        self.service.handle(self.session, parse_message(frame))

    async def recv(self) -> Frame:
        async with asyncio.timeout(RECEIVE_LIMIT_S):
            text = await self.subscription.next_frame()
        server_message_adapter.validate_json(text)
        frame: Frame = json.loads(text)
        self.seen.append(frame)
        return frame

    async def until(self, done: Callable[[Frame], bool]) -> list[Frame]:
        frames = [await self.recv()]
        while not done(frames[-1]):
            frames.append(await self.recv())
        return frames

    async def until_label(self, name: str) -> list[Frame]:
        return await self.until(lambda f: label(f) == name)

    async def run(self) -> list[Frame]:
        return await self.until_label("response_complete")

    async def chat(self, content: str, **fields: Any) -> list[Frame]:
        self.send(type="chat", content=content, **fields)
        return await self.run()


@asynccontextmanager
async def serving(
    llm: LLMClient, registry: ToolRegistry, **settings: Any
) -> AsyncIterator[ServiceClient]:
    """A started service with one session and a client reading it."""
    service = make_service(make_settings(**settings), llm, registry, PromptProvider())
    async with service:
        session, _ = service.open_session()
        yield ServiceClient(service, session)
