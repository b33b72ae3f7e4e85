"""The `Bus` seam: how loopwire instances reach each other.

One instance owns each conversation that is in memory (and so its run): it
holds a renewable *lease* on it. The others reach the owner through the bus:

- **leases**: `claim` (only if nobody holds it), `owner_of`, `release`; the
  bus renews what it holds and calls `on_lost` with the ids it could not
  keep (then the instance must let them go: another may own them now);
- **commands**: `request(instance, command)` → `Reply`, a request/reply to
  one instance (a client's stop, answer or approval, forwarded to the owner);
  each instance answers with its `on_command`; a command's body is one
  model per kind, and so are the replies' bodies that are read
  (`backend.bus.messages`);
- **frames**: the owner `publish`es a conversation's frames (with the seq of
  the frame before, so a gap is seen) to the instances that `watch` it; they
  arrive through `on_frame`, in the order they were published.

`LocalBus` (one process, the default) and `RedisBus` (`LOOPWIRE_REDIS_URL`)
implement it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from pydantic import TypeAdapter

from backend.bus.messages import CommandBody, CommandKind, ReplyBody
from backend.errors import LoopwireError

ReplyStatus = Literal["ok", "error", "not_here", "forbidden"]
B = TypeVar("B")


class BusError(LoopwireError):
    """The bus could not carry a message (Redis down, the instance gone)."""


class InstanceGone(BusError):
    """The instance asked is not running (its leases expire in their time)."""


@dataclass(frozen=True, slots=True)
class Command:
    """A request to the instance that owns `session_id`, on behalf of `user`."""

    session_id: str
    body: CommandBody
    user: str = ""
    sender: str = ""
    """The instance that asks (set by the bus)."""
    trace: str | None = None
    """The asker's span as a W3C `traceparent`, continued by the owner."""

    @property
    def kind(self) -> CommandKind:
        return self.body.kind


@dataclass(frozen=True, slots=True)
class Reply:
    """`ok` with a body; `error` with the client-facing error; `not_here`:
    the instance does not own the conversation (any more); `forbidden`: it
    belongs to another user."""

    status: ReplyStatus
    body: ReplyBody | None = None
    error_type: str = ""
    message: str = ""

    def body_as(self, kind: type[B]) -> B | None:
        """The body if it is a `kind` (None for another, or none)."""
        return self.body if isinstance(self.body, kind) else None


@dataclass(frozen=True, slots=True)
class Request:
    """A command on its way to another instance: `id` names its reply."""

    id: str
    reply_to: str
    command: Command


@dataclass(frozen=True, slots=True)
class Answer:
    """The reply to the request `id`."""

    id: str
    reply: Reply


request_adapter: TypeAdapter[Request] = TypeAdapter(Request)
answer_adapter: TypeAdapter[Answer] = TypeAdapter(Answer)

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

    @property
    def owned(self) -> int:
        """Conversations this instance owns now."""
        ...

    @property
    def queued(self) -> int:
        """Messages waiting to go to the other instances."""
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
