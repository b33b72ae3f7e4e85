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

import re
import time
from typing import Any, Protocol

from backend.bus.base import CommandKind, Reply
from backend.chat.commands import error_type_of, raise_for, wire
from backend.chat.session import Outbox
from backend.notifications import stamp
from backend.protocol import ClientMessage, Error, ErrorType, ServerInfo, SessionReady
from backend.transcript import Frame

_HEAD = re.compile(r'"run_id":(?:null|"([^"]*)"),"ts":[^,]*,"type":"(\w+)"')


class Link(Protocol):
    """How a mirror reaches the instance that owns its conversation
    (`Cluster`): wherever it is now, taking it here if nobody owns it."""

    async def forward(
        self, mirror: Mirror, kind: CommandKind, body: dict[str, Any]
    ) -> Reply: ...

    def forward_soon(
        self, mirror: Mirror, kind: CommandKind, body: dict[str, Any]
    ) -> None: ...


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

    def sync(self, holder: str, body: dict[str, Any]) -> None:
        """Take an `attach` reply: the frames after our last one, the
        owner's last seq and run; then what arrived meanwhile."""
        self.holder = holder
        for seq, text in body.get("frames", []):
            if seq > self.last_seq:
                self._take(int(seq), str(text))
        self.last_seq = max(self.last_seq, int(body.get("last_seq", 0)))
        if not self.synced:
            self.run_id = body.get("run_id")
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
        head = _HEAD.search(text, 0, 400)
        if head is not None:
            run_id, kind = head.groups()
            if kind == "response_complete":
                self.run_id = None
            elif run_id:
                self.run_id = run_id
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
        reply = await self.link.forward(self, "handle", {"message": wire(message)})
        if reply.status != "ok":
            self.notice(reply.message or "not delivered", error_type_of(reply))

    async def report(self, message: str, error_type: ErrorType) -> None:
        body = {"message": message, "error_type": error_type}
        reply = await self.link.forward(self, "report", body)
        if reply.status != "ok":
            self.notice(message, error_type)

    async def dispatch(self, message: ClientMessage) -> dict[str, Any]:
        reply = await self.link.forward(self, "dispatch", {"message": wire(message)})
        raise_for(reply)
        return reply.body

    async def outcome(self, run_id: str, answer: str | None) -> dict[str, Any]:
        body = {"run_id": run_id, "answer": answer}
        reply = await self.link.forward(self, "outcome", body)
        return reply.body if reply.status == "ok" else {}

    def stop_soon(self, run_id: str) -> None:
        self.link.forward_soon(self, "stop_run", {"run_id": run_id})

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
