"""A flooder of one user, in its own process: `python -m tests.fair_flood
BASE_URL TOKEN MODE` with MODE `reconnect` (a WebSocket opened, a frame sent,
closed, again, as fast as it goes) or `runs` (`POST /api/agent`, as fast as
it goes). Eight loops at once.

Run by `tests/test_fair_flood.py`, so that the flood's own CPU does not land
in the process that times the neighbour. It prints `flooding` once the
server has refused it (429) the first time; at the end of its stdin it stops
and prints one JSON object: how many attempts ended in which status, and
the seconds it flooded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections import Counter

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus, WebSocketException

LOOPS = 8


class Tally:
    """Attempts by how they ended; `refused` is set at the first 429."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.refused = asyncio.Event()

    def __setitem__(self, status: str, count: int) -> None:
        self.seen[status] = count
        if status == "429":
            self.refused.set()

    def __getitem__(self, status: str) -> int:
        return self.seen[status]


async def reconnect(base: str, token: str, seen: Tally) -> None:
    url = base.replace("http://", "ws://") + "/ws"
    headers = {"Authorization": f"Bearer {token}"}
    while True:
        try:
            async with connect(url, additional_headers=headers) as socket:
                await socket.recv()  # session_ready
                await socket.send(json.dumps({"type": "chat", "content": "2+3"}))
                seen["101"] += 1
        except InvalidStatus as exc:
            seen[str(exc.response.status_code)] += 1
        except (OSError, WebSocketException):
            seen["dropped"] += 1


async def runs(base: str, token: str, seen: Tally) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
        while True:
            try:
                answer = await http.post(
                    "/api/agent", json={"query": "2+3", "stream": False}
                )
                seen[str(answer.status_code)] += 1
            except httpx.HTTPError:
                seen["dropped"] += 1


async def main(base: str, token: str, mode: str) -> None:
    seen = Tally()
    flood = reconnect if mode == "reconnect" else runs
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    start = time.perf_counter()
    async with asyncio.TaskGroup() as tasks:
        loops = [tasks.create_task(flood(base, token, seen)) for _ in range(LOOPS)]

        async def told() -> None:
            await seen.refused.wait()
            print("flooding", flush=True)

        announce = tasks.create_task(told())
        await stdin.read()  # until the test closes our stdin
        for task in [*loops, announce]:
            task.cancel()
    seconds = time.perf_counter() - start
    print(
        json.dumps({"seen": dict(seen.seen), "seconds": round(seconds, 3)}), flush=True
    )


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(*sys.argv[1:4]))
