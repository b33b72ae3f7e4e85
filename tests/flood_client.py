"""A flooding client, in its own process: `python -m tests.flood_client URL
[FRAMES_PER_S]` (default: as fast as it can).

Run by `tests/test_flood.py`, so that the flood's own CPU cost does not
land in the event loop that times the neighbour. It opens a socket and
sends frames (as fast as it can, or at the rate given) while reading what
comes back, until the server closes it; then it opens the next, and so on
until its stdin is closed (a socket the server has not closed by then is
closed by the client: code 1000). It prints `flooding` once the first
socket is closed (the throttle has been seen to work), and at the end one
JSON object: per socket, the frames sent, the labels received (counted),
the close code and reason, and how long it lived.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections import Counter
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

FRAME = json.dumps({"type": "agent_control", "action": "stop"})


async def blast(connection: ClientConnection, per_s: float | None) -> int:
    """Send until closed: as fast as possible, or `per_s` frames a second
    (in bursts of 16 on a schedule)."""
    loop = asyncio.get_running_loop()
    start, sent = loop.time(), 0
    with contextlib.suppress(ConnectionClosed):
        while True:
            for _ in range(16):
                await connection.send(FRAME)
            sent += 16
            due = start + sent / per_s if per_s else 0.0
            await asyncio.sleep(max(0.0, due - loop.time()))  # lets the reader run
    return sent


async def read(connection: ClientConnection) -> Counter[str]:
    labels: Counter[str] = Counter()
    with contextlib.suppress(ConnectionClosed):
        async for text in connection:
            frame = json.loads(text)
            labels[frame.get("error_type") or frame["type"]] += 1
    return labels


async def one_socket(
    url: str, per_s: float | None, stop: asyncio.Future[str]
) -> dict[str, Any]:
    """One socket's flood, until the server closes it (or, if it never
    does, until `stop`: then the client closes it, with 1000)."""
    start = time.perf_counter()
    async with connect(url) as connection:
        sending = asyncio.create_task(blast(connection, per_s))
        reading = asyncio.create_task(read(connection))
        await asyncio.wait({reading, stop}, return_when=asyncio.FIRST_COMPLETED)
        if not reading.done():
            await connection.close()
        labels = await reading
        sent = await sending
    return {
        "sent": sent,
        "labels": dict(labels),
        "code": connection.close_code,
        "reason": connection.close_reason,
        "seconds": time.perf_counter() - start,
    }


async def flood(url: str, per_s: float | None) -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)
    sockets: list[dict[str, Any]] = []
    while not stdin_closed.done():
        sockets.append(await one_socket(url, per_s, stdin_closed))
        if len(sockets) == 1:
            print("flooding", flush=True)
    return sockets


if __name__ == "__main__":
    started = time.perf_counter()
    per_s = float(sys.argv[2]) if len(sys.argv) > 2 else None
    sockets = asyncio.run(flood(sys.argv[1], per_s))
    seconds = time.perf_counter() - started
    print(json.dumps({"sockets": sockets, "seconds": seconds}), flush=True)
