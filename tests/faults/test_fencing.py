"""The database is the referee: faults injected into real processes, and
what must hold afterwards checked in PostgreSQL itself.

Two loopwire instances (`python -m backend serve`) share a PostgreSQL and
a Redis started by the tests; the model is the embedded offline one, whose
"save a note: …" asks for approval of `save_note` (a tool that changes
data). Each case freezes (SIGSTOP), kills, cuts or restarts something at a
chosen point, lets the system settle, and then asserts, in the database:

- the note was saved exactly once (`notes`), whoever ran the call and
  however often it was attempted;
- the invariants of `tests/faults/invariants.py`: seqs unique and matching
  their frames, no frame or run written at an epoch after a take-over by
  the owner it replaced, every run record final and consistent with its
  checkpoint (or waiting with what it waits for, where nobody owns it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from tests.fake_openai import FakeOpenAIServer, HangReply, Reply
from tests.fakes import observe, reason
from tests.faults import invariants
from tests.faults.conftest import OwnPostgres, OwnRedis
from tests.faults.pg_proxy import PgProxy
from tests.fifo import fifo
from tests.server_process import ServerProcess
from tests.ws_client import Client, Frame, label

pytestmark = pytest.mark.timeout(180)

MCP_SERVERS = Path(__file__).resolve().parent.parent / "mcp_servers"
LEASE_S = 2.0
NOTE = "buy milk"
APPROVAL = "tool_approval_request:save_note"


@asynccontextmanager
async def instances(
    a_database: str, b_database: str, redis_url: str, **settings: Any
) -> AsyncIterator[tuple[ServerProcess, ServerProcess]]:
    """Instances A and B on one Redis (each with its own database URL: the
    same database, maybe reached through a proxy)."""
    given = {"redis_url": redis_url, "lease_ttl_s": LEASE_S, **settings}
    env = {k: str(v) for k, v in given.items()}
    a = ServerProcess(a_database, **env)
    b = ServerProcess(b_database, **env)
    try:
        await a.start()
        await b.start()
        yield a, b
    except BaseException:
        for name, process in (("A", a), ("B", b)):
            print(f"--- instance {name} ---")
            print("\n".join(process.lines[-60:]))
        raise
    finally:
        for process in (a, b):
            await process.stop_quietly()


async def waiting_for_approval(
    stack: AsyncExitStack, owner: ServerProcess
) -> tuple[Client, str, Frame]:
    """A client on `owner` whose run waits for the approval of `save_note`:
    the client, the session and the request."""
    client = await owner.client(stack)
    session = (await client.recv())["session_id"]
    await client.send(type="chat", content=f"save a note: {NOTE}", agent_mode=True)
    request = (await client.until_label(APPROVAL))[-1]
    return client, session, request


async def approve(client: Client, request: Frame) -> None:
    """Approve the call (nothing sent if the server closed the socket)."""
    with contextlib.suppress(ConnectionClosed):
        await client.send(
            type="tool_approval_response",
            tool_call_id=request["tool_call_id"],
            approved=True,
        )


async def rest_of(client: Client) -> list[Frame]:
    """Every frame until the server closes the socket."""
    frames: list[Frame] = []
    with contextlib.suppress(ConnectionClosed):
        while True:
            frames.append(await client.recv())
    return frames


async def resumed_on(
    stack: AsyncExitStack, heir: ServerProcess, session: str
) -> tuple[Client, list[Frame]]:
    """A client on `heir`, which took `session` over, and its replay up to
    the pending approval (stored with the waiting checkpoint, so a page
    reloaded there shows it)."""
    await heir.logged(f"took over conversation {session}")
    client = await heir.client(stack, f"session_id={session}&last_seq=0")
    ready = await client.recv()
    assert (ready["type"], ready["resumed"]) == ("session_ready", True)
    return client, await client.until_label(APPROVAL)


async def took_over(session: str, *processes: ServerProcess) -> ServerProcess:
    """The first of `processes` to log taking `session` over (waits)."""
    line = f"took over conversation {session}"
    waits = {asyncio.ensure_future(p.logged(line)): p for p in processes}
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        return waits[done.pop()]
    finally:
        for task in waits:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


async def settled(database_url: str, redis_url: str) -> None:
    """What must hold in the database, whatever happened."""
    assert await invariants.notes_by_text(database_url) == {NOTE: 1}
    assert await invariants.check(database_url, redis_url=redis_url) == []


def ran(frames: list[Frame], tool: str = "save_note") -> list[str]:
    """The tool frames of `tool` among `frames`."""
    return [label(f) for f in frames if label(f).split(":")[1:2] == [tool]]


# ---------------------------------------------------------------- the cases


async def test_a_frozen_owner_wakes_to_a_decision_it_may_not_act_on(
    pg_database_url: str, redis_url: str
) -> None:
    """A freezes (SIGSTOP) past its lease while its run waits for approval;
    the user's approval sits unread in A's socket. B takes the run over, the
    approval sent through B runs the tool and the run finishes. A wakes: the
    approval it reads is refused by the store's fence (or A already knows it
    lost the lease), so the note is saved once and A writes nothing more."""
    async with (
        instances(pg_database_url, pg_database_url, redis_url) as (a_proc, b_proc),
        AsyncExitStack() as stack,
    ):
        a, session, request = await waiting_for_approval(stack, a_proc)
        a_proc.freeze()
        await approve(a, request)  # unread: A is frozen

        b, replay = await resumed_on(stack, b_proc, session)
        assert replay[-1]["tool_call_id"] == request["tool_call_id"]
        await approve(b, request)
        finished = await b.run()
        assert ran(finished) == ["tool_complete:save_note"]

        a_proc.thaw()
        after = await rest_of(a)
        assert ran(after) == []  # A ran nothing after its wake
        moved = [f for f in after if f.get("error_type") == "moved"]
        assert all(f["seq"] == 0 for f in moved)
        print(f"A, woken: {[label(f) for f in after]}")
        await a_proc.logged(f"session {session}")  # A says it let it go
    await settled(pg_database_url, redis_url)


@pytest.mark.parametrize("fault", ["freeze", "kill"])
async def test_an_owner_stopped_inside_the_tool_leaves_it_to_run_once(
    own_postgres: OwnPostgres,
    pg_proxy: PgProxy,
    redis_url: str,
    fault: str,
) -> None:
    """A's `save_note` is caught inside its transaction (the proxy holds its
    INSERT); then A is frozen or killed. B takes the run over with the call
    in doubt; the tool's `reconcile` finds it never took effect, so B runs
    it. A, thawed, finishes its transaction into the key B recorded (or the
    fence): nothing twice."""
    database = own_postgres.url
    async with (
        instances(pg_proxy.url_for(database), database, redis_url) as (a_proc, b),
        AsyncExitStack() as stack,
    ):
        a, session, request = await waiting_for_approval(stack, a_proc)
        pg_proxy.hold_when("insert into notes")
        await approve(a, request)
        await pg_proxy.held()
        if fault == "freeze":
            a_proc.freeze()
        else:
            await a_proc.kill()

        await b.logged(f"took over conversation {session}")
        client = await b.client(stack, f"session_id={session}&last_seq=0")
        frames = await client.until_label("response_complete")
        assert "tool_complete:save_note" in ran(frames)

        pg_proxy.flow()
        if fault == "freeze":
            a_proc.thaw()
            after = await rest_of(a)
            assert "tool_start:save_note" not in ran(after)
    await settled(database, redis_url)


async def test_redis_forgetting_its_leases_cannot_make_two_owners_write(
    pg_database_url: str, own_redis: OwnRedis
) -> None:
    """FLUSHALL while a run waits: the lease is gone, and an instance (B, or
    A itself once it has let it go) takes the conversation over, raising its
    epoch, while A's old session may still think it owns it. An approval
    sent to that old session is refused by the fence (or A has let go of it
    already); sent through B it reaches the owner and runs the tool, once."""
    async with (
        instances(pg_database_url, pg_database_url, own_redis.url) as (a_proc, b_proc),
        AsyncExitStack() as stack,
    ):
        a, session, request = await waiting_for_approval(stack, a_proc)
        await own_redis.flushall()
        heir = await took_over(session, a_proc, b_proc)
        print(f"taken over by {'A' if heir is a_proc else 'B'}")
        await approve(a, request)  # the old session: refused one way or another
        assert ran(await rest_of(a)) == []

        b = await b_proc.client(stack, f"session_id={session}&last_seq=0")
        assert (await b.recv())["resumed"] is True
        replay = await b.until_label(APPROVAL)
        assert replay[-1]["tool_call_id"] == request["tool_call_id"]
        await approve(b, request)
        assert ran(await b.run()) == ["tool_complete:save_note"]
    await settled(pg_database_url, own_redis.url)


async def test_a_redis_pause_longer_than_a_renewal_loses_nothing(
    pg_database_url: str, own_redis: OwnRedis
) -> None:
    """CLIENT PAUSE for longer than a renewal period (a third of the lease)
    but less than the lease: A keeps its conversation, nobody takes it."""
    async with (
        instances(pg_database_url, pg_database_url, own_redis.url) as (a_proc, _b),
        AsyncExitStack() as stack,
    ):
        a, _session, request = await waiting_for_approval(stack, a_proc)
        await own_redis.pause(int(LEASE_S / 3 * 1000 * 1.5))
        await approve(a, request)
        assert ran(await a.run()) == ["tool_complete:save_note"]
    await settled(pg_database_url, own_redis.url)


async def test_postgresql_restarted_under_a_decision_loses_nothing(
    own_postgres: OwnPostgres, redis_url: str
) -> None:
    """PostgreSQL restarts while a run waits; the approval that follows is
    stored (the checkpoint waits for the database and tries again) and the
    run finishes."""
    database = own_postgres.url
    async with (
        instances(database, database, redis_url) as (a_proc, _b),
        AsyncExitStack() as stack,
    ):
        a, _session, request = await waiting_for_approval(stack, a_proc)
        await own_postgres.halt()
        await approve(a, request)
        await own_postgres.start_again()
        frames = await a.run()
        assert ran(frames) == ["tool_complete:save_note"]
    await settled(database, redis_url)


async def test_a_commit_whose_answer_is_lost_is_replayed_harmlessly(
    own_postgres: OwnPostgres, pg_proxy: PgProxy, redis_url: str
) -> None:
    """The connection drops right after PostgreSQL committed the decision
    (the answer never reaches A). A tries the same batch again: its rows are
    idempotent by their keys, so the retry succeeds and the run goes on."""
    database = own_postgres.url
    async with (
        instances(pg_proxy.url_for(database), database, redis_url) as (a_proc, _b),
        AsyncExitStack() as stack,
    ):
        a, _session, request = await waiting_for_approval(stack, a_proc)
        pg_proxy.arm_drop_after_commit(2)  # the decision, then the tool's start
        await approve(a, request)
        await pg_proxy.wait_dropped()
        frames = await a.run()
        assert ran(frames) == ["tool_complete:save_note"]
        assert not [f for f in frames if f["type"] == "error"]
    await settled(database, redis_url)


async def test_an_owner_killed_inside_a_tool_that_cannot_reconcile_asks_the_user(
    pg_database_url: str,
    redis_url: str,
    fake_openai: FakeOpenAIServer,
    tmp_path: Path,
) -> None:
    """An MCP tool that changes something outside loopwire (no `reconcile`)
    is running on A when A is killed. It got the call's idempotency key in
    `_meta`. B takes the run over with the call in doubt and asks the user
    (an approval `in_doubt`) instead of running it again; declined, it is
    reported as may-have-run and the run answers."""
    async with fifo(tmp_path, "posted") as (channel, posted):
        config = tmp_path / "mcp.json"
        server = {
            "command": sys.executable,
            "args": [str(MCP_SERVERS / "tools_server.py")],
            "effects": {"default": {"requires_approval": False}},
        }
        config.write_text(json.dumps({"mcpServers": {"demo": server}}))
        fake_openai.script(
            Reply(content=reason("Post it.", tools=["demo__post"])),
            Reply(tool_calls=[("demo__post", {"channel": channel, "text": "pay"})]),
            Reply(content=observe(should_continue=False, final="Not posted again.")),
        )
        settings = {
            "llm_base_url": fake_openai.base_url,
            "llm_api_key": "test",
            "mcp_config": str(config),
        }
        async with (
            instances(pg_database_url, pg_database_url, redis_url, **settings) as (
                a_proc,
                b_proc,
            ),
            AsyncExitStack() as stack,
        ):
            a = await a_proc.client(stack)
            session = (await a.recv())["session_id"]
            await a.send(type="chat", content="post the payment", agent_mode=True)
            started = (await a.until_label("tool_start:demo__post"))[-1]
            line = (await posted.readline()).decode().strip()
            assert line == f"started {started['run_id']}:{started['tool_call_id']}"
            await a_proc.kill()

            await b_proc.logged(f"took over conversation {session}")
            b = await b_proc.client(stack, f"session_id={session}&last_seq=0")
            asked = (await b.until_label("tool_approval_request:demo__post"))[-1]
            assert asked["in_doubt"] is True
            await b.send(
                type="tool_approval_response",
                tool_call_id=asked["tool_call_id"],
                approved=False,
            )
            frames = await b.run()
            assert ran(frames, "demo__post") == ["tool_error:demo__post:cancelled"]
            assert frames[-3]["message"] == "Not posted again."
        assert fake_openai.pending_replies == 0
    assert await invariants.check(pg_database_url, redis_url=redis_url) == []


async def test_redis_forgetting_its_leases_mid_phase_ends_the_run_once(
    pg_database_url: str, own_redis: OwnRedis, fake_openai: FakeOpenAIServer
) -> None:
    """FLUSHALL while a run is inside a model call: its owner lets it go
    (cancelled unsaved) at its next renewal, and whoever takes the
    conversation over reports the run `interrupted`, once, without asking
    the model again; nothing the old session does afterwards is stored."""
    fake_openai.script(HangReply(partial_content="Thinking"))
    settings = {"llm_base_url": fake_openai.base_url, "llm_api_key": "test"}
    async with (
        instances(pg_database_url, pg_database_url, own_redis.url, **settings) as (
            a_proc,
            b_proc,
        ),
        AsyncExitStack() as stack,
    ):
        a = await a_proc.client(stack)
        session = (await a.recv())["session_id"]
        await a.send(type="chat", content="think hard", agent_mode=True)
        await a.until_label("agent_turn_start")
        await fake_openai.wait_for_requests(1)
        await own_redis.flushall()
        await rest_of(a)  # let go: its clients are closed
        await took_over(session, a_proc, b_proc)
        b = await b_proc.client(stack, f"session_id={session}&last_seq=0")
        frames = await b.until_label("response_complete")
        completion = [f for f in frames if label(f) == "agent_completion"]
        assert [f["reason"] for f in completion] == ["interrupted"]
        assert len(fake_openai.requests) == 1
    assert await invariants.check(pg_database_url, redis_url=own_redis.url) == []
