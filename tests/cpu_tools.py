"""Tool functions for the worker-process tests, at the top level of a module
so that a spawned worker can import them by name.

`spin` reports its process id on `channel` (a FIFO the test reads) before it
busy-loops: the test learns that the computation runs, and where, without
polling.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from pydantic import BaseModel

from backend.errors import ToolError
from backend.tools.base import ToolContext, ToolEffect, ToolRegistry


class SpinArgs(BaseModel):
    channel: str = ""
    """A file or FIFO to append this process' id to, once running."""
    seconds: float | None = None
    """How long to compute; None = until killed."""


class SquareArgs(BaseModel):
    n: int = 0


class FailArgs(BaseModel):
    message: str = "it broke"
    retryable: bool = False


def report(channel: str, line: str) -> None:
    if channel:
        with open(channel, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def spin(args: SpinArgs, ctx: ToolContext) -> dict[str, Any]:
    """Hold the CPU (and the GIL) until `seconds` pass, or forever."""
    report(args.channel, str(os.getpid()))
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    turns = 0
    while deadline is None or time.monotonic() < deadline:
        turns += 1
    return {"turns": turns, "pid": os.getpid()}


def square(args: SquareArgs, ctx: ToolContext) -> dict[str, Any]:
    return {
        "square": args.n * args.n,
        "pid": os.getpid(),
        "session": ctx.session_id,
        "thread": threading.current_thread().name,
    }


def refuse(args: FailArgs, ctx: ToolContext) -> None:
    raise ToolError(args.message, retryable=args.retryable)


def crash(args: FailArgs, ctx: ToolContext) -> None:
    raise ValueError(args.message)


def die(args: SquareArgs, ctx: ToolContext) -> None:
    os._exit(args.n)


def unpicklable(args: SquareArgs, ctx: ToolContext) -> Any:
    return threading.Lock()


async def not_plain(args: SquareArgs, ctx: ToolContext) -> int:
    return args.n


registry = ToolRegistry()
"""Registered with the decorator, at import: the name `cube` is bound only
after the registry has checked the function."""


@registry.tool(
    "cube", "Cube a number.", effect=ToolEffect(cpu_bound=True, requires_approval=False)
)
def cube(args: SquareArgs, ctx: ToolContext) -> int:
    return args.n**3
