"""`Target`: what a client's connection is attached to.

A connection (a socket, an HTTP stream) shows one conversation: either one
owned here, its `Session` (the local side: it acts on what the client
sends), or one another instance owns, shown here through its `Mirror` (the
remote side: it forwards what the client sends to the owner over the bus,
and tells its own clients what could not be delivered). Both answer the
same calls, so a transport and the `ChatService` never ask which one they
hold.
"""

from __future__ import annotations

from typing import Any, Protocol

from backend.chat.session import Outbox
from backend.protocol import ClientMessage, ErrorType, ServerInfo


class Target(Protocol):
    @property
    def id(self) -> str:
        """The conversation's id."""
        ...

    @property
    def owner(self) -> str:
        """The user the conversation belongs to."""
        ...

    @property
    def outbox(self) -> Outbox:
        """The frames this instance's clients read (replay log + fan-out)."""
        ...

    @property
    def run_id(self) -> str | None:
        """The run in progress, if any."""
        ...

    def touch(self) -> None:
        """A client is active on it (it is not idle)."""

    async def handle(self, message: ClientMessage) -> None:
        """Act on a client's message; a refusal becomes an `error` frame."""

    async def report(self, message: str, error_type: ErrorType) -> None:
        """An `error` frame about the client's own input (a frame refused,
        too many frames), in the conversation's sequence."""

    async def dispatch(self, message: ClientMessage) -> dict[str, Any]:
        """Act on a client's message, a refusal raised as its `ProtocolError`:
        what an HTTP client is told (a new run's id and where its request
        sits in the history; the budget after a grant)."""
        ...

    async def outcome(self, run_id: str, answer: str | None) -> dict[str, Any]:
        """What an HTTP client is told of the run at its end (`run_outcome`);
        empty when it is not known."""
        ...

    def stop_soon(self, run_id: str) -> None:
        """Stop the run `run_id` if it is still the conversation's (an HTTP
        client that asked for it went away); safe while being cancelled."""

    def ready_frame(self, info: ServerInfo, *, resumed: bool) -> str:
        """The `session_ready` frame's JSON text for a connection."""
        ...
