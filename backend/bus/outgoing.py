"""`Outgoing`: what `RedisBus` sends, queued and written by one task.

Frames, replies and lease releases are queued and sent in pipelines, in
order, so a watcher gets an `attach` reply before the frames published after
it. The queue is bounded for frames (past `max_queued`, a frame is dropped:
its watchers see the gap and attach again); replies and releases always go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Literal

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from backend.aio import stop_if_cancelled
from backend.bus.connection import Warnings

log = logging.getLogger(__name__)

BATCH = 512
"""Most queued messages sent in one pipeline."""
MAX_QUEUED = 10_000
"""Most messages queued for Redis before frames are dropped."""

Op = Literal["publish", "release"]
Message = tuple[Op, str, str]
"""(`publish`, channel, payload) or (`release`, lease key, "")."""


class Outgoing:
    def __init__(
        self,
        redis: aioredis.Redis,
        release: AsyncScript,
        instance_id: str,
        *,
        max_queued: int,
        warnings: Warnings,
    ) -> None:
        self._redis = redis
        self._release = release
        self.instance_id = instance_id
        self.max_queued = max_queued
        self._warnings = warnings
        self.queue: asyncio.Queue[Message] = asyncio.Queue()
        self.frames_dropped = 0
        """Frames not sent because the queue was full (since the start)."""

    def frame(self, channel: str, payload: str) -> None:
        """Queue a frame, unless too much waits already (then drop it)."""
        if self.queue.qsize() >= self.max_queued:
            # the watchers see the gap at the next frame and attach again
            self.frames_dropped += 1
            self._warnings.warn(
                "full",
                "bus: %d messages wait for Redis; frames dropped: %d",
                self.queue.qsize(),
            )
            return
        self.queue.put_nowait(("publish", channel, payload))

    def reply(self, channel: str, payload: str) -> None:
        """Queue a reply (never dropped: there is one per command)."""
        self.queue.put_nowait(("publish", channel, payload))

    def release(self, key: str) -> None:
        """Queue giving a lease up (if it still names this instance)."""
        self.queue.put_nowait(("release", key, ""))

    async def drain(self, timeout_s: float) -> None:
        """Send what is queued before stopping (the last frames and replies)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.queue.join()

    async def write(self) -> None:
        """The writer task: send what is queued, a batch at a time."""
        while True:
            batch = [await self.queue.get()]
            while not self.queue.empty() and len(batch) < BATCH:
                batch.append(self.queue.get_nowait())
            try:
                await self._send(batch)
            except (RedisError, OSError) as exc:
                stop_if_cancelled()
                # watchers see the gap (each frame names the one before) and
                # ask the owner again; a lost release expires with its TTL
                log.warning("bus: %d messages not sent: %s", len(batch), exc)
            finally:
                for _ in batch:
                    self.queue.task_done()

    async def _send(self, batch: list[Message]) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            for op, key, payload in batch:
                if op == "publish":
                    pipe.publish(key, payload)
                else:
                    await self._release(
                        keys=[key], args=[self.instance_id], client=pipe
                    )
            await pipe.execute()
