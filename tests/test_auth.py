"""Authentication, ownership and per-user limits (`backend/users.py`,
`backend/transport/auth.py`, `login.py`, `limits.py`), over real sockets."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus

from backend.errors import ConfigError
from backend.server import RedactQuery, exposure_problem
from backend.users import Users, read_tokens_file
from tests.conftest import Harness, StartServer, make_settings
from tests.fakes import (
    Saver,
    ScriptedLLM,
    approval_registry,
    calls,
    observe,
    reason,
    test_registry,
)

ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210xyz"
SIGN_IN = "sign in first: the login page's cookie, or Authorization: Bearer <token>"


def tokens_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def two_users(tmp_path: Path) -> Path:
    return tokens_file(tmp_path, f"# users\nalice: {ALICE}\n\nbob: {BOB}\n")


@pytest.fixture
def start_with_users(start_server: StartServer, tmp_path: Path) -> StartServer:
    """`start_server` with alice and bob in a tokens file."""

    async def start(llm: Any = None, registry: Any = None, **settings: Any) -> Harness:
        return await start_server(
            llm if llm is not None else ScriptedLLM(),
            registry if registry is not None else test_registry(),
            auth_tokens_file=two_users(tmp_path),
            **settings,
        )

    return start


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def refused_handshake(harness: Harness, query: str = "", **headers: str) -> Any:
    with pytest.raises(InvalidStatus) as refused:
        await harness.connect(query, **headers)
    response = refused.value.response
    return response.status_code, json.loads(response.body or b"")


# ------------------------------------------------------------------ Users


def test_tokens_file_maps_users_to_tokens(tmp_path: Path) -> None:
    """An exact token, bare or in a Bearer header, names its user; near-misses fail."""
    users = Users.configured(None, two_users(tmp_path))
    assert users.enabled and users.names == ("alice", "bob")
    assert users.by_token(ALICE) == "alice"
    assert users.by_authorization(f"Bearer {BOB}") == "bob"
    assert users.by_authorization(f"bearer  {BOB} ") == "bob"
    for wrong in ("", ALICE[:-1], ALICE + "x", BOB.upper()):
        assert users.by_token(wrong) is None
    assert users.by_authorization(f"Basic {ALICE}") is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("alice\n", "line 1: expected `user: token`"),
        ("al ice: 0123456789abcdef\n", "line 1: expected `user: token`"),
        ("alice: short\n", "line 1: the token must be 16 to 512 visible"),
        ("alice: has a space in it here\n", "line 1: the token must be 16"),
        (f"alice: {ALICE}\nalice: {BOB}\n", "line 2: user 'alice' is listed twice"),
        (f"alice: {ALICE}\nbob: {ALICE}\n", "line 2: this token is already"),
        ("# nobody\n\n", "lists no users"),
    ],
)
def test_a_bad_tokens_file_says_which_line(
    tmp_path: Path, text: str, problem: str
) -> None:
    """A malformed tokens file is a config error naming the offending line."""
    with pytest.raises(ConfigError) as bad:
        read_tokens_file(tokens_file(tmp_path, text))
    assert problem in str(bad.value)


def test_a_missing_tokens_file_is_a_config_error(tmp_path: Path) -> None:
    """A tokens file that does not exist is a `ConfigError` saying it cannot be read."""
    with pytest.raises(ConfigError, match="cannot read the tokens file"):
        read_tokens_file(tmp_path / "absent")


def test_the_single_token_is_the_local_user(tmp_path: Path) -> None:
    """A lone auth token is user `local`; a blank one or a file `local` is refused."""
    users = Users.configured(ALICE, None)
    assert users.by_token(ALICE) == "local"
    with pytest.raises(ConfigError, match="set but empty"):
        Users.configured("  ", None)
    clash = tokens_file(tmp_path, f"local: {BOB}\n")
    with pytest.raises(ConfigError, match="has LOOPWIRE_AUTH_TOKEN too"):
        Users.configured(ALICE, clash)


def test_an_empty_token_setting_is_refused() -> None:
    """Settings refuse an auth token set to the empty string."""
    with pytest.raises(ValueError, match="LOOPWIRE_AUTH_TOKEN is set but empty"):
        make_settings(auth_token="")


def test_tokens_file_lines_may_name_a_role(tmp_path: Path) -> None:
    """Lines may set role `admin` or `user` (default); `local` is admin; others fail."""
    path = tokens_file(tmp_path, f"alice: {ALICE} admin\nbob: {BOB} user\n")
    users = Users.configured("local-token-0123456789", path)
    assert [users.role(u) for u in ("alice", "bob", "local", "eve")] == [
        "admin",
        "user",
        "admin",
        None,
    ]
    assert Users.configured(None, two_users(tmp_path)).role("alice") == "user"
    for bad, problem in [
        (
            f"alice: {ALICE} root\n",
            "line 1: the role must be admin or user, not 'root'",
        ),
        (f"alice: {ALICE} admin extra\n", "line 1: the token must be 16"),
    ]:
        with pytest.raises(ConfigError) as refused:
            read_tokens_file(tokens_file(tmp_path, bad))
        assert problem in str(refused.value)


# ------------------------------------------------------- refused, 0 calls


async def test_no_token_no_entry_and_no_model_call(
    start_with_users: StartServer,
) -> None:
    """Bad credentials get 401 on socket and API, pages redirect, and no model runs."""
    llm = ScriptedLLM()
    harness = await start_with_users(llm)
    refused = {"error_type": "unauthorized", "message": SIGN_IN}
    offers: list[dict[str, str]] = [
        {},
        bearer("wrong-token-000000000"),
        {"Authorization": "Bearer"},
        {"Authorization": ALICE},
        {"Authorization": f"Basic {ALICE}"},
        {"Cookie": "loopwire_session=alice.99999999999.forged"},
    ]
    for headers in offers:
        assert await refused_handshake(harness, **headers) == (401, refused)
    # a token in the URL is not a way in (URLs end up in logs and histories)
    assert await refused_handshake(harness, f"token={ALICE}") == (401, refused)

    approvals = "/api/sessions/" + "a" * 32 + "/approvals/call-1"
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        for headers in offers:
            for method, path in [
                ("GET", "/api/info"),
                ("GET", "/api/conversations"),
                ("DELETE", "/api/conversations/" + "a" * 32),
                ("POST", approvals),
            ]:
                response = await http.request(
                    method, path, headers=headers, json={"approved": True}
                )
                assert (response.status_code, response.json()) == (401, refused)
                assert response.headers["www-authenticate"] == 'Bearer realm="loopwire"'
        page = await http.get("/")
        conversation_page = await http.get("/c/" + "a" * 32)
        health = await http.get("/healthz")
    assert (page.status_code, page.headers["location"]) == (303, "/login")
    assert (conversation_page.status_code, conversation_page.headers["location"]) == (
        303,
        "/login",
    )
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert llm.requests == []


async def test_a_bearer_token_opens_every_route(
    start_with_users: StartServer,
) -> None:
    """A valid bearer token opens the socket, chat and the HTTP API for its user."""
    llm = ScriptedLLM("hello")
    harness = await start_with_users(llm)
    client, ready = await harness.ready_client(**bearer(ALICE))
    assert ready["resumed"] is False
    frames = await client.chat("hi")
    assert frames[-2]["type"] == "chat_response"
    await harness.service.flush_all()
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        info = await http.get("/api/info", headers=bearer(ALICE))
        listing = await http.get("/api/conversations", headers=bearer(ALICE))
    assert info.status_code == 200 and info.json()["mcp"] == {}
    assert [c["id"] for c in listing.json()["items"]] == [ready["session_id"]]


# ------------------------------------------------------------- the browser


async def test_the_login_form_sets_a_strict_http_only_cookie(
    start_with_users: StartServer,
) -> None:
    """Sign-in sets a strict HttpOnly cookie, and sign-out revokes it on the server."""
    harness = await start_with_users()
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        form = await http.get("/login")
        assert form.status_code == 200 and 'name="token"' in form.text
        assert "frame-ancestors 'none'" in form.headers["content-security-policy"]
        wrong = await http.post("/login", data={"token": "not-a-token-at-all"})
        assert wrong.status_code == 401
        assert "That token is not valid here." in wrong.text
        assert "set-cookie" not in wrong.headers

        signed_in = await http.post("/login", data={"token": ALICE})
        assert (signed_in.status_code, signed_in.headers["location"]) == (303, "/")
        cookie = signed_in.headers["set-cookie"]
        assert re.match(r"loopwire_session=[0-9a-f]{32}\.[\w-]{43};", cookie)
        attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/"} <= attributes
        assert f"max-age={7 * 24 * 3600}" in attributes
        assert "secure" not in attributes  # plain http on loopback

        page = await http.get("/")
        assert page.status_code == 200 and "Sign out" in page.text
        linked = await http.get("/c/" + "a" * 32)  # the page; the id is the script's
        assert linked.status_code == 200 and linked.text == page.text
        assert (await http.get("/login")).headers["location"] == "/"
        value = http.cookies["loopwire_session"]

        signed_out = await http.post("/logout")
        assert signed_out.headers["location"] == "/login"
        assert 'loopwire_session=""' in signed_out.headers["set-cookie"]
    # signing out revoked the sign-in: the same cookie is refused from now on
    refused = {"error_type": "unauthorized", "message": SIGN_IN}
    cookie_header = f"loopwire_session={value}"
    assert await refused_handshake(harness, Cookie=cookie_header) == (401, refused)


async def test_the_login_form_refuses_odd_bodies_and_slows_guessing(
    start_with_users: StartServer,
) -> None:
    """Login refuses JSON, huge or repeated tokens, and throttles after ten misses."""
    harness = await start_with_users()
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        as_json = await http.post("/login", json={"token": ALICE})
        huge = await http.post("/login", data={"token": "x" * 5000})
        twice = await http.post(
            "/login",
            content=f"token={ALICE}&token={ALICE}",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert [r.status_code for r in (as_json, huge, twice)] == [400, 400, 400]
        assert "Send the token from the form." in huge.text
        for _ in range(10):
            assert (
                await http.post("/login", data={"token": "guess" * 4})
            ).status_code == 401
        slowed = await http.post("/login", data={"token": ALICE})
    assert slowed.status_code == 429 and "Too many wrong tokens" in slowed.text
    assert "set-cookie" not in slowed.headers


async def test_a_cross_site_login_post_is_refused(
    start_with_users: StartServer,
) -> None:
    """A login post from a foreign `Origin` gets 403 and no cookie."""
    harness = await start_with_users()
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        response = await http.post(
            "/login", data={"token": ALICE}, headers={"Origin": "https://evil.example"}
        )
    assert response.status_code == 403 and "set-cookie" not in response.headers


# ---------------------------------------------------------------- ownership


async def test_another_users_conversation_is_not_found(
    start_with_users: StartServer,
) -> None:
    """Another user's conversation looks absent on socket and HTTP and stays intact."""
    llm = ScriptedLLM("alice's secret answer")
    harness = await start_with_users(llm)
    alice, ready = await harness.ready_client(**bearer(ALICE))
    await alice.chat("my secret")
    mine = ready["session_id"]

    # over the WebSocket: resuming alice's id gives bob a new, empty session
    _, theirs = await harness.ready_client(
        f"session_id={mine}&last_seq=0", **bearer(BOB)
    )
    assert theirs["resumed"] is False and theirs["session_id"] != mine
    assert theirs["last_seq"] == 0

    base = "/api/conversations/" + mine
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        as_bob = bearer(BOB)
        read = await http.get(base, headers=as_bob)
        renamed = await http.patch(base, headers=as_bob, json={"title": "mine now"})
        deleted = await http.delete(base, headers=as_bob)
        listing = await http.get("/api/conversations", headers=as_bob)
        still = await http.get(base, headers=bearer(ALICE))
    not_found = {"error_type": "not_found", "message": f"no conversation {mine!r}"}
    for response in (read, renamed, deleted):
        assert (response.status_code, response.json()) == (404, not_found)
    assert listing.json() == {"items": [], "next": None}
    assert still.status_code == 200 and still.json()["title"] != "mine now"
    assert [m["content"] for m in still.json()["messages"]] == [
        "my secret",
        "alice's secret answer",
    ]


