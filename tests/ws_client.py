"""A small protocol-v1 client for tests: send frames, collect them in order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection

from backend.protocol import server_message_adapter

Frame = dict[str, Any]
RECEIVE_LIMIT_S = 10.0


def label(frame: Frame) -> str:
    """A compact name for a frame, for asserting ordered sequences."""
    kind = frame["type"]
    if kind == "agent_update":
        return str(frame["update_type"])
    if kind in (
        "tool_start",
        "tool_complete",
        "tool_approval_request",
        "client_tool_call",
    ):
        return f"{kind}:{frame['tool_name']}"
    if kind == "tool_error":
        return f"tool_error:{frame['tool_name']}:{frame['status']}"
    if kind == "error":
        return f"error:{frame['error_type']}"
    return str(kind)


class FrameReader:
    """Reading a session's frames in order; subclasses say how to send and
    receive (a WebSocket, or a service in process)."""

    seen: list[Frame]

    async def send(self, **frame: Any) -> None:
        raise NotImplementedError

    async def receive_text(self) -> str:
        raise NotImplementedError

    async def recv(self, limit_s: float = RECEIVE_LIMIT_S) -> Frame:
        """The next frame, checked against the protocol's `ServerMessage` union
        (a test that is stuck fails after `limit_s`)."""
        async with asyncio.timeout(limit_s):
            text = await self.receive_text()
        server_message_adapter.validate_json(text)
        frame: Frame = json.loads(text)
        self.seen.append(frame)
        return frame

    async def until(
        self, done: Callable[[Frame], bool], limit_s: float = RECEIVE_LIMIT_S
    ) -> list[Frame]:
        """Frames up to and including the first for which `done` is true."""
        frames = [await self.recv(limit_s)]
        while not done(frames[-1]):
            frames.append(await self.recv(limit_s))
        return frames

    async def until_label(self, name: str) -> list[Frame]:
        return await self.until(lambda f: label(f) == name)

    async def run(self) -> list[Frame]:
        """Frames until the end of the current run (`response_complete`)."""
        return await self.until_label("response_complete")

    async def chat(self, content: str, **fields: Any) -> list[Frame]:
        await self.send(type="chat", content=content, **fields)
        return await self.run()


class Client(FrameReader):
    """A protocol-v1 client on a WebSocket."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.seen = []

    async def send(self, **frame: Any) -> None:
        await self.connection.send(json.dumps(frame))

    async def send_raw(self, data: str | bytes) -> None:
        await self.connection.send(data)

    async def receive_text(self) -> str:
        text = await self.connection.recv()
        return text if isinstance(text, str) else text.decode()


def labels(frames: list[Frame]) -> list[str]:
    return [label(f) for f in frames]
