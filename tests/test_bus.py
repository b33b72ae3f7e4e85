"""`RedisBus` against a real Redis (devcluster/redis_server.py), and what a
service does when it loses a lease.

Leases are exclusive and renewed; a lease taken from under an instance is
reported lost (and the service lets the conversation go: its clients are
closed with 1012, its run cancelled, nothing more saved from there);
commands reach the instance they name, or fail at once when it is gone;
frames arrive in the order they were published, each naming the one before.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

import pytest
import redis.asyncio as aioredis
from websockets.exceptions import ConnectionClosed

from backend.bus.base import BusError, Command, InstanceGone, Reply
from backend.bus.redis_bus import PREFIX, RedisBus
from backend.errors import ConfigError
from devcluster.redis_server import RedisServer
from tests.conftest import StartServer
from tests.fakes import Hang, ScriptedLLM
from tests.server_process import ROOT, free_port

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def buses(
    url: str, count: int, **options: float
) -> AsyncIterator[list[RedisBus]]:
    started: list[RedisBus] = []
    try:
        for _ in range(count):
            bus = RedisBus(url, **options)
            await bus.start()
            started.append(bus)
        yield started
    finally:
        for bus in started:
            await bus.close()


async def test_a_lease_is_held_by_one_instance_until_it_lets_go(redis_url: str) -> None:
    async with buses(redis_url, 2) as (a, b):
        assert await a.claim("s1") is True
        assert await b.claim("s1") is False
        assert await b.owner_of("s1") == a.instance_id
        assert await b.owners(["s1", "s2"]) == [a.instance_id, None]
        assert a.holds("s1") and not b.holds("s1")
        assert 0 < await b.lease_left("s1") <= a.lease_ttl_s
        assert await b.lease_left("s2") == 0
        assert await a.alive() >= {a.instance_id, b.instance_id}
        await a.close()  # a stopping gives its leases up at once
        assert await b.owner_of("s1") is None
        assert await b.claim("s1") is True


async def test_a_lease_taken_from_under_an_instance_is_reported_lost(
    redis_url: str,
) -> None:
    async with buses(redis_url, 1, lease_ttl_s=0.6) as (a,):
        lost: list[Sequence[str]] = []
        reported = asyncio.Event()

        def on_lost(ids: Sequence[str]) -> None:
            lost.append(list(ids))
            reported.set()

        a.on_lost = on_lost
        assert await a.claim("kept") and await a.claim("taken")
        raw = aioredis.Redis.from_url(redis_url, decode_responses=True)
        try:
            await raw.set(f"{PREFIX}lease:taken", "someone-else", px=60_000)
            await reported.wait()  # at the next renewal (a third of the TTL)
            assert lost == [["taken"]]
            assert a.holds("kept") and not a.holds("taken")
            assert await raw.get(f"{PREFIX}lease:taken") == "someone-else"
            assert 0.3 < await a.lease_left("kept") <= 0.6  # renewed meanwhile
        finally:
            await raw.aclose()


async def test_an_instance_cut_off_from_redis_lets_its_conversations_go() -> None:
    """Renewals fail; before a try would come after the leases expire,
    every one is let go (another instance may take them then)."""
    with RedisServer() as own:
        bus = RedisBus(own.url, lease_ttl_s=0.6, timeout_s=0.5)
        await bus.start()
        lost: list[list[str]] = []
        reported = asyncio.Event()

        def on_lost(ids: Sequence[str]) -> None:
            lost.append(sorted(ids))
            reported.set()

        bus.on_lost = on_lost
        try:
            assert await bus.claim("one") and await bus.claim("two")
            await asyncio.to_thread(own.stop)  # Redis goes away
            await reported.wait()
            assert lost == [["one", "two"]]
            assert not bus.holds("one") and not bus.holds("two")
        finally:
            await bus.close()


async def test_a_command_reaches_the_instance_it_names(redis_url: str) -> None:
    async with buses(redis_url, 2, timeout_s=0.5) as (a, b):
        asked: list[Command] = []
        never = asyncio.Event()

        async def answer(command: Command) -> Reply:
            asked.append(command)
            if command.kind == "outcome":
                await never.wait()  # an instance that does not answer
            if command.kind == "report":
                raise RuntimeError("a bug on the other side")
            return Reply("ok", body={"echo": command.body})

        a.on_command = answer
        reply = await b.request(a.instance_id, Command("handle", "s1", "u", {"n": 1}))
        assert reply == Reply("ok", body={"echo": {"n": 1}})
        assert asked[0].sender == b.instance_id and asked[0].user == "u"

        failed = await b.request(a.instance_id, Command("report", "s1"))
        assert (failed.status, failed.error_type) == ("error", "internal_error")

        with pytest.raises(BusError, match=r"did not answer within 0\.5 s"):
            await b.request(a.instance_id, Command("outcome", "s1"))
        with pytest.raises(InstanceGone, match="is not running"):
            await b.request("0123456789ab", Command("handle", "s1"))


async def test_frames_arrive_in_order_each_naming_the_one_before(
    redis_url: str,
) -> None:
    async with buses(redis_url, 2) as (owner, watcher):
        got: list[tuple[str, int, int, str]] = []
        all_in = asyncio.Event()

        def on_frame(sid: str, prev: int, seq: int, text: str) -> None:
            got.append((sid, prev, seq, text))
            if len(got) == 500:
                all_in.set()

        watcher.on_frame = on_frame
        await watcher.watch("s1")
        for seq in range(1, 501):
            owner.publish("s1", seq - 1, seq, f'{{"seq":{seq},"x":"a:b"}}')
        await all_in.wait()
        assert got == [
            ("s1", s - 1, s, f'{{"seq":{s},"x":"a:b"}}') for s in range(1, 501)
        ]
        await watcher.unwatch("s1")


async def test_an_unreachable_redis_is_named_without_its_password() -> None:
    bus = RedisBus("redis://user:hunter2secret@127.0.0.1:1/0")
    with pytest.raises(BusError) as raised:
        await bus.start()
    assert "redis://127.0.0.1:1/0" in str(raised.value)
    assert "hunter2secret" not in str(raised.value)


def test_several_instances_need_postgresql() -> None:
    from tests.conftest import make_settings

    with pytest.raises(ValueError, match="LOOPWIRE_DATABASE_URL to a PostgreSQL"):
        make_settings(redis_url="redis://127.0.0.1:6379/0")
    with pytest.raises(ValueError, match="set but empty"):
        make_settings(redis_url=" ", database_url="postgresql://x@h/db")
    assert ConfigError  # the settings' errors are validation errors, named


async def test_a_lost_lease_lets_the_conversation_go_unsaved(
    pg_database_url: str, redis_url: str, start_server: StartServer
) -> None:
    hang = Hang()
    server = await start_server(
        ScriptedLLM(hang),
        database_url=pg_database_url,
        redis_url=redis_url,
        lease_ttl_s=0.6,
    )
    client, ready = await server.ready_client()
    session = ready["session_id"]
    await client.send(type="chat", content="think", agent_mode=True)
    await client.until_label("agent_turn_start")
    await hang.started.wait()

    raw = aioredis.Redis.from_url(redis_url, decode_responses=True)
    async with AsyncExitStack() as stack:
        stack.push_async_callback(raw.aclose)
        await raw.set(f"{PREFIX}lease:{session}", "another-instance", px=60_000)
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await client.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        await hang.cancelled.wait()  # the run was cancelled
        assert session not in server.service.sessions
        assert await raw.get(f"{PREFIX}lease:{session}") == "another-instance"


async def test_serve_refuses_to_start_without_its_redis(pg_database_url: str) -> None:
    env = {
        **os.environ,
        "LOOPWIRE_DATABASE_URL": pg_database_url,
        "LOOPWIRE_REDIS_URL": "redis://:secret-pw@127.0.0.1:1/0",
        "LOOPWIRE_PORT": str(free_port()),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "backend",
        "serve",
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    text = output.decode()
    assert process.returncode == 2, text
    assert "loopwire: cannot start: cannot reach Redis at redis://127.0.0.1:1/0" in text
    assert "secret-pw" not in text and "Traceback" not in text
