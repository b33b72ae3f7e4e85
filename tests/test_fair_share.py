"""No single client may starve the others (issue #24, findings 2 and 3).

- A client's limits outlive its sockets and cover WebSockets, event streams
  and HTTP runs alike (`transport/limits.py`).
- One user's waiting runs leave memory for the store when room is needed
  (`chat/room.py`); the other user is served, and the parked runs go on
  when their conversations are opened again.
- Lookups of unknown conversations leave nothing in memory; a socket that
  only sent refused frames stores nothing; odd input never answers 500.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.settings import Settings
from backend.transport.limits import ClientLimits, Limited
from tests.conftest import Harness, StartServer, make_settings
from tests.test_agent_api import events, frame_labels, read_until
from tests.test_auth import refused_handshake

ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789ab"
ASKS = "3*7 and convert 10 miles"
"""The offline model asks which unit before it converts."""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def start(start_server: StartServer, tmp_path: Path) -> StartServer:
    """A server on the offline model with alice and bob signed in by token."""
    path = tmp_path / "tokens"
    path.write_text(f"alice: {ALICE}\nbob: {BOB}\n", encoding="utf-8")
    path.chmod(0o600)

    async def started(**settings: Any) -> Harness:
        return await start_server(None, None, auth_tokens_file=path, **settings)

    return started


def http(harness: Harness, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=harness.server.url(""), timeout=30, headers=bearer(token)
    )


# ------------------------------------------------------------ the counts


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def limits(clock: Clock, **overrides: Any) -> ClientLimits:
    settings: Settings = make_settings(**overrides)
    return ClientLimits(settings, signed_in=True, clock=clock)


def test_reconnecting_resets_nothing() -> None:
    """Leaving and reconnecting does not refill a client's connect budget; time does."""
    clock = Clock()
    counts = limits(clock, connects_per_s=1.0, connect_burst=3)
    for _ in range(3):
        counts.connect("user:alice")
        counts.leave("user:alice")
    with pytest.raises(Limited) as refused:
        counts.connect("user:alice")
    assert (refused.value.error_type, refused.value.retry_after) == (
        "rate_limited",
        "1",
    )
    counts.connect("user:bob")  # bob's count is his own
    assert counts.prune() == 0  # alice's bucket is not full: she is remembered
    clock.now = 0.5
    with pytest.raises(Limited):
        counts.connect("user:alice")
    clock.now = 1.0
    counts.connect("user:alice")


def test_a_client_is_forgotten_only_when_it_has_nothing_to_remember() -> None:
    """A client's counts are pruned only once all of its buckets have refilled."""
    clock = Clock()
    counts = limits(
        clock, connects_per_s=1.0, connect_burst=2, runs_per_minute=6, run_burst=2
    )
    counts.connect("user:alice")
    counts.start_run("user:alice")
    counts.leave("user:alice")
    clock.now = 1.0  # the connection's token is back; the run's is not
    assert (counts.prune(), len(counts)) == (0, 1)
    clock.now = 10.0
    assert (counts.prune(), len(counts)) == (1, 0)


def test_runs_share_one_bucket_and_say_when_to_come_back() -> None:
    """Runs past the burst are refused with a retry-after; an unkeyed client is free."""
    counts = limits(Clock(), runs_per_minute=6, run_burst=2)
    counts.start_run("user:alice")
    counts.start_run("user:alice")
    with pytest.raises(Limited) as refused:
        counts.start_run("user:alice")
    assert refused.value.retry_after == "10"
    assert "at most 6 a minute" in str(refused.value)
    counts.start_run(None)  # an unlimited client (loopback, no sign-in)


def test_without_sign_in_clients_are_addresses_and_loopback_is_free() -> None:
    """Without sign-in clients are keyed by address, and loopback is not limited."""
    counts = ClientLimits(make_settings(), signed_in=False)
    local = {"client": ("127.0.0.1", 5000)}
    remote = {"client": ("203.0.113.9", 5000)}
    assert counts.key(local, "local") is None
    assert counts.key({"client": ("::1", 1)}, "local") is None
    assert counts.key(remote, "local") == "address:203.0.113.9"
    signed = ClientLimits(make_settings(), signed_in=True)
    assert signed.key(remote, "alice") == "user:alice"


# ------------------------------------------------------------ over the wire


async def test_http_runs_and_chat_frames_spend_the_same_runs(
    start: StartServer,
) -> None:
    """HTTP runs and WebSocket chats draw on the same per-user run budget."""
    harness = await start(runs_per_minute=0.5, run_burst=2)
    async with http(harness, ALICE) as alice, http(harness, BOB) as bob:
        for _ in range(2):
            ran = await alice.post("/api/agent", json={"query": "2+3", "stream": False})
            assert ran.status_code == 200
        refused = await alice.post("/api/agent", json={"query": "2+3", "stream": False})
        other = await bob.post("/api/agent", json={"query": "2+3", "stream": False})
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "120"
    assert refused.json() == {
        "error_type": "rate_limited",
        "message": "too many runs started (at most 0.5 a minute); wait before "
        "starting another",
    }
    assert other.status_code == 200
    socket, _ = await harness.ready_client(**bearer(ALICE))
    await socket.send(type="chat", content="2+3")
    frame = await socket.recv()
    assert (frame["type"], frame["error_type"]) == ("error", "rate_limited")
    async with http(harness, ALICE) as alice:
        listed = (await alice.get("/api/conversations")).json()["items"]
    assert len(listed) == 2


