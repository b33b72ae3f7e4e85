"""Hostile traffic does not grow the server's memory.

Each test runs a real server in a fresh interpreter (`python -m backend
serve`, SQLite in a file so that the database is not heap) and reads its
RSS from /proc. glibc's allocator makes RSS noisy: each thread (the
database's, the executor's) gets its own arena, and once its dynamic mmap
threshold has risen, freed 60 KB buffers stay in the heap, pinned by small
objects kept for replay. The servers here run with `TUNED` (one arena,
buffers over 32 KiB mapped and unmapped at once), so that RSS shows what
the server keeps (docs/security.md has the default's figures too).

- One client sends 5,000 frames of ~60 KB, each an unknown `type` (one
  `invalid_message` error each): 300 MB through the server. RSS: +8-10
  MiB (with default glibc settings it jumps by 80-240 MiB, then hovers,
  with no trend over 40,000 such frames).
- A client whose TCP receive window is closed (a 16 KiB socket buffer, no
  compression, and it never reads) sends 30,000 small invalid frames:
  ~12.5 MB of error frames the server must send it. Its queue is capped in
  bytes (`Subscription`: 2 MiB here); past that it is dropped, and when
  the client reads again it gets what was in flight, then close 1013.
  Another socket on the same session, resuming from the last `seq`, tells
  when the server has handled every frame; a third, another session, is
  served throughout, and first sends the same 30,000 frames itself,
  reading the errors: the baseline. The proof that the output was not kept
  is what the stalled client gets when it reads again: ~3.8 MB (2 MiB
  queued, the rest in socket buffers) of the ~12.5 MB produced for it.
  RSS grew 0-9 MiB over the baseline (26 MiB once with 50,000 frames: the
  journal writing the rows adds its own noise), held to `STALLED_GROWTH`.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.hostile import open_client, round_trip, rss_bytes
from tests.server_process import ServerProcess
from tests.ws_client import Client

pytestmark = pytest.mark.timeout(150)

MiB = 1 << 20
LARGE = '{"type": "' + "x" * 60_000 + '"}'
WRONG = (
    '{"type": "chat", "content": 1, "agent_mode": 1, "agent_max_steps": "x", '
    '"selected_tools": 1, "read_only": 1, "save_chat": 1}'
)
"""An error of ~390 bytes (six problems, five named) for 124 bytes sent."""
STALLED_FRAMES = 30_000
"""Few enough to be done well within uvicorn's keepalive (a ping after
20 s, unanswered for 20 s, closes the stalled socket with 1011)."""
STALLED_GROWTH = 48 * MiB
TUNED = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "32768"}


@asynccontextmanager
async def serving(tmp_path: Path, **env: str) -> AsyncIterator[ServerProcess]:
    server = ServerProcess(
        f"sqlite:///{tmp_path / 'loopwire.db'}",
        ws_messages_per_s="1000000",
        ws_message_burst="1000000",
    )
    server.env.update(env)
    await server.start()
    try:
        yield server
    finally:
        await server.stop_quietly()


async def send_and_read(client: Client, frame: str, count: int) -> None:
    """Send `frame` `count` times while reading the `count` errors."""

    async def send() -> None:
        for _ in range(count):
            await client.send_raw(frame)

    sending = asyncio.create_task(send())
    for _ in range(count):
        error = await client.recv()
        assert error["error_type"] == "invalid_message", error
        assert len(error["message"]) < 300
    await sending


async def test_five_thousand_large_invalid_frames_leave_no_trace(
    tmp_path: Path,
) -> None:
    """300 MB of bad frames grow a tuned server's RSS under 32 MiB; it still answers."""
    async with serving(tmp_path, **TUNED) as server:
        client = await open_client(server.ws_url)
        started = rss_bytes(server.pid)
        await send_and_read(client, LARGE, 5_000)
        after = rss_bytes(server.pid)
        await round_trip(client, "still-there")
    print(json.dumps({"rss_start": started, "rss_after": after}))
    assert after - started < 32 * MiB, f"{started / MiB:.0f} → {after / MiB:.0f} MiB"


async def stalled_client(url: str) -> tuple[ClientConnection, str]:
    """A connection with a 16 KiB receive buffer (no autotuning) that has
    read its `session_ready` and will read nothing more until resumed; and
    its session's id."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    host, port = url.removeprefix("ws://").split("/")[0].split(":")
    sock.connect((host, int(port)))
    # no compression: ~12 MB of similar frames deflate to ~1 MB, which the
    # socket buffers would simply hold
    connection = await connect(url, sock=sock, ping_interval=None, compression=None)
    ready = json.loads(await connection.recv())
    connection.transport.pause_reading()
    return connection, ready["session_id"]


async def read_to_close(connection: ClientConnection) -> tuple[int, int, int | None]:
    """Frames and bytes received until the server closed; its close code."""
    frames = size = 0
    try:
        async for text in connection:
            frames += 1
            size += len(text)
    except ConnectionClosed:
        pass
    return frames, size, connection.close_code


async def test_a_client_that_never_reads_is_cut_off_not_buffered(
    tmp_path: Path,
) -> None:
    """A client that never reads gets closed 1013, its backlog dropped, RSS bounded."""
    async with serving(tmp_path, **TUNED) as server:
        neighbour = await open_client(server.ws_url)
        # the same traffic from a client that reads: what it costs is the
        # baseline (the journal, the replay log, the allocator's high-water)
        await send_and_read(neighbour, WRONG, STALLED_FRAMES)
        before = rss_bytes(server.pid)

        stalled, session = await stalled_client(server.ws_url)
        query = f"session_id={session}&last_seq={STALLED_FRAMES - 1}"
        for _ in range(STALLED_FRAMES):
            await stalled.send(WRONG)
        same = await open_client(f"{server.ws_url}?{query}")
        # the server answers the 30,000 frames first: seconds alone, more
        # beside another test on a loaded machine (a bound, not a figure)
        await same.until(lambda frame: frame["seq"] >= STALLED_FRAMES, 60.0)
        await round_trip(neighbour, "served")  # every frame handled by now
        stuck = rss_bytes(server.pid)

        stalled.transport.resume_reading()
        received, size, code = await read_to_close(stalled)
        await round_trip(neighbour, "still-served")
        after = rss_bytes(server.pid)
    produced = STALLED_FRAMES * len(json.dumps(same.seen[-1], separators=(",", ":")))
    print(json.dumps({"rss_before": before, "rss_stuck": stuck, "rss_after": after}))
    print(json.dumps({"frames_received": received, "bytes": [size, produced]}))
    assert code == 1013
    assert size < produced / 2  # the rest was dropped, not queued
    assert stuck - before < STALLED_GROWTH, (
        f"{before / MiB:.0f} → {stuck / MiB:.0f} MiB"
    )
