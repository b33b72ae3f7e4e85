"""Sign-ins in the store (on SQLite and a real PostgreSQL) and `SignIns`:
the cookie, what is kept of it, expiry, revocation and the roles."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backend.identity.signins import CACHE_S, SignIns
from backend.llm.base import Usage
from backend.store.base import Batch, SignInRecord, UsageRecord
from backend.store.records import ConversationRecord, FileRecord, RunRecord
from backend.store.sql import SqlStore
from backend.users import Identity, Users

ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210xyz"
DAY = 24 * 3600.0


@pytest.fixture
async def memory_store() -> AsyncIterator[SqlStore]:
    opened = SqlStore("sqlite://")
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def record(
    sid: str, user: str = "bob", at: float = 1000.0, **more: Any
) -> SignInRecord:
    values: dict[str, Any] = {
        "id": sid,
        "user": user,
        "role": "user",
        "method": "token",
        "secret_hash": "h" * 64,
        "created_at": at,
        "expires_at": at + DAY,
        "last_seen_at": at,
        "user_agent": "Test/1.0",
    }
    values.update(more)
    return SignInRecord.model_validate(values)


class Clocks:
    """The cache's clock (monotonic) and the records' (epoch seconds)."""

    def __init__(self) -> None:
        self.mono = 0.0
        self.wall = 1_000_000.0


def signins(
    store: SqlStore, users: Users, clocks: Clocks, ttl_s: float = DAY
) -> SignIns:
    return SignIns(
        store,
        users,
        ttl_s=ttl_s,
        clock=lambda: clocks.mono,
        wall=lambda: clocks.wall,
    )


# ---------------------------------------------------------------- the store


async def test_live_sign_ins_exclude_the_revoked_and_the_expired(
    store: SqlStore,
) -> None:
    """Live sign-ins, newest first, omit revoked and expired ones; revoking is once."""
    for sid, user, at in [
        ("s1", "bob", 1000.0),
        ("s2", "bob", 2000.0),
        ("s3", "ann", 3000.0),
    ]:
        await store.add_signin(record(sid, user, at), forget_before=0.0)
    assert await store.signin("s2") == record("s2", "bob", 2000.0)
    assert await store.signin("nope") is None
    live = await store.live_signins(3000.0)
    assert [r.id for r in live] == ["s3", "s2", "s1"]  # newest first
    assert [r.id for r in await store.live_signins(3000.0, user="bob")] == ["s2", "s1"]
    assert [r.id for r in await store.live_signins(1000.0 + DAY)] == ["s3", "s2"]

    revoked = await store.revoke_signin("s2", 3500.0)
    assert revoked is not None and revoked.revoked_at == 3500.0
    assert await store.revoke_signin("s2", 3600.0) is None  # not live any more
    assert [r.id for r in await store.live_signins(3600.0)] == ["s3", "s1"]
    assert await store.revoke_signins("bob", 3700.0) == ["s1"]
    assert await store.revoke_signins("bob", 3800.0) == []
    assert [r.id for r in await store.live_signins(3800.0)] == ["s3"]

    await store.touch_signin("s3", 4000.0)
    touched = await store.signin("s3")
    assert touched is not None and touched.last_seen_at == 4000.0


async def test_old_sign_ins_are_forgotten_when_new_ones_are_made(
    store: SqlStore,
) -> None:
    """Adding a sign-in deletes those that expired or were revoked before the cutoff."""
    for sid, at in [
        ("expired", 0.0),
        ("old", 5000.0),
        ("lately", 5000.0),
        ("live", 5000.0),
    ]:
        await store.add_signin(record(sid, at=at), forget_before=0.0)
    await store.revoke_signin("old", 6000.0)
    await store.revoke_signin("lately", DAY + 200.0)
    await store.add_signin(record("new", at=DAY + 300.0), forget_before=DAY + 100.0)
    kept = [
        s for s in ("expired", "old", "lately", "live", "new") if await store.signin(s)
    ]
    assert kept == ["lately", "live", "new"]


async def test_usage_adds_up_each_owners_conversations_runs_and_files(
    store: SqlStore,
) -> None:
    """Usage counts each owner's conversations, runs and file bytes, zero for none."""
    for cid, owner in [("c1", "ann"), ("c2", "ann"), ("c3", "bob")]:
        await store.create_conversation(
            ConversationRecord(id=cid, owner=owner, created_at=1.0, updated_at=1.0)
        )
    runs = [_run(f"r{n}", cid) for n, cid in enumerate(["c1", "c1", "c2", "c3"])]
    for cid in ("c1", "c2", "c3"):
        await store.write(
            Batch(cid, 2.0, runs=[r for r in runs if r.conversation_id == cid])
        )
    for fid, cid, size in [("f1", "c1", 100), ("f2", "c2", 250), ("f3", "c3", 7)]:
        await store.add_file(_file(fid, cid, size), limit=10)
    await store.create_conversation(
        ConversationRecord(id="c4", owner="cy", created_at=1.0, updated_at=1.0)
    )
    assert await store.usage() == [
        UsageRecord(user="ann", conversations=2, runs=3, file_bytes=350),
        UsageRecord(user="bob", conversations=1, runs=1, file_bytes=7),
        UsageRecord(user="cy", conversations=1, runs=0, file_bytes=0),
    ]


