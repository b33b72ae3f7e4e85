"""`Subscription`: one client's queue of a session's frames.

The session's `Outbox` pushes each frame's text to every subscription; the
client's writer (a socket, an HTTP stream) takes them in order with
`next_frame`. A client that falls `limit_bytes` behind is cut off: its
queue is dropped for one `OVERFLOW` marker, and it reconnects with its last
`seq` to have the replay log fill the gap.
"""

from __future__ import annotations

import asyncio
from collections import deque

OVERFLOW = ""
"""Queued instead of a frame when a client fell too far behind."""
CLOSING = "\x00closing"
"""Queued to close the socket after the frames before it (`Subscription.closing`
says with what code and reason)."""
SERVICE_RESTART = 1012


class Subscription:
    """One client's view of a session's frames (JSON text, in seq order).

    Its bound counts characters, close enough to bytes for frames that are
    mostly ASCII JSON, and cheaper than encoding each frame again. A deque
    and, while the writer waits, one future: a paused session's client costs
    little more than its frames.
    """

    __slots__ = (
        "_frames",
        "_waiter",
        "closing",
        "limit_bytes",
        "overflowed",
        "queued_bytes",
    )

    def __init__(self, limit_bytes: int) -> None:
        self._frames: deque[str] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.limit_bytes = limit_bytes
        self.queued_bytes = 0
        self.overflowed = False
        self.closing: tuple[int, str] = (SERVICE_RESTART, "")

    def push(self, text: str) -> None:
        """Queue a frame; past `limit_bytes` unsent, give up on this client.

        A client that does not read must not make the server hold unbounded
        memory: its queue is dropped and the writer closes the socket. The
        client reconnects with its last `seq` and the replay log fills the gap.
        """
        if self.overflowed:
            return
        size = len(text)
        if self.queued_bytes + size > self.limit_bytes and self._frames:
            self.overflowed = True
            self._frames.clear()
            self.queued_bytes = 0
            text, size = OVERFLOW, 0
        self.queued_bytes += size
        self._put(text)

    def close(self, code: int = SERVICE_RESTART, reason: str = "") -> None:
        """Tell the writer to close the socket after the frames queued so far."""
        self.closing = (code, reason)
        self._put(CLOSING)

    def replay(self, text: str) -> None:
        """Queue a frame missed while away (no bound: the replay log's own)."""
        self.queued_bytes += len(text)
        self._put(text)

    def _put(self, text: str) -> None:
        self._frames.append(text)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pending(self) -> bool:
        """Whether something is queued: `next_frame` would not wait."""
        return bool(self._frames)

    def take_all(self) -> list[str]:
        """Every frame queued now, taken at once (`OVERFLOW` and `CLOSING`
        among them, in place)."""
        frames = list(self._frames)
        self._frames.clear()
        self.queued_bytes = 0
        return frames

    async def next_frame(self) -> str:
        """The next frame's text, `OVERFLOW` or `CLOSING`."""
        while not self._frames:
            waiter = asyncio.get_running_loop().create_future()
            self._waiter = waiter
            try:
                await waiter
            finally:
                self._waiter = None
        text = self._frames.popleft()
        self.queued_bytes -= len(text) if text not in (OVERFLOW, CLOSING) else 0
        return text
