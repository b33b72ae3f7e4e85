"""A worker process' side of `ProcessPool` (`processes.py`): its loop, the
framing, and the replies it sends.

`serve(sock)` is the process' whole life: read a job (`pickle((fn, args))`,
framed by its length), run `fn(*args)`, send the pickled reply, until the
socket closes. Replies are `Returned(value)`, `Raised(...)` for an
exception (a `ToolError`'s `retryable` kept, anything else described with
its traceback) or `Broken(reason)` when the job could not be loaded or the
value could not be pickled. This module is imported by every worker, so it
stays light: no asyncio, nothing of loopwire but the errors.
"""

from __future__ import annotations

import pickle
import signal
import socket
import struct
import traceback
from dataclasses import dataclass
from typing import Any

from backend.errors import ToolError

HEADER = struct.Struct("!Q")
"""Each message: its length, then its bytes."""


@dataclass(frozen=True, slots=True)
class Returned:
    """The function returned `value`."""

    value: Any


@dataclass(frozen=True, slots=True)
class Raised:
    """The function raised an exception of type `kind`."""

    kind: str
    message: str
    retryable: bool | None
    """None: not a `ToolError` (a crash)."""
    trace: str

    @classmethod
    def of(cls, exc: Exception) -> Raised:
        retryable = exc.retryable if isinstance(exc, ToolError) else None
        trace = "".join(traceback.format_exception(exc))
        return cls(type(exc).__name__, str(exc), retryable, trace)


@dataclass(frozen=True, slots=True)
class Broken:
    """No answer could be had from the function: why."""

    reason: str
    retryable: bool = False


def serve(sock: socket.socket) -> None:
    """A worker process' life: answer jobs from `sock` until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    with sock:
        while (job := _receive(sock)) is not None:
            sock.sendall(frame(_answer(job)))


def _answer(job: bytes) -> bytes:
    try:
        fn, args = pickle.loads(job)
    except Exception as exc:
        return _pickled(Broken(f"the tool could not be loaded ({exc!r})"))
    try:
        reply: Any = Returned(fn(*args))
    except Exception as exc:
        reply = Raised.of(exc)
    try:
        return _pickled(reply)
    except Exception as exc:
        return _pickled(Broken(f"its result cannot be pickled ({exc})"))


def _pickled(reply: Any) -> bytes:
    return pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)


def frame(payload: bytes) -> bytes:
    """`payload` as one message."""
    return HEADER.pack(len(payload)) + payload


def _receive(sock: socket.socket) -> bytes | None:
    header = _read_exactly(sock, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, missing = [], size
    while missing:
        chunk = sock.recv(min(missing, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)
