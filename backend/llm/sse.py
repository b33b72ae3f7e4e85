"""Server-sent events, read from a byte stream: the `data` of each event.

A chat completions stream is a series of events, each a `data:` line of JSON
and a blank line, ending with `data: [DONE]`. `SSEReader` splits the bytes as
they arrive (a chunk may hold several events, or part of one) and yields each
event's data, lines of one event joined by newlines as the SSE format says.
Comments (`:` lines, used for keep-alives) and other fields (`event:`,
`id:`, `retry:`) carry nothing a chat completion needs and are skipped.

Reading the bytes directly, instead of through the SDK's decoder and its
models, is what keeps a streamed token cheap (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

from backend.errors import LoopwireError

__all__ = ["MAX_EVENT_BYTES", "EventTooLarge", "SSEReader"]

MAX_EVENT_BYTES = 8 * 1024 * 1024
"""No event, nor a line not yet ended, may exceed this (a hostile or broken
server cannot grow the buffer without bound)."""


class EventTooLarge(LoopwireError):
    """An event, or an unfinished line, passed `MAX_EVENT_BYTES`."""


class SSEReader:
    def __init__(self, limit: int = MAX_EVENT_BYTES) -> None:
        self._limit = limit

    async def events(self, chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
        """The data of each event in `chunks`, in order (an event the stream
        ends without a blank line after is still yielded)."""
        pending = b""  # the start of a line not yet ended
        data: list[bytes] = []
        size = 0
        async for chunk in _ended(chunks):
            if not chunk:
                continue
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            if len(pending) > self._limit:
                raise EventTooLarge(f"a line of over {self._limit} bytes")
            for raw in lines:
                line = raw[:-1] if raw.endswith(b"\r") else raw
                if not line:
                    if data:
                        yield data[0] if len(data) == 1 else b"\n".join(data)
                        data, size = [], 0
                    continue
                if line.startswith(b"data:"):
                    value = line[5:]
                    if value.startswith(b" "):
                        value = value[1:]
                    size += len(value)
                    if size > self._limit:
                        raise EventTooLarge(f"an event of over {self._limit} bytes")
                    data.append(value)


async def _ended(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """`chunks`, then a blank line: what the stream left unended ends too."""
    async for chunk in chunks:
        yield chunk
    yield b"\n\n"
