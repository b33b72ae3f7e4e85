"""`Listener`: the one pub/sub connection of `RedisBus`.

It hears the instance's inbox (`inbox:<id>`: commands, `C` + JSON, and
replies to its requests, `R` + JSON) and the frames of the conversations it
watches (`frames:<session>`: `<prev seq>:<seq>:<frame JSON>` from the
owner), and hands each on in the order it arrived. A quiet connection is
no failure; one that stops answering is found by PINGs, dropped and made
again, subscribed to the same channels.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from backend.aio import stop_if_cancelled
from backend.bus.base import BusError, FrameHandler
from backend.bus.connection import (
    FRAMES,
    RECONNECT_MAX_S,
    RETRY_MIN_S,
    client,
    frames,
    unreachable,
)

log = logging.getLogger(__name__)


class Listener:
    def __init__(
        self,
        url: str,
        inbox: str,
        *,
        heartbeat_s: float,
        redis_timeout_s: float,
        on_inbox: Callable[[str], None],
        on_frame: FrameHandler,
    ) -> None:
        self.url = url
        self.inbox = inbox
        self.redis_timeout_s = redis_timeout_s
        self._on_inbox = on_inbox
        self._on_frame = on_frame
        # its own pool, with redis-py's health checks: its waits for a
        # message are bounded by itself (a quiet connection is no error), and
        # one that stops answering is found by PINGs (see `_next_message`)
        self._heartbeat_s = heartbeat_s
        self._client = client(url, redis_timeout_s, health_check_interval=heartbeat_s)
        self._pubsub = self._client.pubsub()
        self._heard_at = 0.0
        self._pinged_at: float | None = None
        self.trouble: str | None = None
        """Why listening failed (None once it works again)."""

    async def start(self) -> None:
        await self._pubsub.subscribe(self.inbox)
        self._heard_at = asyncio.get_running_loop().time()

    async def close(self) -> None:
        with contextlib.suppress(RedisError, OSError):
            await self._pubsub.aclose()  # type: ignore[no-untyped-call]
        await self._client.aclose()

    async def watch(self, session_id: str) -> None:
        try:
            await self._pubsub.subscribe(frames(session_id))
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot watch {session_id}: {exc}") from exc

    async def unwatch(self, session_id: str) -> None:
        with contextlib.suppress(RedisError, OSError):
            await self._pubsub.unsubscribe(frames(session_id))

    async def listen(self) -> None:
        """The listener task: each message to its handler, in order."""
        pause = RETRY_MIN_S
        while True:
            try:
                message = await self._next_message()
            except (RedisError, OSError) as exc:
                stop_if_cancelled()
                self.trouble = unreachable(self.url, exc)
                log.warning("bus: listening failed (reconnecting): %s", exc)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RECONNECT_MAX_S)
                continue
            stop_if_cancelled()  # redis-py may return None for a cancellation
            pause = RETRY_MIN_S
            self.trouble = None
            if message is not None and message.get("type") == "message":
                self._hand_on(str(message["channel"]), str(message["data"]))

    def _hand_on(self, channel: str, data: str) -> None:
        if channel == self.inbox:
            self._on_inbox(data)
        elif channel.startswith(FRAMES):
            try:
                prev, seq, text = data.split(":", 2)
                numbers = int(prev), int(seq)
            except ValueError:
                log.error("bus: a malformed frame on %s, dropped", channel)
                return
            self._on_frame(channel[len(FRAMES) :], *numbers, text)

    async def _next_message(self) -> dict[str, Any] | None:
        """The next message (or None after a while). A quiet connection is
        fine; after a third of a lease of quiet it is PINGed, and one that
        does not answer within the Redis timeout is dropped (the next read
        connects again and subscribes to the same channels)."""
        loop = asyncio.get_running_loop()
        if self._pinged_at is None:
            wait = self._heard_at + self._heartbeat_s - loop.time()
        else:
            wait = self._pinged_at + self.redis_timeout_s - loop.time()
        # whatever is read shows the connection lives: a message, a
        # subscription's confirmation, a PING's answer (whose shape differs
        # between RESP2 and RESP3, hence not asked to be left out)
        message: dict[str, Any] | None = await self._pubsub.get_message(
            ignore_subscribe_messages=False, timeout=max(wait, 0)
        )
        now = loop.time()
        if message is not None:
            self._heard_at, self._pinged_at = now, None
        elif self._pinged_at is not None and now >= (
            self._pinged_at + self.redis_timeout_s
        ):
            self._heard_at, self._pinged_at = now, None
            if self._pubsub.connection is not None:
                await self._pubsub.connection.disconnect()
            raise RedisConnectionError(
                f"no answer to a PING within {self.redis_timeout_s:g} s"
            )
        elif self._pinged_at is None and now >= self._heard_at + self._heartbeat_s:
            await self._pubsub.ping()
            self._pinged_at = now
        return message
