"""`RedisBus` against a real Redis (devcluster/redis_server.py), and what a
service does when it loses a lease.

Leases are exclusive and renewed; a lease taken from under an instance is
reported lost (and the service lets the conversation go: its clients are
closed with 1012, its run cancelled, nothing more saved from there);
commands reach the instance they name, or fail at once when it is gone;
frames arrive in the order they were published, each naming the one before.

Redis faults (on a Redis of the test's own, paused with `CLIENT PAUSE` or
stopped): a pause shorter than a lease loses nothing; a longer one loses the
leases, which the instance then releases rather than leaves to expire; a
cut-off instance says so on `/healthz`. Frames queued past the bound are
dropped, replies never; commands past the bound are refused `unavailable`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from types import SimpleNamespace, TracebackType
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from starlette.applications import Starlette
from starlette.routing import Route
from websockets.exceptions import ConnectionClosed

from backend.bus.base import Bus, BusError, Command, InstanceGone, Reply
from backend.bus.local import LocalBus
from backend.bus.messages import Forget, Outcome, Report, Result, StopRun
from backend.bus.redis_bus import PREFIX, RedisBus
from backend.transport.http import health
from devcluster import redis_server
from devcluster.redis_server import RedisServer
from tests.conftest import StartServer
from tests.fakes import Hang, ScriptedLLM
from tests.server_process import ROOT, free_port

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis for one test, to pause or stop without disturbing the others."""
    reason = redis_server.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with RedisServer() as server:
        yield server


class LeaseEvents:
    """Redis's keyspace notifications for the lease keys, in order: what
    Redis did to them (`expire`: renewed, `del`: released, `expired`)."""

    def __init__(self, url: str) -> None:
        self.raw = aioredis.Redis.from_url(
            url, decode_responses=True, socket_timeout=30
        )
        self._pubsub = self.raw.pubsub()

    async def __aenter__(self) -> LeaseEvents:
        await self.raw.config_set("notify-keyspace-events", "Kgx")
        await self._pubsub.psubscribe(f"__keyspace@0__:{PREFIX}lease:*")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._pubsub.aclose()  # type: ignore[no-untyped-call]
        await self.raw.aclose()

    async def until(
        self, sessions: Sequence[str], events: set[str]
    ) -> list[tuple[str, str]]:
        """Every event up to one of `events` for each of `sessions`."""
        prefix = f"__keyspace@0__:{PREFIX}lease:"
        seen: list[tuple[str, str]] = []
        waiting = set(sessions)
        while waiting:
            message = await self._pubsub.get_message(
                ignore_subscribe_messages=True, timeout=1.0
            )
            if message is None or message["type"] != "pmessage":
                continue
            session, event = message["channel"].removeprefix(prefix), message["data"]
            seen.append((session, event))
            if event in events:
                waiting.discard(session)
        return seen

    async def pause(self, ms: int) -> float:
        """Pause every client of Redis for `ms`; the loop time it began."""
        await self.raw.execute_command("CLIENT", "PAUSE", str(ms), "ALL")
        return asyncio.get_running_loop().time()


