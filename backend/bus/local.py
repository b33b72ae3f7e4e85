"""`LocalBus`: one process, the default. Every lease is granted at once and
nothing is ever owned elsewhere, so no command leaves the process and no
frame needs publishing."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace

from backend.bus.base import (
    NOT_HERE,
    BusError,
    Command,
    CommandHandler,
    FrameHandler,
    LostHandler,
    Reply,
)


async def _no_command(_command: Command) -> Reply:
    return NOT_HERE


class LocalBus:
    clustered = False

    def __init__(self, *, lease_ttl_s: float = 10.0) -> None:
        self.instance_id = uuid.uuid4().hex[:12]
        self.lease_ttl_s = lease_ttl_s
        self.on_command: CommandHandler = _no_command
        self.on_frame: FrameHandler = lambda _sid, _prev, _seq, _text: None
        self.on_lost: LostHandler = lambda _ids: None
        self._held: set[str] = set()

    @property
    def trouble(self) -> str | None:
        """Never any: there is nobody to reach."""
        return None

    @property
    def queued(self) -> int:
        return 0

    @property
    def owned(self) -> int:
        return len(self._held)

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        self._held.clear()

    async def claim(self, session_id: str) -> bool:
        self._held.add(session_id)
        return True

    async def owner_of(self, session_id: str) -> str | None:
        return self.instance_id if session_id in self._held else None

    async def owners(self, session_ids: Sequence[str]) -> list[str | None]:
        return [self.instance_id if s in self._held else None for s in session_ids]

    async def lease_left(self, session_id: str) -> float:
        return self.lease_ttl_s if session_id in self._held else 0.0

    def holds(self, session_id: str) -> bool:
        return session_id in self._held

    def release(self, session_id: str) -> None:
        self._held.discard(session_id)

    async def alive(self) -> set[str]:
        return {self.instance_id}

    async def request(
        self, instance_id: str, command: Command, *, timeout_s: float | None = None
    ) -> Reply:
        if instance_id != self.instance_id:
            raise BusError(f"instance {instance_id} is not this process")
        return await self.on_command(replace(command, sender=self.instance_id))

    def publish(self, session_id: str, prev_seq: int, seq: int, text: str) -> None:
        pass

    async def watch(self, session_id: str) -> None:
        pass

    async def unwatch(self, session_id: str) -> None:
        pass
