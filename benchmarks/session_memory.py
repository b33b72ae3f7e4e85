"""Memory (RSS) per session paused on a question, against a bare echo socket.

loopwire: after a warm-up of W paused sessions (kept open), batches of M
sessions each start an agent run whose act phase calls `request_input`;
once every one of them has received its `agent_request_input` and the
server is quiet, the server's VmRSS growth over the batch / M is one
sample. The sessions stay paused (and their sockets open) until the end,
when each is stopped (checked) and closed.

The echo: the same batches of bare sockets, each having made one round
trip; VmRSS growth / M.
"""

from __future__ import annotations

import asyncio

from benchmarks.checks import Frame, check_paused, check_stopped
from benchmarks.clients import EchoSocket, Session, close_all, open_many
from benchmarks.harness import Harness, progress
from benchmarks.procfs import rss_bytes, settle
from benchmarks.results import SessionMemory
from benchmarks.stats import Summary

ASK: Frame = {
    "type": "chat",
    "content": "Convert this for me. act=ask latency_ms=0",
    "agent_mode": True,
    "agent_max_steps": 3,
}


async def _paused(url: str) -> Session:
    session = await Session.open(url)
    await session.send(ASK)
    run = await session.until_kind("agent_request_input")
    check_paused(run.frames)
    return session


async def _stop(session: Session) -> None:
    await session.stop()
    run = await session.until_kind("response_complete")
    check_stopped(run.frames, agent=True)


async def _answered_echo(url: str) -> EchoSocket:
    socket = await EchoSocket.open(url)
    await socket.round_trip()
    return socket


async def measure(harness: Harness) -> SessionMemory:
    sizes = harness.sizes
    batch, batches = sizes.memory_sessions, sizes.rounds
    per_session: list[float] = []
    async with harness.loopwire("memory") as server:
        url = server.ws_url
        sessions: list[Session] = []
        try:
            sessions += await open_many(sizes.memory_warmup, lambda: _paused(url))
            for number in range(1, batches + 1):
                await settle(server.pid)
                before = rss_bytes(server.pid)
                sessions += await open_many(batch, lambda: _paused(url))
                await settle(server.pid)
                per_session.append((rss_bytes(server.pid) - before) / batch / 1024)
                progress(
                    f"memory: batch {number}/{batches}: {per_session[-1]:.1f} KiB "
                    f"per paused session ({len(sessions)} paused)"
                )
            await asyncio.gather(*(_stop(s) for s in sessions))
        finally:
            await close_all(sessions)
    async with harness.fresh_echo("echo-memory") as echo:
        per_socket = await _echo_sockets(echo.port, echo.pid, harness)
    return SessionMemory(
        sessions_per_batch=batch,
        batches=batches,
        kib_per_session=Summary.of(per_session),
        echo_kib_per_socket=Summary.of(per_socket),
    )


async def _echo_sockets(port: int, pid: int, harness: Harness) -> list[float]:
    sizes = harness.sizes
    url = f"ws://127.0.0.1:{port}/ws"
    per_socket: list[float] = []
    sockets: list[EchoSocket] = []
    try:
        sockets += await open_many(sizes.memory_warmup, lambda: _answered_echo(url))
        for number in range(1, sizes.rounds + 1):
            await settle(pid)
            before = rss_bytes(pid)
            sockets += await open_many(
                sizes.memory_sessions, lambda: _answered_echo(url)
            )
            await settle(pid)
            per_socket.append((rss_bytes(pid) - before) / sizes.memory_sessions / 1024)
            progress(
                f"memory: echo batch {number}/{sizes.rounds}: "
                f"{per_socket[-1]:.1f} KiB per socket"
            )
    finally:
        await close_all(sockets)
    return per_socket
