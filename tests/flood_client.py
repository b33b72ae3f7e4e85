"""A flooding client, in its own process: `python -m tests.flood_client URL
[FRAMES_PER_S]` (default: as fast as it can).

Run by `tests/test_flood.py`, so that the flood's own CPU cost does not
land in the event loop that times the neighbour. Driven by lines on its
stdin: `go` starts a flood: it opens a socket and sends frames (as fast as
it can, or at the rate given) while reading what comes back, until the
server closes it; then it opens the next, and so on. It prints `flooding`
once the first socket is closed (the throttle has been seen to work).
`stop` ends the flood (a socket the server has not closed by then is
closed by the client, code 1000, and marked `stopped`) and it prints
`stopped`. At the end of its stdin it prints one JSON object: per socket,
the frames sent, the labels received (counted), the close code and
reason, and how long it lived; and the seconds spent flooding.
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
    url: str, per_s: float | None, stop: asyncio.Future[bytes]
) -> dict[str, Any]:
    """One socket's flood, until the server closes it (or `stop`)."""
    start = time.perf_counter()
    async with connect(url) as connection:
        sending = asyncio.create_task(blast(connection, per_s))
        reading = asyncio.create_task(read(connection))
        await asyncio.wait({reading, stop}, return_when=asyncio.FIRST_COMPLETED)
        stopped = not reading.done()
        if stopped:
            await connection.close()
        labels = await reading
        sent = await sending
    return {
        "sent": sent,
        "labels": dict(labels),
        "code": connection.close_code,
        "reason": connection.close_reason,
        "seconds": time.perf_counter() - start,
        "stopped": stopped,
    }


async def commands() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    protocol = asyncio.StreamReaderProtocol(reader)
    await loop.connect_read_pipe(lambda: protocol, sys.stdin)
    return reader


async def flood(url: str, per_s: float | None) -> dict[str, Any]:
    stdin = await commands()
    sockets: list[dict[str, Any]] = []
    flooding_s = 0.0
    while await stdin.readline() == b"go\n":
        started = time.perf_counter()
        stop = asyncio.ensure_future(stdin.readline())
        sockets.append(await one_socket(url, per_s, stop))
        print("flooding", flush=True)
        while not stop.done():
            sockets.append(await one_socket(url, per_s, stop))
        flooding_s += time.perf_counter() - started
        print("stopped", flush=True)
        if await stop != b"stop\n":
            break
    return {"sockets": sockets, "seconds": flooding_s}


if __name__ == "__main__":
    per_s = float(sys.argv[2]) if len(sys.argv) > 2 else None
    print(json.dumps(asyncio.run(flood(sys.argv[1], per_s))), flush=True)