def _run(rid: str, cid: str) -> RunRecord:
    return RunRecord(
        id=rid,
        conversation_id=cid,
        strategy="react",
        status="finished",
        request="hi",
        usage=Usage(),
        started_at=1.0,
        state=json.dumps({"run_id": rid}),
    )


def _file(fid: str, cid: str, size: int) -> FileRecord:
    return FileRecord(
        id=fid,
        conversation_id=cid,
        name=f"{fid}.txt",
        media_type="text/plain",
        size=size,
        sha256="0" * 64,
        origin="upload",
        created_at=1.0,
    )


# ---------------------------------------------------------------- SignIns


async def test_the_cookie_is_an_id_and_a_secret_of_which_only_a_hash_is_kept(
    memory_store: SqlStore,
) -> None:
    """The cookie is an id and a secret, only its hash is stored, and forgeries fail."""
    users = Users({"alice": ALICE, "bob": BOB}, admins=["alice"])
    clocks = Clocks()
    kept = signins(memory_store, users, clocks)
    cookie = await kept.create(
        Identity("bob", "user"), "token", "Browser\x00/1" + "x" * 300
    )
    signin_id, secret = cookie.split(".")
    assert len(signin_id) == 32 and len(secret) == 43
    assert await kept.check(cookie) == Identity("bob", "user")

    stored = await memory_store.signin(signin_id)
    assert stored is not None
    assert secret not in stored.model_dump_json()
    assert stored.user_agent == "Browser/1" + "x" * 191  # printable, 200 at most
    assert (stored.created_at, stored.expires_at) == (clocks.wall, clocks.wall + DAY)

    forged = [
        f"{signin_id}.{secret[:-1]}A"
        if secret[-1] != "A"
        else f"{signin_id}.{secret[:-1]}B",
        f"{'0' * 32}.{secret}",
        f"{signin_id}{secret}",
        f"{signin_id}.{secret}.",
        "",
        "x" * 300,
    ]
    for value in forged:
        assert await kept.check(value) is None


