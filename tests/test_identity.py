"""Sign-ins kept on the server and revocable, roles, the admin routes, and
the throttle on wrong credentials (`backend/identity/`, `transport/auth.py`,
`login.py`, `admin.py`), over real sockets."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus

from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, test_registry

ALICE = "alice-token-0123456789"  # an admin
BOB = "bob-token-9876543210xyz"  # a user
SIGN_IN = "sign in first: the login page's cookie, or Authorization: Bearer <token>"
REFUSED = {"error_type": "unauthorized", "message": SIGN_IN}
FORBIDDEN = {"error_type": "forbidden", "message": "this needs the admin role"}
ADMIN_ROUTES = [
    ("GET", "/api/admin/signins", 200),
    ("DELETE", "/api/admin/signins/" + "0" * 32, 404),
    ("POST", "/api/admin/users/nobody/revoke", 200),
    ("GET", "/api/admin/usage", 200),
]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def session(cookie: str) -> dict[str, str]:
    return {"Cookie": f"loopwire_session={cookie}"}


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"alice: {ALICE} admin\nbob: {BOB}\n", encoding="utf-8")
    path.chmod(0o600)
    return path


async def start(
    start_server: StartServer, tokens: Path, *replies: str, **settings: Any
) -> Harness:
    return await start_server(
        ScriptedLLM(*replies), test_registry(), auth_tokens_file=tokens, **settings
    )


async def sign_in(harness: Harness, token: str) -> str:
    """The login form, as a browser: the session cookie's value."""
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        signed_in = await http.post(
            "/login", data={"token": token}, headers={"User-Agent": "Test/1.0"}
        )
    assert signed_in.status_code == 303
    return signed_in.cookies["loopwire_session"]


async def status(harness: Harness, path: str = "/api/info", **headers: str) -> int:
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        return (await http.get(path, headers=headers)).status_code


async def handshake(harness: Harness, **headers: str) -> tuple[int, Any]:
    try:
        client, ready = await harness.ready_client(**headers)
    except InvalidStatus as refused:
        response = refused.response
        return response.status_code, json.loads(response.body or b"")
    await client.connection.close()
    return 101, ready["type"]


# ------------------------------------------------------------ sign-ins


async def test_a_sign_in_is_kept_and_signing_out_revokes_it_at_once(
    start_server: StartServer, tokens: Path
) -> None:
    """A sign-in is kept without its secret; signing out refuses the cookie at once."""
    harness = await start(start_server, tokens)
    cookie = await sign_in(harness, BOB)
    assert await status(harness, **session(cookie)) == 200
    assert await handshake(harness, **session(cookie)) == (101, "session_ready")

    (record,) = await harness.server.app.state.store.live_signins(time.time())
    assert (record.user, record.role, record.method, record.user_agent) == (
        "bob",
        "user",
        "token",
        "Test/1.0",
    )
    signin_id, secret = cookie.split(".")
    assert record.id == signin_id
    assert secret not in record.model_dump_json()  # only its keyed hash is kept

    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        http.cookies.set("loopwire_session", cookie)
        signed_out = await http.post("/logout")
        assert (signed_out.status_code, signed_out.headers["location"]) == (
            303,
            "/login",
        )
    assert await harness.server.app.state.store.live_signins(time.time()) == []
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        api = await http.get("/api/info", headers=session(cookie))
        page = await http.get("/", headers=session(cookie))
    assert (api.status_code, api.json()) == (401, REFUSED)
    assert (page.status_code, page.headers["location"]) == (303, "/login")
    # the refused cookie is cleared, so the browser stops presenting it
    assert page.headers["set-cookie"].startswith('loopwire_session=""; Max-Age=0;')
    assert await handshake(harness, **session(cookie)) == (401, REFUSED)