async def test_another_user_cannot_approve_over_http(
    start_with_users: StartServer,
) -> None:
    """Only the session's owner may answer its tool approval; another user gets 404."""
    saver = Saver()
    llm = ScriptedLLM(
        reason("save it"),
        calls(("save", {"text": "x"})),
        observe(should_continue=False, final="Not saved."),
    )
    harness = await start_with_users(llm, approval_registry(saver))
    alice, ready = await harness.ready_client(**bearer(ALICE))
    await alice.send(type="chat", content="save x", agent_mode=True)
    request = (await alice.until_label("tool_approval_request:save"))[-1]
    url = f"/api/sessions/{ready['session_id']}/approvals/{request['tool_call_id']}"
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        as_bob = await http.post(url, headers=bearer(BOB), json={"approved": True})
        assert (as_bob.status_code, as_bob.json()["error_type"]) == (404, "not_found")
        assert saver.saved == []
        as_alice = await http.post(url, headers=bearer(ALICE), json={"approved": False})
    assert as_alice.json() == {
        "tool_call_id": request["tool_call_id"],
        "status": "rejected",
    }
    assert saver.saved == []


# ------------------------------------------------------------------ limits


async def test_each_user_has_a_connection_cap(
    start_with_users: StartServer,
) -> None:
    """Each user's open sockets are capped separately, and closing one frees a slot."""
    harness = await start_with_users(
        ScriptedLLM(),
        test_registry(),
        max_connections_per_user=2,
    )
    first, _ = await harness.ready_client(**bearer(ALICE))
    await harness.ready_client(**bearer(ALICE))
    assert await refused_handshake(harness, **bearer(ALICE)) == (
        429,
        {
            "error_type": "too_many_connections",
            "message": "you have 2 connections open, the most allowed; close one first",
        },
    )
    await harness.ready_client(**bearer(BOB))  # bob's count is his own
    limits = harness.server.app.state.limits
    assert (limits.open_of("user:alice"), limits.open_of("user:bob")) == (2, 1)
    await first.connection.close()
    # the server's side of the close ends just after the handshake; nothing
    # else marks it, so yield until its bookkeeping shows it
    while limits.open_of("user:alice") != 1:  # noqa: ASYNC110
        await asyncio.sleep(0)
    await harness.ready_client(**bearer(ALICE))
    assert limits.open_of("user:alice") == 2