class LostLeases:
    """An `on_lost` that keeps what it is told and says when it was."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.reported = asyncio.Event()
        self.at = 0.0

    def __call__(self, ids: Sequence[str]) -> None:
        self.calls.append(sorted(ids))
        self.at = asyncio.get_running_loop().time()
        self.reported.set()

    @property
    def ids(self) -> list[str]:
        return sorted(s for call in self.calls for s in call)


async def health_of(bus: Bus) -> tuple[int, Any]:
    """`/healthz` of an app whose service has this bus."""
    app = Starlette(routes=[Route("/healthz", health)])
    app.state.chat = SimpleNamespace(bus=bus)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        response = await http.get("/healthz")
    return response.status_code, response.json()


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
    """A lease belongs to one instance until it closes; then another can claim it."""
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
    """A lease overwritten by another owner is reported lost; the rest stay renewed."""
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


async def test_an_instance_cut_off_from_redis_lets_its_conversations_go(
    own_redis: RedisServer,
) -> None:
    """Renewals fail; they are tried again while the leases last, then every
    one is let go (another instance may take them then), and `/healthz`
    says why the instance is of no use meanwhile."""
    bus = RedisBus(own_redis.url, lease_ttl_s=0.6, timeout_s=0.5)
    await bus.start()
    lost = LostLeases()
    bus.on_lost = lost
    try:
        assert (bus.trouble, await health_of(bus)) == (None, (200, {"status": "ok"}))
        assert await bus.claim("one") and await bus.claim("two")
        await asyncio.to_thread(own_redis.stop)  # Redis goes away
        await lost.reported.wait()
        assert lost.calls == [["one", "two"]]
        assert not bus.holds("one") and not bus.holds("two")
        reason = f"cannot reach Redis at {own_redis.url}: "
        assert bus.trouble is not None and bus.trouble.startswith(reason)
        status, body = await health_of(bus)
        assert (status, body["status"]) == (503, "unavailable")
        assert body["reason"].startswith(reason)
    finally:
        await bus.close()


async def test_a_single_process_is_always_healthy() -> None:
    """With a `LocalBus`, `/healthz` always answers 200 ok."""
    assert await health_of(LocalBus()) == (200, {"status": "ok"})


async def test_a_pause_shorter_than_a_lease_loses_no_lease(
    own_redis: RedisServer,
) -> None:
    """Redis stops answering for longer than a renewal period (a third of
    the lease) but less than the lease: the renewal sent meanwhile waits,
    lands in time, and every lease is kept."""
    sessions = ["a", "b", "c"]
    async with buses(own_redis.url, 1, lease_ttl_s=1.5) as (bus,):
        lost = LostLeases()
        bus.on_lost = lost
        for session in sessions:
            assert await bus.claim(session)
        async with LeaseEvents(own_redis.url) as events:
            await events.until(sessions, {"expire"})  # renewed just now
            paused_at = await events.pause(1000)
            await events.until(sessions, {"expire"})  # the next renewal
            assert asyncio.get_running_loop().time() - paused_at >= 0.9
            await events.until(sessions, {"expire"})  # and the one after
        assert lost.calls == []
        assert all(bus.holds(s) for s in sessions)
        assert await bus.owners(sessions) == [bus.instance_id] * 3


async def test_a_pause_longer_than_a_lease_loses_the_leases_unextended(
    own_redis: RedisServer,
) -> None:
    """Redis stops answering for longer than a lease: the leases are let go
    before they could expire, and once Redis answers they are gone (nothing
    renewed them late); then the instance is healthy again."""
    sessions = ["a", "b", "c"]
    async with buses(own_redis.url, 1, lease_ttl_s=1.5) as (bus,):
        lost = LostLeases()
        bus.on_lost = lost
        for session in sessions:
            assert await bus.claim(session)
        async with LeaseEvents(own_redis.url) as events:
            await events.until(sessions, {"expire"})  # renewed just now
            paused_at = await events.pause(2000)
            await lost.reported.wait()
            assert lost.at - paused_at < 1.5  # before the leases expire
            assert lost.ids == sessions
            assert not any(bus.holds(s) for s in sessions)
            assert bus.trouble is not None
            assert bus.trouble.startswith(f"cannot reach Redis at {own_redis.url}")

            await events.raw.ping()  # Redis answers again
            after = await events.until(sessions, {"del", "expired"})
            assert "expire" not in {event for _, event in after}, after
            assert (
                await events.raw.exists(*(f"{PREFIX}lease:{s}" for s in sessions)) == 0
            )

            assert await bus.claim("d")  # and all is well again:
            await events.until(["d"], {"expire"})  # its claim,
            await events.until(["d"], {"expire"})  # a renewal round,
            await events.until(["d"], {"expire"})  # and the next
            assert bus.trouble is None
            assert await health_of(bus) == (200, {"status": "ok"})


async def test_leases_let_go_for_a_slow_redis_are_released(
    own_redis: RedisServer,
) -> None:
    """A renewal that cannot land before the leases' safe expiry (the TTL
    less a tenth) is given up, and the leases are released at once when
    Redis answers: they do not linger until their TTL."""
    sessions = ["a", "b"]
    async with buses(own_redis.url, 1, lease_ttl_s=4.0) as (bus,):
        lost = LostLeases()
        bus.on_lost = lost
        for session in sessions:
            assert await bus.claim(session)
        async with LeaseEvents(own_redis.url) as events:
            await events.until(sessions, {"expire"})  # renewed just now
            paused_at = await events.pause(3750)  # past 3.6 s, short of 4 s
            await lost.reported.wait()
            assert lost.at - paused_at < 3.75 and lost.ids == sessions
            after = await events.until(sessions, {"del", "expired"})
            assert sorted(after) == [("a", "del"), ("b", "del")]


async def test_frames_past_the_queue_bound_are_dropped_never_replies(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Frames past the queue bound are dropped and logged; a command reply gets out."""
    async with buses(redis_url, 2, max_queued=50) as (owner, other):
        got: list[tuple[str, int, int, str]] = []
        all_in = asyncio.Event()

        def on_frame(sid: str, prev: int, seq: int, text: str) -> None:
            got.append((sid, prev, seq, text))
            if len(got) == 51:
                all_in.set()

        other.on_frame = on_frame
        await other.watch("s1")
        sending, go = asyncio.Event(), asyncio.Event()
        send = owner.outgoing._send

        async def blocked_send(batch: list[tuple[str, str, str]]) -> None:
            sending.set()
            await go.wait()  # Redis hangs
            await send(batch)

        owner.outgoing._send = blocked_send  # type: ignore[method-assign]
        owner.publish("s1", 0, 1, "f1")
        await sending.wait()  # the writer holds frame 1; 50 more may wait
        for seq in range(2, 72):
            owner.publish("s1", seq - 1, seq, f"f{seq}")
        assert owner.frames_dropped == 20

        asked = asyncio.Event()

        async def answer(command: Command) -> Reply:
            asked.set()
            return Reply("ok", Result(value={"n": 1}))

        owner.on_command = answer
        asking = asyncio.create_task(
            other.request(owner.instance_id, Command("s1", Forget()))
        )
        await asked.wait()  # its reply is queued behind the 50 frames
        go.set()
        assert await asking == Reply("ok", Result(value={"n": 1}))
        await all_in.wait()
        assert got == [("s1", s - 1, s, f"f{s}") for s in range(1, 52)]
        assert owner.frames_dropped == 20
        warned = [r.getMessage() for r in caplog.records if "dropped" in r.msg]
        assert warned == [  # once a second at most
            "bus: 50 messages wait for Redis; frames dropped: 1"
        ]


