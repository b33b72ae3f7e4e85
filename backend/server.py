"""`Server`: uvicorn with loopwire's shutdown.

On the first SIGTERM or SIGINT the chat service drains before uvicorn stops
(`ChatService.drain`): new connections and runs are refused, every run is
parked at its next phase boundary or wait and checkpointed, everything is
saved, each client gets an `error` frame (`server_restarting`) and a close
with code 1012, and only then does uvicorn shut down. A second signal is
uvicorn's own: stop now.
"""

from __future__ import annotations

import asyncio
import logging
from types import FrameType

import uvicorn

from backend.chat.service import ChatService

log = logging.getLogger("loopwire")


class Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, service: ChatService) -> None:
        super().__init__(config)
        self.service = service
        self._drain_asked: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        asked = self._drain_asked
        if asked is None or asked.is_set() or self._loop is None:
            super().handle_exit(sig, frame)
            return
        self._loop.call_soon_threadsafe(asked.set)

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._drain_asked = asyncio.Event()
        async with asyncio.TaskGroup() as tasks:
            drainer = tasks.create_task(self._drain_when_asked())
            try:
                await super().main_loop()
            finally:
                drainer.cancel()

    async def _drain_when_asked(self) -> None:
        assert self._drain_asked is not None
        await self._drain_asked.wait()
        log.info("loopwire: shutting down: parking runs and saving conversations")
        try:
            await self.service.drain()
        except Exception:  # still stop: a failed drain must not keep it up
            log.exception("loopwire: the shutdown drain failed")
        self.should_exit = True