async def test_a_users_sockets_share_one_message_bucket(
    start_with_users: StartServer,
) -> None:
    """All of a user's sockets draw on one rate bucket; another user's is separate."""
    harness = await start_with_users(
        ScriptedLLM(),
        test_registry(),
        user_messages_per_s=0.001,
        user_message_burst=4,
    )
    one, _ = await harness.ready_client(**bearer(ALICE))
    two, _ = await harness.ready_client(**bearer(ALICE))
    bob, _ = await harness.ready_client(**bearer(BOB))
    answers = []
    for client in (one, two, one, two, one):
        await client.send(type="no_such_type")
        answers.append((await client.recv())["error_type"])
    assert answers == ["invalid_message"] * 4 + ["rate_limited"]
    await bob.send(type="no_such_type")
    assert (await bob.recv())["error_type"] == "invalid_message"


# ------------------------------------------------------------------ models


async def test_a_client_may_pick_only_an_allowed_model(
    start_server: StartServer,
) -> None:
    """An unlisted model is refused before any model call; a listed one is used."""
    llm = ScriptedLLM("fine", model="small")
    harness = await start_server(
        llm, test_registry(), llm_model="small", llm_models="small, large"
    )
    client, ready = await harness.ready_client()
    assert ready["models"] == ["small", "large"]
    await client.send(type="chat", content="hi", model="o1-pro-most-expensive")
    refused = await client.recv()
    assert (refused["error_type"], refused["message"]) == (
        "invalid_message",
        "model 'o1-pro-most-expensive' is not offered here; choose one of: small, large",
    )
    assert llm.requests == []
    frames = await client.chat("hi", model="large")
    assert frames[-2]["type"] == "chat_response"
    assert [r.model for r in llm.requests] == ["large"]