async def test_a_sign_in_ends_when_it_expires_or_its_token_changes(
    memory_store: SqlStore,
) -> None:
    """A sign-in fails once expired or its token changes, and follows role changes."""
    clocks = Clocks()
    users = Users({"alice": ALICE, "bob": BOB}, admins=["alice"])
    kept = signins(memory_store, users, clocks, ttl_s=60)
    cookie = await kept.create(Identity("bob", "user"), "token")
    clocks.wall += 59.9
    assert await kept.check(cookie) == Identity("bob", "user")
    clocks.wall += 0.1
    assert await kept.check(cookie) is None  # expired

    clocks.wall, clocks.mono = 1_000_000.0, 100.0
    cookie = await kept.create(Identity("bob", "user"), "token")
    promoted = signins(memory_store, Users({"bob": BOB}, admins=["bob"]), clocks)
    assert await promoted.check(cookie) == Identity("bob", "admin")  # read again
    new_token = signins(memory_store, Users({"bob": "bobs-brand-new-token-1"}), clocks)
    assert await new_token.check(cookie) is None  # a new token signs bob out
    removed = signins(memory_store, Users({"alice": ALICE}), clocks)
    assert await removed.check(cookie) is None


async def test_an_oidc_sign_in_keeps_its_role_and_needs_no_token(
    memory_store: SqlStore,
) -> None:
    """An OIDC sign-in keeps the role it was made with and needs no configured token."""
    clocks = Clocks()
    kept = signins(memory_store, Users({}, external=True), clocks)
    cookie = await kept.create(Identity("carol@example.com", "admin"), "oidc")
    assert await kept.check(cookie) == Identity("carol@example.com", "admin")


async def test_a_revocation_is_seen_at_once_here_and_within_the_cache_elsewhere(
    memory_store: SqlStore,
) -> None:
    """A sign-out counts at once where made, and elsewhere once the cache runs out."""
    clocks = Clocks()
    users = Users({"bob": BOB})
    here, there = (
        signins(memory_store, users, clocks),
        signins(memory_store, users, clocks),
    )
    cookie = await here.create(Identity("bob", "user"), "token")
    assert await there.check(cookie) == Identity("bob", "user")
    assert await here.sign_out(cookie)
    assert not await here.sign_out(cookie)  # once
    assert await here.check(cookie) is None
    clocks.mono += CACHE_S - 0.001
    assert await there.check(cookie) == Identity("bob", "user")
    clocks.mono += 0.001
    assert await there.check(cookie) is None


async def test_use_is_noted_at_most_once_a_minute(memory_store: SqlStore) -> None:
    """A sign-in's last-seen time is written to the store at most once a minute."""
    clocks = Clocks()
    kept = signins(memory_store, Users({"bob": BOB}), clocks)
    cookie = await kept.create(Identity("bob", "user"), "token")
    signin_id = cookie.split(".")[0]
    seen = []
    for step in (30.0, 29.0, 2.0, 10.0):
        clocks.wall += step
        clocks.mono += CACHE_S  # read from the store each time
        assert await kept.check(cookie) is not None
        stored = await memory_store.signin(signin_id)
        assert stored is not None
        seen.append(stored.last_seen_at - 1_000_000.0)
    assert seen == [0.0, 0.0, 61.0, 61.0]


class SlowReads:
    """The store, but each sign-in read waits for `go_on` after it has read."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.read = asyncio.Event()
        self.go_on = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def signin(self, signin_id: str) -> SignInRecord | None:
        record = await self.store.signin(signin_id)
        self.read.set()
        await self.go_on.wait()
        return record


async def test_a_read_overtaken_by_a_revocation_is_not_cached(
    memory_store: SqlStore,
) -> None:
    """A check that read a sign-in before its revocation does not cache it as live."""
    slow = SlowReads(memory_store)
    kept = SignIns(slow, Users({"bob": BOB}), ttl_s=DAY)  # type: ignore[arg-type]
    cookie = await kept.create(Identity("bob", "user"), "token")
    checking = asyncio.create_task(kept.check(cookie))
    await slow.read.wait()  # it has read the sign-in, still live
    assert await kept.revoke(cookie.split(".")[0]) is not None
    slow.go_on.set()
    assert await checking == Identity("bob", "user")  # it began before
    assert await kept.check(cookie) is None  # the next one reads again
