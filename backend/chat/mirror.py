"""`Mirror`: a conversation another instance owns, as this one shows it.

In a cluster, one instance owns each conversation in memory (and its run).
A client connected to another instance is served from a mirror there: the
owner's replay window (sent when the mirror attaches), then each frame the
owner publishes, fanned out to the local clients through the same `Outbox`
a local session uses, so a client cannot tell the difference. Frames are
taken once each, in `seq` order: one already held is dropped, and one whose
predecessor (its `prev`) is newer than the mirror's last frame means frames
were missed, so the mirror attaches again from its last seq.

It is the remote side of a `Target`: what its clients send goes to the
owner as a command over the bus (its `Link`, the `Cluster`), and what could
not be delivered is told to its own clients only (`notice`, seq 0).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from backend.bus.base import Reply
from backend.bus.messages import (
    Attached,
    CommandBody,
    Dispatch,
    Handle,
    Outcome,
    Report,
    Result,
    StopRun,
)
from backend.chat.commands import error_type_of, raise_for
from backend.chat.session import Outbox
from backend.notifications import head_of, stamp
from backend.protocol import ClientMessage, Error, ErrorType, ServerInfo, SessionReady
from backend.transcript import Frame


class Link(Protocol):
    """How a mirror reaches the instance that owns its conversation
    (`Cluster`): wherever it is now, taking it here if nobody owns it."""

    async def forward(self, mirror: Mirror, body: CommandBody) -> Reply: ...

    def forward_soon(self, mirror: Mirror, body: CommandBody) -> None: ...


class Mirror:
    def __init__(
        self, session_id: str, *, owner: str, max_frame_bytes: int, link: Link
    ) -> None:
        self.id = session_id
        self.owner = owner
        """The user the conversation belongs to (the owning instance checked)."""
        self.holder: str | None = None
        """The instance that owns the conversation (None: not known now)."""
        self.outbox = Outbox(max_frame_bytes)
        self.last_seq = 0
        self.run_id: str | None = None
        """The run in progress, as the frames tell."""
        self.synced = False
        self.link = link
        self._early: list[tuple[int, int, str]] = []
        self.last_active = time.monotonic()

    def touch(self) -> None:
        self.last_active = time.monotonic()

    @property
    def idle(self) -> bool:
        return self.outbox.subscriber_count == 0

    def sync(self, holder: str, attached: Attached) -> None:
        """Take an `attach` reply: the frames after our last one, the
        owner's last seq and run; then what arrived meanwhile."""
        self.holder = holder
        for seq, text in attached.frames:
            if seq > self.last_seq:
                self._take(seq, text)
        self.last_seq = max(self.last_seq, attached.last_seq)
        if not self.synced:
            self.run_id = attached.run_id
        self.synced = True
        early, self._early = self._early, []
        for prev, seq, text in early:
            self.receive(prev, seq, text)

    def receive(self, prev: int, seq: int, text: str) -> bool:
        """A published frame; False when frames before it were missed."""
        if not self.synced:
            self._early.append((prev, seq, text))
            return True
        if seq <= self.last_seq:
            return True  # held already
        if prev > self.last_seq:
            return False
        self._take(seq, text)
        return True

    def _take(self, seq: int, text: str) -> None:
        head = head_of(text)
        if head is not None:
            if head["type"] == "response_complete":
                self.run_id = None
            elif head["run_id"]:
                self.run_id = head["run_id"]
        self.outbox.deliver(Frame(seq, None, text))
        self.last_seq = seq

    def notice(self, message: str, error_type: ErrorType) -> None:
        """An error for this instance's clients only (seq 0, not replayed):
        the owner could not be reached."""
        text = stamp(
            Error(message=message, error_type=error_type),
            seq=0,
            session_id=self.id,
            run_id=None,
            ts=time.time(),
        )
        self.outbox.notice(text)

    # ------------------------------------------------------------ as a Target

    async def handle(self, message: ClientMessage) -> None:
        """To the owner, which acts on it as on a local client's; if it
        cannot be delivered, this instance's clients are told."""
        reply = await self.link.forward(self, Handle(message=message))
        if reply.status != "ok":
            self.notice(reply.message or "not delivered", error_type_of(reply))

    async def report(self, message: str, error_type: ErrorType) -> None:
        body = Report(message=message, error_type=error_type)
        reply = await self.link.forward(self, body)
        if reply.status != "ok":
            self.notice(message, error_type)

    async def dispatch(self, message: ClientMessage) -> dict[str, Any]:
        reply = await self.link.forward(self, Dispatch(message=message))
        raise_for(reply)
        return _result(reply)

    async def outcome(self, run_id: str, answer: str | None) -> dict[str, Any]:
        reply = await self.link.forward(self, Outcome(run_id=run_id, answer=answer))
        return _result(reply) if reply.status == "ok" else {}

    def stop_soon(self, run_id: str) -> None:
        self.link.forward_soon(self, StopRun(run_id=run_id))

    def ready_frame(self, info: ServerInfo, *, resumed: bool) -> str:
        """`resumed` whatever is asked: the conversation exists, on its owner."""
        payload = SessionReady(
            resumed=True,
            last_seq=self.last_seq,
            oldest_seq=self.outbox.oldest_seq,
            **info.model_dump(exclude={"protocol"}),
        )
        return stamp(
            payload, seq=0, session_id=self.id, run_id=self.run_id, ts=time.time()
        )


def _result(reply: Reply) -> dict[str, Any]:
    """The JSON result an owner sent back (empty when it sent none)."""
    result = reply.body_as(Result)
    return result.value if result is not None else {}
