"""`Fragments`: the JSON of values a request body repeats, encoded once.

Every call of a run offers the same tools, and their JSON Schemas were most
of what encoding a body cost. A `Fragments` keeps each value's encoding
while the value is in use: keyed by the value's identity, so a lookup costs
no hashing of its contents, and holding the value itself, so its id cannot
be taken by another object while the entry lives. Only immutable values
belong here: a `ToolSpec` is a frozen model whose schema dict is built once,
with its tool, and only read after.

(The history's messages are not kept so: a paused session's messages would
hold their encodings too, 1 to 2 KiB more per paused session, for about
25 µs a call.)

The encodings kept are bounded in bytes, the least recently used dropped
first; a value whose encoding alone is over a sixteenth of the bound is
encoded every time rather than crowd out the rest.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Fragments"]

T = TypeVar("T")


class Fragments(Generic[T]):
    """`encode(value)` of each value, kept for the values used last, at most
    `max_bytes` of encodings in all."""

    def __init__(self, encode: Callable[[T], bytes], max_bytes: int) -> None:
        self._encode = encode
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[int, tuple[T, bytes]] = OrderedDict()

    def __call__(self, value: T) -> bytes:
        key = id(value)
        entry = self._entries.get(key)
        if entry is not None:  # its value is alive, held here: this one
            self._entries.move_to_end(key)
            return entry[1]
        encoded = self._encode(value)
        if len(encoded) * 16 <= self._max_bytes:
            self._entries[key] = (value, encoded)
            self._bytes += len(encoded)
            while self._bytes > self._max_bytes:
                self._bytes -= len(self._entries.popitem(last=False)[1][1])
        return encoded

    @property
    def size(self) -> int:
        """The bytes of the encodings kept."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)
