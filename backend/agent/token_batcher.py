"""`TokenBatcher`: streamed text to `token_stream` frames, at most one per tick.

A model streams its reply in pieces of a few characters, often many in one
network read; a frame each costs the server and every client more than the
piece is worth. The batcher sends the first piece at once; the pieces after
it go out from a timer on the event loop, due a tick after the last frame:
all that came by then in one frame (a piece that comes a tick or more after
the last frame is sent on the loop's next turn). So no text waits more than
`tick_s`, and a fast stream costs at most one frame per tick. A source that
hands over several pieces without yielding to the loop gets them joined,
whatever the clock says. `close` sends what is left (also when the stream
is cancelled: what was taken from the model is shown before the run says
how it ended) and cancels the timer. `tick_s` 0: a frame per piece.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from backend.protocol import TokenStream

Emit = Callable[[TokenStream], None]


class TokenBatcher:
    def __init__(self, emit: Emit, tick_s: float) -> None:
        self._emit = emit
        self._tick_s = tick_s
        self._loop = asyncio.get_running_loop()
        self._pending: list[str] = []
        self._sent_at: float | None = None
        """When the last frame went out (None: none yet, the next is first)."""
        self._timer: asyncio.TimerHandle | None = None

    def add(self, text: str) -> None:
        if not text:
            return
        if self._sent_at is None or self._tick_s <= 0:
            self._send(text, first=self._sent_at is None)
            return
        self._pending.append(text)
        if self._timer is None:  # due a tick after the last frame (maybe now)
            self._timer = self._loop.call_at(self._sent_at + self._tick_s, self._flush)

    def close(self) -> None:
        """Send what is pending and stop the timer."""
        if self._timer is not None:
            self._timer.cancel()
        self._flush()

    def _flush(self) -> None:
        self._timer = None
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            self._send(text, first=False)

    def _send(self, text: str, *, first: bool) -> None:
        self._sent_at = self._loop.time()
        self._emit(TokenStream(token=text, is_first=first, is_last=False))