async def test_streams_and_sockets_count_together(start: StartServer) -> None:
    """Event streams, sockets and HTTP runs count toward one per-user connection cap."""
    harness = await start(max_connections_per_user=2)
    async with http(harness, ALICE) as alice:
        question = await asked(alice)  # its run waits: a stream on it stays open
        base = f"/api/conversations/{question['session_id']}"
        socket, _ = await harness.ready_client(**bearer(ALICE))
        async with alice.stream("GET", f"{base}/events") as held:
            assert held.status_code == 200
            again = await alice.get(f"{base}/events")
            run = await alice.post("/api/agent", json={"query": "2+3", "stream": False})
        await socket.connection.close()
    assert (again.status_code, again.json()["error_type"]) == (
        429,
        "too_many_connections",
    )
    assert run.status_code == 429
    assert harness.server.app.state.limits.open_of("user:bob") == 0


async def test_the_server_caps_connections_for_everyone(start: StartServer) -> None:
    """Past the server-wide connection cap, any user's request is refused with 429."""
    harness = await start(max_connections=2)
    await harness.ready_client(**bearer(ALICE))
    await harness.ready_client(**bearer(BOB))
    async with http(harness, BOB) as bob:
        refused = await bob.post("/api/agent", json={"query": "2+3", "stream": False})
    assert (refused.status_code, refused.json()["error_type"]) == (
        429,
        "too_many_connections",
    )
    assert "LOOPWIRE_MAX_CONNECTIONS" in refused.json()["message"]


async def test_a_reconnect_loop_is_refused_at_the_handshake(start: StartServer) -> None:
    """Too many quick reconnects are refused with 429 at the handshake, per user."""
    harness = await start(connects_per_s=0.01, connect_burst=3)
    for _ in range(3):
        socket, _ = await harness.ready_client(**bearer(ALICE))
        await socket.connection.close()
    status, body = await refused_handshake(harness, **bearer(ALICE))
    assert (status, body["error_type"]) == (429, "rate_limited")
    await harness.ready_client(**bearer(BOB))  # bob's count is his own


# ------------------------------------------------------------ room in memory


async def asked(client: httpx.AsyncClient) -> dict[str, Any]:
    """A run that waits for its user's answer, its stream closed (`detach`):
    nobody watches it; the question frame."""
    body = {"query": ASKS, "detach": True}
    async with client.stream("POST", "/api/agent", json=body) as response:
        assert response.status_code == 200
        seen = await read_until(events(response), "agent_request_input")
    return seen[-1].frame


async def followed(
    client: httpx.AsyncClient, conversation: str, after: int
) -> AsyncIterator[Any]:
    async with client.stream(
        "GET",
        f"/api/conversations/{conversation}/events",
        headers={"Last-Event-ID": str(after)},
    ) as response:
        async for event in events(response):
            yield event


async def test_one_users_waiting_runs_go_to_the_store_and_the_other_is_served(
    start: StartServer,
) -> None:
    """One user's waiting runs are parked in the store so another user is served."""
    harness = await start(max_sessions_per_user=4, max_sessions=6)
    service, store = harness.service, harness.server.app.state.store
    async with http(harness, ALICE) as alice, http(harness, BOB) as bob:
        questions = [await asked(alice) for _ in range(12)]
        in_memory = len(service.table.sessions_of("alice"))
        for _ in range(4):
            ran = await bob.post("/api/agent", json={"query": "2+3", "stream": False})
            assert ran.status_code == 200, ran.text
        held = len(service.sessions), len(service.table.sessions_of("alice"))

        first = questions[0]
        assert first["session_id"] not in service.sessions  # parked in the store
        (record,) = await store.runs(first["session_id"])
        assert record.status == "waiting"
        answered = await alice.post(
            f"/api/conversations/{first['session_id']}/input",
            json={"content": "km", "question_id": first["question_id"]},
        )
        assert answered.json() == {"status": "answered"}
        tail = [
            event async for event in followed(alice, first["session_id"], first["seq"])
        ]
    print(
        f"alice: 12 waiting runs, {in_memory} in memory; after bob's 4 runs "
        f"{held[0]} sessions in memory, {held[1]} of them alice's; parked "
        f"{service.table.room.parked}"
    )
    assert in_memory == 4
    assert held[0] <= 6 and held[1] <= 4
    assert service.table.room.parked >= 8
    answer = next(e.frame for e in tail if e.event == "chat_response")["message"]
    assert "16.09" in answer
    assert frame_labels(tail)[-3:] == ["agent_completion", "response_complete", "done"]
    statuses = [(await store.runs(q["session_id"]))[0].status for q in questions]
    assert statuses == ["finished"] + ["waiting"] * 11