# ------------------------------------------------------------ start-up, logs


def test_exposure_needs_authentication_or_an_explicit_choice(tmp_path: Path) -> None:
    """Serving past loopback needs users or `allow_insecure`; loopback needs neither."""
    open_settings = make_settings()
    nobody = Users({})
    for host in ("127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"):
        assert exposure_problem(host, open_settings, nobody) is None
    problem = exposure_problem("0.0.0.0", open_settings, nobody)
    assert problem is not None and problem.startswith(
        "refusing to serve 0.0.0.0 without authentication"
    )
    assert (
        exposure_problem("0.0.0.0", make_settings(allow_insecure=True), nobody) is None
    )
    users = Users.configured(None, two_users(tmp_path))
    assert exposure_problem("0.0.0.0", open_settings, users) is None


@pytest.mark.parametrize(
    ("env", "args", "says"),
    [
        ({"LOOPWIRE_AUTH_TOKEN": ""}, [], "LOOPWIRE_AUTH_TOKEN is set but empty"),
        ({}, ["--host", "0.0.0.0"], "refusing to serve 0.0.0.0 without authentication"),
        (
            {"LOOPWIRE_AUTH_TOKENS_FILE": "/nonexistent/tokens"},
            [],
            "cannot read the tokens file",
        ),
    ],
)
def test_serve_refuses_to_start_unsafely(
    tmp_path: Path, env: dict[str, str], args: list[str], says: str
) -> None:
    """`serve` exits 2 with the reason on an empty token, an open host or a bad file."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWIRE_")}
    result = subprocess.run(
        [sys.executable, "-m", "backend", "serve", "--port", "0", *args],
        env={**clean, **env, "LOOPWIRE_DATABASE_URL": f"sqlite:///{tmp_path}/db"},
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert says in result.stderr


def test_query_strings_are_redacted_from_request_logs() -> None:
    """Access logs drop a URL's query string and leave lines without one as they are."""
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/ws?session_id=abc&token=s3cret", "1.1", 101),
        None,
    )
    assert RedactQuery().filter(record)
    assert record.getMessage() == '127.0.0.1:5000 - "GET /ws?[redacted] HTTP/1.1" 101'
    plain = logging.LogRecord(
        "uvicorn.error",
        logging.INFO,
        __file__,
        1,
        '%s - "WebSocket %s" %d',
        ("127.0.0.1:5000", "/ws", 401),
        None,
    )
    assert RedactQuery().filter(plain)
    assert plain.getMessage() == '127.0.0.1:5000 - "WebSocket /ws" 401'
