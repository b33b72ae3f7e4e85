"""The fault suite's tools, each tested: freezing a server process, the
PostgreSQL proxy (cuts, stalls, ambiguous commits), the servers of a test's
own (restarts, FLUSHALL, CLIENT PAUSE) and the invariant checker."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import redis.asyncio as aioredis
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from backend.agent.state import Ending, PendingQuestion, RunRequest, RunState
from backend.store.sql import SqlStore
from tests.faults import invariants
from tests.faults.conftest import OwnPostgres, OwnRedis, dsn
from tests.faults.pg_proxy import PgProxy, is_commit
from tests.server_process import server_process

pytestmark = pytest.mark.timeout(60)

DROPPED = (asyncpg.InterfaceError, asyncpg.PostgresConnectionError, OSError)
"""What asyncpg raises when its connection goes away mid-operation
(`ConnectionDoesNotExistError` is an InterfaceError)."""
NO_ANSWER_S = 0.3
"""How long "nothing comes" is watched for (a negative: no event to wait on)."""


@asynccontextmanager
async def proxy_to(url: str) -> AsyncIterator[PgProxy]:
    parsed = make_url(url)
    assert parsed.host is not None and parsed.port is not None
    async with PgProxy(parsed.host, parsed.port) as proxy:
        yield proxy


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(dsn(url), timeout=10)
    try:
        yield connection
    finally:
        await connection.close(timeout=5)


async def stopped(pid: int) -> None:
    """Wait until the child `pid` is stopped (the kernel says so, as it
    would to its parent; the status is left for whoever waits for it)."""
    flags = os.WSTOPPED | os.WEXITED | os.WNOWAIT
    result = await asyncio.wait_for(
        asyncio.to_thread(os.waitid, os.P_PID, pid, flags), 10
    )
    assert result is not None and result.si_code == os.CLD_STOPPED


# ---------------------------------------------------------------- freeze / thaw


async def test_a_frozen_server_answers_once_thawed_and_stops_gracefully(
    tmp_path: Path,
) -> None:
    """A frozen server answers only once thawed, and stops cleanly while frozen."""
    async with server_process(f"sqlite:///{tmp_path / 'db' / 'l.db'}") as server:
        url = f"http://127.0.0.1:{server.port}/healthz"
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.get(url)).status_code == 200
            server.freeze()
            await stopped(server.pid)
            assert server.frozen and server.running
            request = asyncio.ensure_future(http.get(url))
            done, _ = await asyncio.wait({request}, timeout=NO_ANSWER_S)
            assert not done, "a frozen server answered"
            server.thaw()
            assert (await request).status_code == 200
            assert not server.frozen

        server.freeze()
        await stopped(server.pid)
        started = time.monotonic()
        await server.stop_quietly()  # SIGTERM alone would wait for a SIGCONT
        assert not server.running and not server.frozen
        assert server._process is not None and server._process.returncode == 0
        assert time.monotonic() - started < 10


async def test_a_frozen_server_can_be_killed_as_it_is(tmp_path: Path) -> None:
    """A frozen server can be killed outright with SIGKILL."""
    async with server_process(f"sqlite:///{tmp_path / 'db' / 'l.db'}") as server:
        server.freeze()
        await stopped(server.pid)
        assert await server.kill() == -9
        assert not server.frozen


# ---------------------------------------------------------------- the proxy


async def test_the_proxy_forwards_many_connections(pg_database_url: str) -> None:
    """The proxy carries six concurrent connections with large replies intact."""
    async with proxy_to(pg_database_url) as proxy:
        url = proxy.url_for(pg_database_url)
        assert make_url(url).port == proxy.port != make_url(pg_database_url).port

        async def use(n: int) -> str:
            async with connected(url) as connection:
                async with connection.transaction():
                    big = await connection.fetchval(
                        "SELECT repeat('x', $1)", 300_000 + n
                    )
                assert len(big) == 300_000 + n  # longer than one read of a socket
                value: str = await connection.fetchval("SELECT $1::text", f"n{n}")
                return value

        results = await asyncio.gather(*(use(n) for n in range(6)))
        assert results == [f"n{n}" for n in range(6)]
        assert proxy.accepted == 6
        assert proxy.commits_seen == 6
        assert proxy.commits_dropped == 0


async def test_an_armed_commit_commits_while_the_client_sees_its_connection_drop(
    pg_database_url: str,
) -> None:
    """An armed drop lets the commit land but cuts the client; then it disarms."""
    async with connected(pg_database_url) as direct, proxy_to(pg_database_url) as proxy:
        await direct.execute("CREATE TABLE t (id int PRIMARY KEY, note text)")
        async with connected(proxy.url_for(pg_database_url)) as through:
            transaction = through.transaction()
            await transaction.start()
            await through.execute("INSERT INTO t VALUES (1, 'ambiguous')")
            proxy.arm_drop_after_commit()
            with pytest.raises(DROPPED):
                await transaction.commit()
            await proxy.wait_dropped()
            assert through.is_closed()
        assert await direct.fetchval("SELECT note FROM t WHERE id = 1") == "ambiguous"
        assert (proxy.commits_seen, proxy.commits_dropped, proxy.armed) == (1, 1, 0)
        # what asyncpg sent: a simple Query, the text "COMMIT;"
        assert [q for q in proxy.queries if is_commit(q)] == ["COMMIT;"]

        async with connected(proxy.url_for(pg_database_url)) as again:  # disarmed
            transaction = again.transaction()
            await transaction.start()
            await again.execute("INSERT INTO t VALUES (2, 'plain')")
            await transaction.commit()
        assert await direct.fetchval("SELECT count(*) FROM t") == 2
        assert (proxy.commits_seen, proxy.commits_dropped) == (2, 1)


async def test_an_ambiguous_commit_through_sqlalchemy_as_loopwire_commits(
    pg_database_url: str,
) -> None:
    """Through SQLAlchemy, dropped commits still land and the pool reconnects after."""
    async with connected(pg_database_url) as direct, proxy_to(pg_database_url) as proxy:
        await direct.execute("CREATE TABLE t (id int PRIMARY KEY)")
        engine = create_async_engine(
            proxy.url_for(pg_database_url), pool_pre_ping=True
        )  # as backend/store/sql.py makes it
        try:
            proxy.arm_drop_after_commit(2)
            for n in (1, 2):
                with pytest.raises(DBAPIError) as raised:
                    async with engine.begin() as connection:
                        await connection.execute(text(f"INSERT INTO t VALUES ({n})"))
                assert raised.value.connection_invalidated
            await proxy.wait_dropped()
            async with engine.begin() as connection:  # the pool reconnects
                await connection.execute(text("INSERT INTO t VALUES (3)"))
        finally:
            await engine.dispose()
        assert await direct.fetchval("SELECT array_agg(id ORDER BY id) FROM t") == [
            1,
            2,
            3,
        ]
        commits = [q for q in proxy.queries if is_commit(q)]
        assert commits == ["COMMIT;"] * 3
        assert (proxy.commits_seen, proxy.commits_dropped) == (3, 2)


async def test_cut_all_drops_every_connection_and_new_ones_work(
    pg_database_url: str,
) -> None:
    """`cut_all` breaks every open connection while new ones still connect."""
    async with proxy_to(pg_database_url) as proxy:
        url = proxy.url_for(pg_database_url)
        async with connected(url) as first, connected(url) as second:
            assert proxy.connections == 2
            assert proxy.cut_all() == 2
            for connection in (first, second):
                with pytest.raises(DROPPED):
                    await connection.fetchval("SELECT 1", timeout=10)
            async with connected(url) as third:
                assert await third.fetchval("SELECT 3") == 3
        assert proxy.cuts == 2


async def test_a_stalled_proxy_holds_the_connection_open_until_it_flows(
    pg_database_url: str,
) -> None:
    """A stalled proxy withholds the reply until `flow` lets it through."""
    async with proxy_to(pg_database_url) as proxy:
        connection = await asyncpg.connect(dsn(proxy.url_for(pg_database_url)))
        try:
            proxy.stall()
            query = asyncio.ensure_future(connection.fetchval("SELECT 7"))
            done, _ = await asyncio.wait({query}, timeout=NO_ANSWER_S)
            assert not done, "a stalled proxy let a reply through"
            proxy.flow()
            assert await query == 7
        finally:
            await connection.close(timeout=5)


async def test_a_proxy_rejecting_new_connections(pg_database_url: str) -> None:
    """While `reject_new` is set connecting fails, and it succeeds once cleared."""
    async with proxy_to(pg_database_url) as proxy:
        proxy.reject_new = True
        with pytest.raises(DROPPED):
            await asyncpg.connect(dsn(proxy.url_for(pg_database_url)), timeout=10)
        proxy.reject_new = False
        async with connected(proxy.url_for(pg_database_url)) as connection:
            assert await connection.fetchval("SELECT 1") == 1


# ---------------------------------------------------------------- own servers


async def test_own_redis_flushall_pause_and_restart(own_redis: OwnRedis) -> None:
    """The private Redis can be flushed, paused for a set time, and restarted empty."""
    client = aioredis.from_url(own_redis.url)  # another instance's
    try:
        await own_redis.client.set("loopwire:lease:c1", "A")
        assert await client.get("loopwire:lease:c1") == b"A"
        await own_redis.flushall()
        assert await client.keys("*") == []

        await client.ping()
        await own_redis.pause(300)
        started = time.monotonic()
        assert await client.ping()  # held until the pause ends
        assert time.monotonic() - started >= 0.25
        assert time.monotonic() >= own_redis.paused_until - 0.05

        port = own_redis.port
        await own_redis.client.set("k", "v")
        await own_redis.restart()
        assert own_redis.port == port
        assert await own_redis.client.get("k") is None  # nothing persists
        await client.connection_pool.disconnect()  # its socket went with the server
        assert await client.ping()
    finally:
        await client.aclose()


async def test_own_postgres_restarts_on_its_port_with_its_data(
    own_postgres: OwnPostgres, pg_proxy: PgProxy, proxied_database_url: str
) -> None:
    """The private PostgreSQL restarts, halts and recovers on its port with its data."""
    assert make_url(proxied_database_url).port == pg_proxy.port
    async with connected(own_postgres.url) as direct:
        await direct.execute("CREATE TABLE kept (v text)")
        await direct.execute("INSERT INTO kept VALUES ('before')")
    port = own_postgres.port
    through = await asyncpg.connect(dsn(proxied_database_url), timeout=10)
    try:
        await own_postgres.restart()
        assert own_postgres.port == port
        with pytest.raises((*DROPPED, asyncpg.AdminShutdownError)):
            await through.fetchval("SELECT 1", timeout=10)
    finally:
        await through.close(timeout=5)
    async with connected(proxied_database_url) as again:
        assert await again.fetchval("SELECT v FROM kept") == "before"

    await own_postgres.halt()
    with pytest.raises(DROPPED):
        await asyncpg.connect(dsn(proxied_database_url), timeout=10)
    await own_postgres.start_again()
    async with connected(proxied_database_url) as back:
        assert await back.fetchval("SELECT count(*) FROM kept") == 1

    await own_postgres.restart("immediate")  # a crash: recovery on start
    async with connected(own_postgres.url) as recovered:
        assert await recovered.fetchval("SELECT v FROM kept") == "before"


# ---------------------------------------------------------------- invariants

FENCING = (
    "ALTER TABLE conversations ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE frames ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE notes ADD COLUMN IF NOT EXISTS key VARCHAR(200) UNIQUE",
    "CREATE TABLE IF NOT EXISTS tool_effects (key VARCHAR(200) PRIMARY KEY, "
    "conversation_id VARCHAR(64) NOT NULL REFERENCES conversations (id) "
    "ON DELETE CASCADE, tool_name VARCHAR(128) NOT NULL, result TEXT NOT NULL, "
    "created_at DOUBLE PRECISION NOT NULL)",
)
"""The fencing schema, where its migration has not landed yet."""


async def migrated(url: str, *, fencing: bool) -> asyncpg.Connection:
    """The loopwire schema on `url` (its migrations), the fencing columns
    added or removed; a connection to it (close it)."""
    store = SqlStore(url)
    await store.open()
    await store.close()
    connection = await asyncpg.connect(dsn(url), timeout=10)
    if fencing:
        for statement in FENCING:
            await connection.execute(statement)
    else:
        await connection.execute("DROP TABLE IF EXISTS tool_effects")
        for table, column in [
            ("conversations", "epoch"),
            ("runs", "epoch"),
            ("frames", "epoch"),
            ("notes", "key"),
        ]:
            await connection.execute(
                f"ALTER TABLE {table} DROP COLUMN IF EXISTS {column} CASCADE"
            )
    return connection


class Rows:
    """Rows written by hand, as loopwire would (epoch columns when present)."""

    def __init__(self, db: asyncpg.Connection, *, epochs: bool) -> None:
        self.db = db
        self.epochs = epochs

    async def conversation(self, cid: str, epoch: int = 0) -> None:
        columns, values = (
            ["id", "owner", "title", "created_at", "updated_at", "settings"],
            [
                cid,
                "u",
                "",
                1.0,
                1.0,
                "{}",
            ],
        )
        await self._insert("conversations", columns, values, epoch)

    async def frame(
        self,
        cid: str,
        seq: int,
        *,
        epoch: int = 0,
        run_id: str | None = None,
        **envelope: Any,
    ) -> None:
        """`envelope`: what its text says instead (`text_seq`, `session_id`)."""
        if "text_seq" in envelope:
            envelope["seq"] = envelope.pop("text_seq")
        head = {"seq": seq, "session_id": cid, "run_id": run_id, **envelope}
        frame_text = json.dumps({**head, "ts": 1.0, "type": "token"})
        await self._insert(
            "frames",
            ["conversation_id", "seq", "run_id", "text"],
            [cid, seq, run_id, frame_text],
            epoch,
        )

    async def run(
        self,
        cid: str,
        run_id: str,
        status: str,
        state: RunState | dict[str, Any] | str,
        *,
        steps: int | None = None,
        epoch: int = 0,
    ) -> None:
        if isinstance(state, RunState):
            state = json.loads(state.to_json())
        if isinstance(state, dict):
            step = state["step"]
            state = json.dumps(state)
        else:
            step = 0
        columns = ["id", "conversation_id", "strategy", "status", "request", "steps"]
        columns += ["usage", "started_at", "active_ms", "state"]
        values = [run_id, cid, "react", status, "q", step if steps is None else steps]
        values += ["{}", 1.0, 0.0, state]
        await self._insert("runs", columns, values, epoch)

    async def note(self, text_: str, number: int, key: str | None = None) -> None:
        columns, values = (
            ["owner", "number", "text", "saved_at"],
            ["u", number, text_, 1.0],
        )
        if key is not None:
            columns.append("key")
            values.append(key)
        await self._insert("notes", columns, values, None)

    async def effect(self, cid: str, key: str) -> None:
        await self._insert(
            "tool_effects",
            ["key", "conversation_id", "tool_name", "result", "created_at"],
            [key, cid, "save_note", "saved", 1.0],
            None,
        )

    async def _insert(
        self, table: str, columns: list[str], values: list[Any], epoch: int | None
    ) -> None:
        if self.epochs and epoch is not None:
            columns, values = [*columns, "epoch"], [*values, epoch]
        marks = ", ".join(f"${n}" for n in range(1, len(values) + 1))
        await self.db.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", *values
        )


def state(run_id: str, cid: str, **fields: Any) -> RunState:
    return RunState(
        run_id=run_id,
        session_id=cid,
        strategy="react",
        request=RunRequest(content="q", agent=True),
        max_steps=5,
        max_steps_cap=10,
        **fields,
    )


def ended(run_id: str, cid: str, reason: Any, step: int = 2) -> RunState:
    ending = Ending(answer="done", reason=reason)
    return state(run_id, cid, phase="ending", step=step, ending=ending)


def waiting(run_id: str, cid: str) -> RunState:
    question = PendingQuestion(
        question_id="q1", question="which?", step=1, timeout_s=60, deadline=2e9
    )
    return state(run_id, cid, phase="ask", step=1, pending_question=question)


async def fill_good(rows: Rows) -> None:
    """A conversation taken over once (epoch 1 → 2), everything as it should be."""
    await rows.conversation("c-good", epoch=2)
    for seq, epoch in [(1, 1), (2, 1), (3, 2), (4, 2)]:
        await rows.frame(
            "c-good", seq, epoch=epoch, run_id="r-fin" if seq < 3 else None
        )
    await rows.run(
        "c-good", "r-fin", "finished", ended("r-fin", "c-good", "finished"), epoch=1
    )
    await rows.run(
        "c-good", "r-int", "interrupted", ended("r-int", "c-good", "interrupted")
    )
    await rows.run("c-good", "r-stop", "stopped", ended("r-stop", "c-good", "stopped"))
    store_error = json.loads(ended("r-err", "c-good", "error").to_json())
    store_error["ending"]["reason"] = "store_error"
    await rows.run("c-good", "r-err", "error", store_error, epoch=2)
    await rows.run("c-good", "r-wait", "waiting", waiting("r-wait", "c-good"), epoch=2)


async def test_the_checker_passes_a_sound_database(pg_database_url: str) -> None:
    """A database with only sound rows yields no violations and nothing skipped."""
    db = await migrated(pg_database_url, fencing=True)
    try:
        rows = Rows(db, epochs=True)
        await fill_good(rows)
        await rows.note("buy milk", 1, key="r-fin:call-1")
        await rows.effect("c-good", "r-fin:call-1")
        await rows.note("an old note", 2)
    finally:
        await db.close()
    result = await invariants.report(pg_database_url)
    assert (result.violations, result.skipped) == ([], [])
    assert await invariants.check(pg_database_url) == []
    assert await invariants.notes_by_text(pg_database_url) == {
        "buy milk": 1,
        "an old note": 1,
    }


async def test_the_checker_finds_each_violation(pg_database_url: str) -> None:
    """Each planted frame, run and note fault is reported once, within the filters."""
    db = await migrated(pg_database_url, fencing=True)
    try:
        await db.execute("ALTER TABLE frames DROP CONSTRAINT IF EXISTS pk_frames")
        await drop_unique_keys(db)
        rows = Rows(db, epochs=True)
        await fill_good(rows)
        await rows.conversation("c-bad", epoch=3)
        await rows.frame("c-bad", 1, epoch=1, text_seq=9)
        await rows.frame("c-bad", 2, epoch=2, session_id="c-other")
        await rows.frame("c-bad", 3, epoch=2)
        await rows.frame("c-bad", 3, epoch=2)  # a second seq 3
        await rows.frame("c-bad", 4, epoch=1)  # a deposed owner's frame
        await rows.frame("c-bad", 5, epoch=4)  # above the conversation
        await rows.run(
            "c-bad",
            "r-above",
            "finished",
            ended("r-above", "c-bad", "finished"),
            epoch=4,
        )
        await rows.run("c-bad", "r-running", "running", state("r-running", "c-bad"))
        await rows.run("c-bad", "r-parked", "suspended", state("r-parked", "c-bad"))
        await rows.run("c-bad", "r-idle", "waiting", state("r-idle", "c-bad", step=1))
        await rows.run(
            "c-bad", "r-noend", "finished", state("r-noend", "c-bad", phase="act")
        )
        await rows.run(
            "c-bad", "r-wrong", "stopped", ended("r-wrong", "c-bad", "finished")
        )
        await rows.run(
            "c-bad",
            "r-steps",
            "finished",
            ended("r-steps", "c-bad", "finished"),
            steps=1,
        )
        await rows.run("c-bad", "r-json", "error", "{not json")
        await rows.note("twice", 1, key="r-x:call-1")
        await rows.note("twice", 2, key="r-x:call-1")
        await rows.effect("c-bad", "r-x:call-1")
        await rows.note("no effect", 3, key="r-y:call-1")
    finally:
        await db.close()

    expected = [
        "frames: conversation c-bad has 2 frames with seq 3",
        "frames: conversation c-bad seq 1: its text says seq 9",
        "frames: conversation c-bad seq 2: its text says session_id 'c-other'",
        "frames: conversation c-bad seq 4: epoch 1 after seq 3's epoch 2",
        "frames: conversation c-bad seq 5: epoch 4 above its conversation's 3",
        "runs: run r-above (finished, conversation c-bad): epoch 4 above its conversation's 3",
        "runs: run r-running (running, conversation c-bad): nobody owns it",
        "runs: run r-parked (suspended, conversation c-bad): nobody owns it",
        "runs: run r-idle (waiting, conversation c-bad): nobody owns it and its checkpoint waits for nothing",
        "runs: run r-noend (finished, conversation c-bad): over, but its checkpoint has no ending (phase 'act')",
        "runs: run r-wrong (stopped, conversation c-bad): its checkpoint ends with 'finished'",
        "runs: run r-steps (finished, conversation c-bad): steps 1, its checkpoint's step 2",
        "runs: run r-json (error, conversation c-bad): its checkpoint is not JSON",
        "notes: 2 notes with the key 'r-x:call-1'",
        "notes: the note with the key 'r-y:call-1' has no tool effect",
    ]
    found = await invariants.check(pg_database_url)
    assert_matches(found, expected)
    assert await invariants.notes_by_text(pg_database_url) == {
        "twice": 2,
        "no effect": 1,
    }

    owned = await invariants.check(
        pg_database_url, owned={"c-bad"}, allow_suspended=True
    )
    assert_matches(owned, [e for e in expected if "nobody owns it" not in e])
    parked = await invariants.check(pg_database_url, allow_suspended=True)
    assert_matches(parked, [e for e in expected if "r-parked" not in e])


async def test_the_checker_reads_the_owners_from_redis(
    pg_database_url: str, own_redis: OwnRedis
) -> None:
    """A running run counts as unowned until Redis holds its conversation's lease."""
    db = await migrated(pg_database_url, fencing=True)
    try:
        rows = Rows(db, epochs=True)
        await rows.conversation("c-live", epoch=1)
        await rows.run(
            "c-live", "r-running", "running", state("r-running", "c-live"), epoch=1
        )
    finally:
        await db.close()
    assert len(await invariants.check(pg_database_url, redis_url=own_redis.url)) == 1
    await own_redis.client.set("loopwire:lease:c-live", "instance-a", px=60_000)
    assert await invariants.live_owners(own_redis.url) == {"c-live"}
    assert await invariants.check(pg_database_url, redis_url=own_redis.url) == []


