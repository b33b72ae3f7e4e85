"""`RedisBus`: instances coordinated through one Redis server.

Keys and channels (under `PREFIX`, `backend.bus.connection`):

- `lease:<session>` = the owning instance's id, with a TTL, and
  `instance:<id>`: the instance is alive (`backend.bus.leases`);
- channel `inbox:<id>`: commands to the instance (`C` + JSON) and replies
  to its requests (`R` + JSON) (`backend.bus.requests`);
- channel `frames:<session>`: `<prev seq>:<seq>:<frame JSON>` from the
  owner.

One connection listens (pub/sub, `backend.bus.listener`) and one task
writes (`backend.bus.outgoing`): frames and replies are queued and sent in
pipelines, in order, so a watcher gets an `attach` reply before the frames
published after it; past `max_queued`, frames are dropped (replies and
releases always go). At most `max_commands` commands run at once in the
bus's TaskGroup; one more is refused with `unavailable`.

`trouble` says why the instance cannot coordinate (a renewal or the listener
failing), for `/healthz`; it clears when they succeed again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import replace

from redis.exceptions import RedisError

from backend.aio import cancel_all
from backend.bus.base import (
    NOT_HERE,
    BusError,
    Command,
    CommandHandler,
    FrameHandler,
    LostHandler,
    Reply,
)
from backend.bus.connection import (
    DEFAULT_REDIS_TIMEOUT_S,
    PREFIX,
    Warnings,
    check_reachable,
    client,
    frames,
    inbox,
    unreachable,
)
from backend.bus.leases import RELEASE, Leases
from backend.bus.listener import Listener
from backend.bus.outgoing import MAX_QUEUED, Outgoing
from backend.bus.requests import MAX_COMMANDS, Requests
from backend.redaction import bare_urls

__all__ = ["PREFIX", "RedisBus", "check_reachable"]

log = logging.getLogger(__name__)


async def _no_command(_command: Command) -> Reply:
    return NOT_HERE


class RedisBus:
    clustered = True

    def __init__(
        self,
        url: str,
        *,
        lease_ttl_s: float = 10.0,
        timeout_s: float = 5.0,
        redis_timeout_s: float = DEFAULT_REDIS_TIMEOUT_S,
        instance_id: str | None = None,
        max_queued: int = MAX_QUEUED,
        max_commands: int = MAX_COMMANDS,
    ) -> None:
        self.instance_id = instance_id or uuid.uuid4().hex[:12]
        self.lease_ttl_s = lease_ttl_s
        self.timeout_s = timeout_s
        self.url = url
        self.on_command: CommandHandler = _no_command
        self.on_frame: FrameHandler = lambda _sid, _prev, _seq, _text: None
        self.on_lost: LostHandler = lambda _ids: None
        self._redis = client(url, redis_timeout_s)
        release = self._redis.register_script(RELEASE)
        warnings = Warnings()
        self.outgoing = Outgoing(
            self._redis,
            release,
            self.instance_id,
            max_queued=max_queued,
            warnings=warnings,
        )
        self.leases = Leases(
            self._redis,
            url,
            self.instance_id,
            lease_ttl_s=lease_ttl_s,
            outgoing=self.outgoing,
            release=release,
            on_lost=lambda ids: self.on_lost(ids),
        )
        self.requests = Requests(
            self._redis,
            self.instance_id,
            outgoing=self.outgoing,
            on_command=lambda: self.on_command,
            max_commands=max_commands,
            warnings=warnings,
        )
        self.listener = Listener(
            url,
            inbox(self.instance_id),
            heartbeat_s=lease_ttl_s / 3,
            redis_timeout_s=redis_timeout_s,
            on_inbox=self.requests.arrived,
            on_frame=lambda *frame: self.on_frame(*frame),
        )
        self._loops: list[asyncio.Task[None]] = []

    @property
    def trouble(self) -> str | None:
        """Why this instance cannot coordinate through Redis now (None: it can)."""
        return self.leases.trouble or self.listener.trouble

    @property
    def owned(self) -> int:
        """Conversations whose lease this instance holds."""
        return len(self.leases.held)

    @property
    def queued(self) -> int:
        """Messages waiting to go to Redis."""
        return self.outgoing.queue.qsize()

    @property
    def frames_dropped(self) -> int:
        """Frames not sent because the queue was full (since the start)."""
        return self.outgoing.frames_dropped

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        try:
            await self._redis.ping()
            await self.listener.start()
            await self.leases.alive_now()
        except (RedisError, OSError) as exc:
            await self._redis.aclose()
            await self.listener.close()
            raise BusError(unreachable(self.url, exc)) from exc
        tasks = self.requests.tasks = asyncio.TaskGroup()
        await tasks.__aenter__()
        self._loops = [
            tasks.create_task(self.listener.listen()),
            tasks.create_task(self.outgoing.write()),
            tasks.create_task(self.leases.keep()),
        ]
        log.info("bus: instance %s on Redis %s", self.instance_id, bare_urls(self.url))

    async def close(self) -> None:
        tasks, self.requests.tasks = self.requests.tasks, None
        if tasks is not None:
            await self.outgoing.drain(self.timeout_s)
        try:
            await cancel_all([*self._loops, *self.requests.answering])
            if tasks is not None:
                await tasks.__aexit__(None, None, None)
        finally:
            await self.leases.give_up()
            await self.listener.close()
            await self._redis.aclose()

    # ------------------------------------------------------------ leases

    async def claim(self, session_id: str) -> bool:
        return await self.leases.claim(session_id)

    async def owner_of(self, session_id: str) -> str | None:
        return (await self.leases.owners([session_id]))[0]

    async def owners(self, session_ids: Sequence[str]) -> list[str | None]:
        return await self.leases.owners(session_ids)

    async def lease_left(self, session_id: str) -> float:
        return await self.leases.lease_left(session_id)

    def holds(self, session_id: str) -> bool:
        return session_id in self.leases.held

    def release(self, session_id: str) -> None:
        self.leases.release(session_id)

    async def alive(self) -> set[str]:
        return await self.leases.alive()

    # ------------------------------------------------------------ commands

    async def request(
        self, instance_id: str, command: Command, *, timeout_s: float | None = None
    ) -> Reply:
        command = replace(command, sender=self.instance_id)
        if instance_id == self.instance_id:
            return await self.on_command(command)
        return await self.requests.request(
            instance_id, command, timeout_s or self.timeout_s
        )

    # ------------------------------------------------------------ frames

    def publish(self, session_id: str, prev_seq: int, seq: int, text: str) -> None:
        self.outgoing.frame(frames(session_id), f"{prev_seq}:{seq}:{text}")

    async def watch(self, session_id: str) -> None:
        await self.listener.watch(session_id)

    async def unwatch(self, session_id: str) -> None:
        await self.listener.unwatch(session_id)