async def test_commands_past_the_bound_are_refused_unavailable(
    redis_url: str,
) -> None:
    """Commands past `max_commands` are refused `unavailable` until one finishes."""
    async with buses(redis_url, 2, max_commands=3) as (busy, asker):
        started: list[Command] = []
        all_busy, go = asyncio.Event(), asyncio.Event()

        async def answer(command: Command) -> Reply:
            started.append(command)
            if len(started) == 3:
                all_busy.set()
            await go.wait()
            return Reply("ok")

        busy.on_command = answer
        first = [
            asyncio.create_task(
                asker.request(busy.instance_id, Command(f"s{n}", Forget()))
            )
            for n in range(3)
        ]
        await all_busy.wait()
        refused = await asker.request(busy.instance_id, Command("s3", Forget()))
        assert (refused.status, refused.error_type) == ("error", "unavailable")
        assert busy.instance_id in refused.message and len(started) == 3
        go.set()
        assert await asyncio.gather(*first) == [Reply("ok")] * 3
        again = await asker.request(busy.instance_id, Command("s4", Forget()))
        assert again == Reply("ok") and len(started) == 4


async def test_a_quiet_connection_is_no_trouble(redis_url: str) -> None:
    """Nothing arrives for several Redis timeouts: the listener's waits are
    not failures, and a command still gets through."""
    async with buses(redis_url, 2, lease_ttl_s=0.9, redis_timeout_s=0.3) as (a, b):
        await asyncio.sleep(1.2)  # the quiet itself is what is tested
        assert (a.trouble, b.trouble) == (None, None)
        assert await b.request(a.instance_id, Command("s1", Forget())) == Reply(
            "not_here"
        )


async def test_a_command_reaches_the_instance_it_names(redis_url: str) -> None:
    """A command reaches the instance it names; a crash, silence or absence fails."""
    async with buses(redis_url, 2, timeout_s=0.5) as (a, b):
        asked: list[Command] = []
        never = asyncio.Event()

        async def answer(command: Command) -> Reply:
            asked.append(command)
            if command.kind == "outcome":
                await never.wait()  # an instance that does not answer
            if command.kind == "report":
                raise RuntimeError("a bug on the other side")
            return Reply("ok", Result(value={"echo": command.body.model_dump()}))

        a.on_command = answer
        reply = await b.request(a.instance_id, Command("s1", StopRun(run_id="r1"), "u"))
        echo = {"kind": "stop_run", "run_id": "r1"}
        assert reply == Reply("ok", Result(value={"echo": echo}))
        assert asked[0].sender == b.instance_id and asked[0].user == "u"

        failed = await b.request(
            a.instance_id, Command("s1", Report(message="m", error_type="unavailable"))
        )
        assert (failed.status, failed.error_type) == ("error", "internal_error")

        with pytest.raises(BusError, match=r"did not answer within 0\.5 s"):
            await b.request(a.instance_id, Command("s1", Outcome(run_id="r1")))
        with pytest.raises(InstanceGone, match="is not running"):
            await b.request("0123456789ab", Command("s1", Forget()))