async def test_another_instance_refuses_a_revoked_sign_in_within_the_cache_bound(
    start_server: StartServer, tokens: Path, database_url: str
) -> None:
    """Another instance refuses a revoked sign-in once its 5 s cache runs out."""
    one = await start(start_server, tokens, database_url=database_url)
    two = await start(start_server, tokens, database_url=database_url)
    clock = Clock()
    two.server.app.state.signins.clock = clock
    cookie = await sign_in(one, BOB)
    assert await status(two, **session(cookie)) == 200  # read, and cached

    async with httpx.AsyncClient(base_url=one.server.url("")) as http:
        assert (await http.post("/logout", headers=session(cookie))).status_code == 303
    assert await status(one, **session(cookie)) == 401  # at once where revoked
    clock.now += 4.999
    assert await status(two, **session(cookie)) == 200  # the cache still holds it
    clock.now += 0.001  # CACHE_S (5 s) after it was read
    assert await status(two, **session(cookie)) == 401
    assert await handshake(two, **session(cookie)) == (401, REFUSED)


async def test_a_revoked_sign_in_closes_its_open_sockets(
    start_server: StartServer, tokens: Path
) -> None:
    """Signing out, or an admin's revocation, closes the sockets that sign-in
    opened (1008, said why); another sign-in's socket stays open."""
    harness = await start(start_server, tokens, "hello")
    first, second, other = [await sign_in(harness, BOB) for _ in range(3)]
    mine, _ = await harness.ready_client(**session(first))
    also_mine, _ = await harness.ready_client(**session(second))
    kept, _ = await harness.ready_client(**session(other))
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        http.cookies.set("loopwire_session", first)
        assert (await http.post("/logout")).status_code == 303
    await mine.connection.wait_closed()
    assert (mine.connection.close_code, mine.connection.close_reason) == (
        1008,
        "signed out: this sign-in was revoked or has expired",
    )
    async with httpx.AsyncClient(
        base_url=harness.server.url(""), headers=bearer(ALICE)
    ) as admin:
        revoked = await admin.delete(f"/api/admin/signins/{second.split('.')[0]}")
    assert revoked.status_code == 204
    await also_mine.connection.wait_closed()
    assert also_mine.connection.close_code == 1008
    await kept.send(type="chat", content="still here?")
    assert (await kept.recv())["type"] != "error"


async def test_an_admin_revokes_one_sign_in_or_all_of_a_users(
    start_server: StartServer, tokens: Path
) -> None:
    """An admin lists sign-ins and revokes one of them, or all of one user's."""
    harness = await start(start_server, tokens)
    first, second = await sign_in(harness, BOB), await sign_in(harness, BOB)
    mine = await sign_in(harness, ALICE)
    first_id, second_id = first.split(".")[0], second.split(".")[0]
    admin = bearer(ALICE)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        listed = (await http.get("/api/admin/signins", headers=admin)).json()
        assert [(s["id"], s["user"]) for s in listed["items"]] == [
            (mine.split(".")[0], "alice"),
            (second_id, "bob"),
            (first_id, "bob"),
        ]
        assert set(listed["items"][0]) == {
            "id",
            "user",
            "role",
            "method",
            "created_at",
            "expires_at",
            "last_seen_at",
            "user_agent",
        }
        bobs = await http.get(
            "/api/admin/signins", params={"user": "bob"}, headers=admin
        )
        assert [s["id"] for s in bobs.json()["items"]] == [second_id, first_id]

        one = await http.delete(f"/api/admin/signins/{first_id}", headers=admin)
        assert (one.status_code, one.content) == (204, b"")
        assert await status(harness, **session(first)) == 401
        assert await status(harness, **session(second)) == 200
        again = await http.delete(f"/api/admin/signins/{first_id}", headers=admin)
        assert (again.status_code, again.json()) == (
            404,
            {"error_type": "not_found", "message": f"no live sign-in {first_id!r}"},
        )

        everything = await http.post("/api/admin/users/bob/revoke", headers=admin)
        assert everything.json() == {"user": "bob", "revoked": [second_id]}
        assert await status(harness, **session(second)) == 401
        assert await handshake(harness, **session(second)) == (401, REFUSED)
        assert await status(harness, **session(mine)) == 200
        left = await http.get("/api/admin/signins", headers=session(mine))
    assert [s["user"] for s in left.json()["items"]] == ["alice"]