async def test_the_checker_skips_what_the_schema_does_not_have_yet(
    pg_database_url: str,
) -> None:
    """Without the fencing columns, their checks are skipped and the rest still run."""
    db = await migrated(pg_database_url, fencing=False)
    try:
        rows = Rows(db, epochs=False)
        await rows.conversation("c-old")
        await rows.frame("c-old", 1)
        await rows.frame("c-old", 2, session_id="c-else")
        await rows.run(
            "c-old", "r-old", "finished", ended("r-old", "c-old", "finished")
        )
    finally:
        await db.close()
    result = await invariants.report(pg_database_url)
    assert result.violations == [
        "frames: conversation c-old seq 2: its text says session_id 'c-else'"
    ]
    skipped = " / ".join(result.skipped)
    for column in ("conversations.epoch", "frames.epoch", "runs.epoch", "notes.key"):
        assert column in skipped


async def drop_unique_keys(db: asyncpg.Connection) -> None:
    """Let `notes.key` hold a duplicate (to see the checker find one)."""
    names = await db.fetch(
        "SELECT DISTINCT c.conname FROM pg_constraint c JOIN pg_attribute a "
        "ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) "
        "WHERE c.conrelid = 'notes'::regclass AND c.contype = 'u' AND a.attname = 'key'"
    )
    for row in names:
        await db.execute(f'ALTER TABLE notes DROP CONSTRAINT "{row["conname"]}"')
    indexes = await db.fetch(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'notes' "
        "AND indexdef LIKE 'CREATE UNIQUE%' AND indexdef LIKE '%(key)%'"
    )
    for row in indexes:
        await db.execute(f'DROP INDEX "{row["indexname"]}"')


def assert_matches(found: list[str], expected: list[str]) -> None:
    """Each expected violation starts exactly one found, and nothing else is found."""
    unmatched = list(found)
    for prefix in expected:
        hits = [v for v in unmatched if v.startswith(prefix)]
        assert len(hits) == 1, f"{prefix!r}: {hits or 'not found'} in {found}"
        unmatched.remove(hits[0])
    assert unmatched == [], f"unexpected violations: {unmatched}"