async def test_a_run_left_waiting_unwatched_is_parked_by_the_sweep(
    start: StartServer,
) -> None:
    """An unwatched waiting run is parked by the sweep and resumes when answered."""
    harness = await start(park_waiting_after_s=0.05, session_grace_s=600)
    service = harness.service
    async with http(harness, ALICE) as alice:
        question = await asked(alice)
        while question["session_id"] in service.sessions:
            await service.table.next_sweep()
        (record,) = await harness.server.app.state.store.runs(question["session_id"])
        assert record.status == "waiting"
        socket, ready = await harness.ready_client(
            f"session_id={question['session_id']}&last_seq={question['seq']}",
            **bearer(ALICE),
        )
        assert ready["resumed"] is True
        await socket.send(
            type="agent_user_input", content="km", question_id=question["question_id"]
        )
        final = await socket.until_label("response_complete")
    assert "16.09" in next(f for f in final if f["type"] == "chat_response")["message"]


# ------------------------------------------------------------ leaving nothing


async def test_lookups_of_unknown_conversations_leave_nothing(
    start: StartServer,
) -> None:
    """Unknown conversations answer 404 and leave no session or open connection."""
    harness = await start()
    unknown = "0123456789abcdef0123456789abcdef"
    async with http(harness, ALICE) as alice:
        answers = [
            await alice.get(f"/api/conversations/{unknown}/events"),
            await alice.post(
                "/api/agent", json={"query": "hi", "conversation_id": unknown}
            ),
            await alice.post(
                f"/api/conversations/{unknown}/input", json={"content": "x"}
            ),
        ]
    assert [a.status_code for a in answers] == [404, 404, 404]
    assert harness.service.sessions == {}
    assert harness.server.app.state.limits.open_of("user:alice") == 0


async def test_a_socket_that_only_sent_refused_frames_stores_nothing(
    start: StartServer,
) -> None:
    """A socket whose frames were all refused leaves no conversation in the store."""
    harness = await start(user_messages_per_s=0.01, user_message_burst=2)
    socket, ready = await harness.ready_client(**bearer(ALICE))
    for text in ("not json", '{"type": "nope"}', "{}", "{}"):
        await socket.send_raw(text)
    labels = [(await socket.recv())["error_type"] for _ in range(3)]
    await socket.connection.close()
    session = harness.service.sessions[ready["session_id"]]
    # the server's side of the close ends just after it; nothing else marks it
    while session.outbox.subscriber_count:  # noqa: ASYNC110
        await asyncio.sleep(0)
    await harness.service.flush_all()  # what the write-behind task would write
    store = harness.server.app.state.store
    page = await store.conversations("alice", limit=10)
    assert labels == ["invalid_message", "invalid_message", "rate_limited"]
    assert page.items == []


async def test_odd_input_is_a_400_never_a_500(start: StartServer) -> None:
    """Malformed event ids, limits and cursors are answered 400, never 500."""
    harness = await start()
    nested = "[" * 5000 + "]" * 5000
    deep = base64.urlsafe_b64encode(nested.encode()).decode().rstrip("=")
    async with http(harness, ALICE) as alice:
        ran = await alice.post("/api/agent", json={"query": "2+3", "stream": False})
        base = f"/api/conversations/{ran.json()['conversation_id']}"
        answers = [
            await alice.get(f"{base}/events", headers={"Last-Event-ID": b"\xb2"}),
            await alice.get("/api/conversations?limit=%C2%B2"),
            await alice.get("/api/conversations", params={"cursor": deep[:150]}),
            await alice.get("/api/conversations", params={"cursor": deep}),
            await alice.get(
                "/api/conversations",
                params={"cursor": base64.b64encode(b'[{"a": 1}, 2]').decode()},
            ),
        ]
    assert [(a.status_code, a.json()["error_type"]) for a in answers] == [
        (400, "invalid_message")
    ] * 5
    assert json.loads(answers[1].text)["message"] == (
        "limit must be a whole number from 1 to 100"
    )


# ------------------------------------------------------------ forwarded headers


async def wrong_tries(harness: Harness, count: int) -> list[int]:
    """Wrong bearer tokens, each naming another client in X-Forwarded-For."""
    harness.server.app.state.guesses.clock = lambda: 0.0  # no refill meanwhile
    statuses = []
    async with httpx.AsyncClient(base_url=harness.server.url("")) as client:
        for n in range(count):
            answer = await client.get(
                "/api/info",
                headers={
                    "Authorization": f"Bearer wrong-token-{n:09d}",
                    "X-Forwarded-For": f"198.51.100.{n % 250 + 1}",
                },
            )
            statuses.append(answer.status_code)
    return statuses


async def test_a_forwarded_address_is_believed_only_from_a_trusted_proxy(
    start: StartServer,
) -> None:
    """`X-Forwarded-For` keys a client only when it comes from a trusted proxy."""
    spoofed = await start(auth_failures_per_minute=5)
    assert await wrong_tries(spoofed, 8) == [401] * 5 + [429] * 3
    proxied = await start(auth_failures_per_minute=5, trusted_proxies="127.0.0.1")
    assert await wrong_tries(proxied, 8) == [401] * 8  # each from its own client
