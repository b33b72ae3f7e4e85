"""loopwire as `python -m backend serve` runs it, with one more tool: `bench_wait`.

    LOOPWIRE_... python -m benchmarks.serve --signal-port 9300

Only the Stop-during-a-tool measurement needs it: none of the built-in tools
takes a time the bench controls. `bench_wait` waits (asyncio) for `seconds`
or until it is cancelled, and when it starts it sends the UDP datagram
`tool:<tag>` to the bench (`benchmarks/signals.py`), so the bench presses
Stop while the tool really runs.

Everything else is `backend/__main__.py` `_serve` itself, run as it is:
the settings from the environment, the app, uvicorn with loopwire's
`Server`, WebSocket protocol class and options.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from backend.tools.base import Tool, ToolContext, ToolEffect

WAIT_TOOL = "bench_wait"


class WaitArgs(BaseModel):
    seconds: float = 30.0
    tag: str = ""


def wait_tool(signal_port: int | None) -> Tool[WaitArgs]:
    """The tool that takes `seconds` unless cancelled, announcing its start."""
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.setblocking(False)

    async def bench_wait(args: WaitArgs, ctx: ToolContext) -> dict[str, Any]:
        if signal_port is not None and args.tag:
            with contextlib.suppress(OSError):  # a lost signal: the bench times out
                sender.sendto(f"tool:{args.tag}".encode(), ("127.0.0.1", signal_port))
        await asyncio.sleep(args.seconds)
        return {"waited_s": args.seconds}

    effect = ToolEffect(read_only=True, idempotent=True)
    return Tool(WAIT_TOOL, "Wait a while (benchmarks).", WaitArgs, bench_wait, effect)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve exactly as `python -m backend serve` does, `bench_wait` added
    (`backend.__main__.serve`), so this server cannot drift from the real one."""
    from backend.__main__ import serve

    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve")
    parser.add_argument("--signal-port", type=int, default=None)
    args = parser.parse_args(argv)
    return serve(extra_tools=[wait_tool(args.signal_port)])


if __name__ == "__main__":
    raise SystemExit(main())