# ------------------------------------------------------------ roles


@pytest.mark.parametrize(("method", "path", "as_admin"), ADMIN_ROUTES)
async def test_every_admin_route_needs_the_admin_role(
    start_server: StartServer, tokens: Path, method: str, path: str, as_admin: int
) -> None:
    """Each admin route refuses a user with 403 and no sign-in with 401."""
    harness = await start(start_server, tokens)
    bobs_cookie = await sign_in(harness, BOB)
    alices_cookie = await sign_in(harness, ALICE)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        for headers in (bearer(BOB), session(bobs_cookie)):
            refused = await http.request(method, path, headers=headers)
            assert (refused.status_code, refused.json()) == (403, FORBIDDEN)
        nobody = await http.request(method, path)
        assert (nobody.status_code, nobody.json()) == (401, REFUSED)
        for headers in (bearer(ALICE), session(alices_cookie)):
            allowed = await http.request(method, path, headers=headers)
            assert allowed.status_code == as_admin


async def test_the_single_token_and_no_authentication_make_an_admin(
    start_server: StartServer,
) -> None:
    """The single-token holder, and anyone on an open server, may use admin routes."""
    single = await start_server(ScriptedLLM(), auth_token=ALICE)
    open_server = await start_server(ScriptedLLM())
    assert await status(single, "/api/admin/usage", **bearer(ALICE)) == 200
    assert await status(open_server, "/api/admin/signins") == 200


async def test_usage_counts_each_users_conversations_runs_and_files(
    start_server: StartServer, tokens: Path
) -> None:
    """The usage report counts each user's conversations, runs and file bytes."""
    harness = await start_server(
        ScriptedLLM("one", "two", "three"), test_registry(), auth_tokens_file=tokens
    )
    alice, _ = await harness.ready_client(**bearer(ALICE))
    await alice.chat("hi")
    await alice.chat("again")
    bob, _ = await harness.ready_client(**bearer(BOB))
    await bob.chat("hello")
    await harness.service.flush_all()
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        usage = await http.get("/api/admin/usage", headers=bearer(ALICE))
    assert usage.json() == {
        "items": [
            {"user": "alice", "conversations": 1, "runs": 2, "file_bytes": 0},
            {"user": "bob", "conversations": 1, "runs": 1, "file_bytes": 0},
        ]
    }


# ------------------------------------------------------------ the throttle


async def test_wrong_credentials_are_throttled_per_address(
    start_server: StartServer, tokens: Path
) -> None:
    """After 30 wrong credentials one address gets 429 even for a right one."""
    harness = await start(start_server, tokens)
    harness.server.app.state.guesses.clock = lambda: 0.0  # no refill meanwhile
    statuses: list[int] = []
    retry: set[str] = set()
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        for n in range(300):
            wrong = await http.get("/api/info", headers=bearer(f"wrong-token-{n:09d}"))
            statuses.append(wrong.status_code)
            if wrong.status_code == 429:
                retry.add(wrong.headers["retry-after"])
                too_many = wrong.json()
        # the right token, from the same address: refused before any comparison
        right = await http.get("/api/info", headers=bearer(ALICE))
        forged = await http.get("/api/info", headers=session("0" * 32 + "." + "x" * 43))
        bare = await http.get("/api/info")  # no credentials: not a guess
    assert statuses == [401] * 30 + [429] * 270
    assert retry == {"2"}
    assert too_many == {
        "error_type": "rate_limited",
        "message": "too many wrong credentials from this address; try again in 2 s",
    }
    assert [right.status_code, forged.status_code, bare.status_code] == [429, 429, 401]
    assert await handshake(harness, **bearer(ALICE)) == (429, too_many)

    other = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(
        base_url=harness.server.url(""), transport=other
    ) as elsewhere:
        fine = await elsewhere.get("/api/info", headers=bearer(ALICE))
        wrong = await elsewhere.get("/api/info", headers=bearer("wrong-token-0000000"))
    assert (fine.status_code, wrong.status_code) == (200, 401)
