"""The `Bus` seam: how loopwire instances reach each other.

One instance owns each conversation that is in memory (and so its run): it
holds a renewable *lease* on it. The others reach the owner through the bus:

- **leases**: `claim` (only if nobody holds it), `owner_of`, `release`; the
  bus renews what it holds and calls `on_lost` with the ids it could not
  keep (then the instance must let them go: another may own them now);
- **commands**: `request(instance, command)` → `Reply`, a request/reply to
  one instance (a client's stop, answer or approval, forwarded to the owner);
  each instance answers with its `on_command`;
- **frames**: the owner `publish`es a conversation's frames (with the seq of
  the frame before, so a gap is seen) to the instances that `watch` it; they
  arrive through `on_frame`, in the order they were published.

`LocalBus` (one process, the default) and `RedisBus` (`LOOPWIRE_REDIS_URL`)
implement it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from backend.errors import LoopwireError

CommandKind = Literal[
    "attach",
    "watching",
    "handle",
    "dispatch",
    "report",
    "outcome",
    "stop_run",
    "flush",
    "forget",
    "files_added",
]
ReplyStatus = Literal["ok", "error", "not_here", "forbidden"]


class BusError(LoopwireError):
    """The bus could not carry a message (Redis down, the instance gone)."""


class InstanceGone(BusError):
    """The instance asked is not running (its leases expire in their time)."""


@dataclass(frozen=True, slots=True)
class Command:
    """A request to the instance that owns `session_id`, on behalf of `user`."""

    kind: CommandKind
    session_id: str
    user: str = ""
    body: dict[str, Any] = field(default_factory=dict)
    sender: str = ""
    """The instance that asks (set by the bus)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "session_id": self.session_id,
            "user": self.user,
            "body": self.body,
            "sender": self.sender,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Command:
        return cls(
            kind=data["kind"],
            session_id=data["session_id"],
            user=data.get("user", ""),
            body=data.get("body") or {},
            sender=data.get("sender", ""),
        )


@dataclass(frozen=True, slots=True)
class Reply:
    """`ok` with a body; `error` with the client-facing error; `not_here`:
    the instance does not own the conversation (any more); `forbidden`: it
    belongs to another user."""

    status: ReplyStatus
    body: dict[str, Any] = field(default_factory=dict)
    error_type: str = ""
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "body": self.body,
            "error_type": self.error_type,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Reply:
        return cls(
            status=data["status"],
            body=data.get("body") or {},
            error_type=data.get("error_type", ""),
            message=data.get("message", ""),
        )


OK = Reply("ok")
NOT_HERE = Reply("not_here")
FORBIDDEN = Reply("forbidden")

CommandHandler = Callable[[Command], Awaitable[Reply]]
FrameHandler = Callable[[str, int, int, str], None]
"""(session_id, prev_seq, seq, text) of a frame published by an owner."""
LostHandler = Callable[[Sequence[str]], None]


class Bus(Protocol):
    instance_id: str
    clustered: bool
    """False for a single process: nothing is ever owned elsewhere."""
    lease_ttl_s: float
    on_command: CommandHandler
    on_frame: FrameHandler
    on_lost: LostHandler

    @property
    def trouble(self) -> str | None:
        """Why this instance cannot coordinate with the others now (Redis
        unreachable: `/healthz` says so); None when it can."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None:
        """Release every lease and stop (after the service saved its work)."""
        ...

    async def claim(self, session_id: str) -> bool:
        """Own `session_id` if nobody does; True if this instance now holds it."""
        ...

    async def owner_of(self, session_id: str) -> str | None: ...

    async def owners(self, session_ids: Sequence[str]) -> list[str | None]: ...

    async def lease_left(self, session_id: str) -> float:
        """Seconds until the lease on `session_id` expires unless renewed
        (0: nobody holds it)."""
        ...

    def holds(self, session_id: str) -> bool: ...

    def release(self, session_id: str) -> None:
        """Give the lease up (soon; the order of calls is kept)."""
        ...

    async def alive(self) -> set[str]:
        """The instances that are running now."""
        ...

    async def request(
        self, instance_id: str, command: Command, *, timeout_s: float | None = None
    ) -> Reply:
        """Ask one instance; `BusError` if it cannot be reached in time."""
        ...

    def publish(self, session_id: str, prev_seq: int, seq: int, text: str) -> None:
        """Send a frame to the instances watching the conversation (queued,
        in order)."""
        ...

    async def watch(self, session_id: str) -> None: ...

    async def unwatch(self, session_id: str) -> None: ...


def encode(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))