async def test_a_malformed_message_is_answered_never_fatal(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What is not a command, a reply or a frame is logged; a command whose
    envelope says where to answer is refused `invalid_message`; the listener
    goes on."""
    async with buses(redis_url, 2) as (a, b):
        raw = aioredis.Redis.from_url(redis_url, decode_responses=True)
        pubsub = raw.pubsub()
        await pubsub.subscribe(f"{PREFIX}inbox:asker")
        bad = {"session_id": "s1", "body": {"kind": "nonsense"}}
        envelope = {"id": "x1", "reply_to": "asker", "command": bad}
        for text in ("Cnot json", "R{}", "C" + json.dumps(envelope)):
            await raw.publish(f"{PREFIX}inbox:{a.instance_id}", text)
        async with asyncio.timeout(5):
            async for message in pubsub.listen():
                if message["type"] == "message":
                    break
        answer = json.loads(message["data"][1:])
        assert (answer["id"], answer["reply"]["status"]) == ("x1", "error")
        assert answer["reply"]["error_type"] == "invalid_message"
        assert await b.request(a.instance_id, Command("s1", Forget())) == Reply(
            "not_here"
        )
        got = asyncio.Event()
        b.on_frame = lambda *frame: got.set()
        await b.watch("s1")
        await raw.publish(f"{PREFIX}frames:s1", "not a frame")
        a.publish("s1", 0, 1, "f1")
        await got.wait()
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await raw.aclose()
    assert [r.msg for r in caplog.records if "malformed" in r.msg] == [
        "bus: a malformed command: %s",
        "bus: a malformed reply, dropped: %s",
        "bus: a malformed command: %s",
        "bus: a malformed frame on %s, dropped",
    ]


async def test_frames_arrive_in_order_each_naming_the_one_before(
    redis_url: str,
) -> None:
    """500 published frames arrive in order, each naming the seq of the one before."""
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
    """An unreachable Redis is named in the error with its password left out."""
    bus = RedisBus("redis://user:hunter2secret@127.0.0.1:1/0")
    with pytest.raises(BusError) as raised:
        await bus.start()
    assert "redis://127.0.0.1:1/0" in str(raised.value)
    assert "hunter2secret" not in str(raised.value)


def test_several_instances_need_postgresql() -> None:
    """A Redis URL without a PostgreSQL database URL, or a blank one, is rejected."""
    from tests.conftest import make_settings

    with pytest.raises(ValueError, match="LOOPWIRE_DATABASE_URL to a PostgreSQL"):
        make_settings(redis_url="redis://127.0.0.1:6379/0")
    with pytest.raises(ValueError, match="set but empty"):
        make_settings(redis_url=" ", database_url="postgresql://x@h/db")


async def test_a_lost_lease_lets_the_conversation_go_unsaved(
    pg_database_url: str, redis_url: str, start_server: StartServer
) -> None:
    """A lost lease closes the client with 1012, cancels the run, drops the session."""
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
    """`serve` exits 2 with a password-free message when its Redis is unreachable."""
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


async def test_a_listener_that_hears_nothing_back_connects_again(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Its PING unanswered within the Redis timeout (as over a half-open
    connection), the listener drops its connection, says so in `trouble`,
    and connects again, subscribed to the same channels."""
    options: dict[str, float] = {"lease_ttl_s": 0.9, "redis_timeout_s": 0.3}
    async with buses(own_redis.url, 2, **options) as (a, b):
        async with LeaseEvents(own_redis.url) as events:
            await events.pause(1500)
            await events.raw.ping()  # Redis answers again
        assert "bus: listening failed (reconnecting): no answer to a PING within " in (
            caplog.text
        )
        loop = asyncio.get_running_loop()
        until = loop.time() + 10
        # no event says it: look, briefly; both listeners, since the reply
        # to b's request comes to b's inbox
        while a.trouble is not None or b.trouble is not None:
            assert loop.time() < until, (a.trouble, b.trouble)
            await asyncio.sleep(0.02)
        reply = await b.request(a.instance_id, Command("s1", Forget()))
        assert reply == Reply("not_here")
