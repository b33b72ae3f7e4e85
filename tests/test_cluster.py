"""Three loopwire instances on one PostgreSQL and one Redis, behind nginx.

Everything goes through the round-robin balancer with no stickiness: a
session started on one instance is watched, stopped, answered and approved
through the others, and survives its instance being killed. The servers are
real processes (`python -m backend serve`); the model is the embedded
offline one, or the fake OpenAI-compatible server where a run must hang in
a model call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from backend.store.sql import SqlStore
from tests.cluster_harness import (
    HEADER,
    LEASE_S,
    ClusterHarness,
    running_cluster,
)
from tests.fake_openai import FakeOpenAIServer, HangReply
from tests.ws_client import Client, Frame, label, labels

pytestmark = pytest.mark.timeout(180)


def calls_of(frames: list[Frame], tool: str) -> int:
    return sum(1 for f in frames if label(f) == f"tool_start:{tool}")


def seqs(frames: list[Frame]) -> list[int]:
    return [f["seq"] for f in frames]


async def elsewhere(
    cluster: ClusterHarness, stack: AsyncExitStack, session: str, than: str, **q: int
) -> tuple[Client, str, Frame]:
    """A client on the session through the balancer, landing on another
    instance than `than`; with its `session_ready`."""
    await cluster.after(than)
    query = f"session_id={session}&last_seq={q.get('last_seq', 0)}"
    client, instance = await cluster.connect(stack, query)
    assert instance != than
    ready = await client.recv()
    assert (ready["type"], ready["resumed"]) == ("session_ready", True)
    return client, instance, ready


async def watching(
    cluster: ClusterHarness,
    stack: AsyncExitStack,
    a: Client,
    session: str,
    owner: str,
) -> Client:
    """A second client of `a`'s session on another instance, caught up: it
    replayed exactly what `a` has seen (its `session_ready` aside)."""
    b, _, _ = await elsewhere(cluster, stack, session, owner)
    assert [await b.recv() for _ in a.seen[1:]] == a.seen[1:]
    return b


async def paused(
    cluster: ClusterHarness, stack: AsyncExitStack, content: str, until: str
) -> tuple[Client, str, str, Frame]:
    """A client through the balancer whose agent run, asked `content`,
    reached the frame labelled `until`: the client, its instance, the
    session and that frame."""
    a, owner = await cluster.connect(stack)
    session = (await a.recv())["session_id"]
    await a.send(type="chat", content=content, agent_mode=True)
    reached = (await a.until_label(until))[-1]
    return a, owner, session, reached


QUESTION = ("3*7 and convert 10 miles", "agent_request_input")
APPROVAL = ("save a note: buy milk", "tool_approval_request:save_note")


async def hung_run(
    cluster: ClusterHarness, stack: AsyncExitStack, fake_openai: FakeOpenAIServer
) -> tuple[Client, str, str]:
    """A client whose agent run waits in a model call that never answers:
    the client, its instance and the session."""
    a, owner = await cluster.connect(stack)
    session = (await a.recv())["session_id"]
    await a.send(type="chat", content="think hard", agent_mode=True)
    await a.until_label("agent_turn_start")
    await fake_openai.wait_for_requests(1)
    return a, owner, session


def hanging(fake_openai: FakeOpenAIServer) -> dict[str, object]:
    """Cluster settings: the model is `fake_openai`, its next reply hangs."""
    fake_openai.script(HangReply(partial_content="Thinking"))
    return {
        "llm_base_url": fake_openai.base_url,
        "llm_api_key": "test",
        "lease_ttl_s": LEASE_S,
    }


@dataclass
class Dropped:
    """A stream dropped on an instance that does not own its conversation."""

    conversation: str
    first: str
    """The stream's first line."""
    headers: httpx.Headers


async def dropped_elsewhere(
    pg_database_url: str,
    redis_url: str,
    fake_openai: FakeOpenAIServer,
    path: str,
    request: Callable[[str], dict[str, Any]],
) -> Dropped:
    """Behind nginx, `POST path` with `request(conversation)`'s arguments,
    sent through an instance that does not own the conversation, read to
    its first line while the model call hangs, then dropped; asserts that
    the owner stopped the run (its model call abandoned)."""
    settings = hanging(fake_openai)
    async with (
        running_cluster(pg_database_url, redis_url, **settings) as cluster,
        AsyncExitStack() as stack,
    ):
        a, owner = await cluster.connect(stack)
        conversation = (await a.recv())["session_id"]
        await cluster.after(owner)
        assert cluster.http is not None
        async with cluster.http.stream(
            "POST", path, **request(conversation)
        ) as response:
            assert response.headers[HEADER] != owner
            stream = response.aiter_lines()  # held: a dropped one closes the response
            first = await anext(stream)
            await fake_openai.wait_for_requests(1)
        frames = await a.run()
        await fake_openai.cancelled.wait()  # the model call was abandoned
    assert labels(frames)[-3:] == [
        "agent_stopped",
        "agent_completion",
        "response_complete",
    ]
    assert frames[-2]["reason"] == "stopped"
    return Dropped(conversation, first, response.headers)


async def test_a_stop_sent_through_another_instance_stops_the_run(
    pg_database_url: str, redis_url: str, fake_openai: FakeOpenAIServer
) -> None:
    """A stop sent via another instance ends a run hung in a model call."""
    settings = hanging(fake_openai)
    async with (
        running_cluster(pg_database_url, redis_url, **settings) as cluster,
        AsyncExitStack() as stack,
    ):
        a, owner, session = await hung_run(cluster, stack, fake_openai)

        b, watcher, _ = await elsewhere(cluster, stack, session, owner)
        replayed = await b.until_label("agent_turn_start")
        assert replayed == a.seen[1:]  # the same frames, session_ready aside

        sent = time.perf_counter()
        await b.send(type="agent_control", action="stop")
        via_b = await b.run()
        stop_ms = (time.perf_counter() - sent) * 1000
        via_a = await a.run()

        assert via_a == via_b
        assert labels(via_b)[-3:] == [
            "agent_stopped",
            "agent_completion",
            "response_complete",
        ]
        assert via_b[-2]["reason"] == "stopped"
        await fake_openai.cancelled.wait()  # the model call was abandoned
        print(f"stop via {watcher} of a run on {owner}: {stop_ms:.1f} ms")


async def test_a_question_raised_on_one_instance_is_answered_through_another(
    offline_cluster: ClusterHarness,
) -> None:
    """An answer sent through another instance resumes the run, tools not rerun."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        a, owner, session, question = await paused(cluster, stack, *QUESTION)

        b, _, ready = await elsewhere(cluster, stack, session, owner)
        assert ready["last_seq"] == question["seq"]
        assert [await b.recv() for _ in a.seen[1:]] == a.seen[1:]

        await b.send(
            type="agent_user_input", content="km", question_id=question["question_id"]
        )
        via_b = await b.run()
        via_a = await a.run()
        assert via_a == via_b
        assert seqs(via_b) == list(range(question["seq"] + 1, via_b[-1]["seq"] + 1))
        answer = next(f for f in via_b if f["type"] == "chat_response")["message"]
        assert "21" in answer and "16.0934" in answer
        assert calls_of(a.seen, "calculator") == 1


async def test_an_approval_over_http_through_a_third_instance_reaches_the_run(
    offline_cluster: ClusterHarness, pg_database_url: str
) -> None:
    """An HTTP approval on a third instance runs the tool once and saves the note."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        a, owner, session, request = await paused(cluster, stack, *APPROVAL)
        b, watcher, _ = await elsewhere(cluster, stack, session, owner)
        third = next(i for i in cluster.others(owner) if i != watcher)
        await cluster.before(third)

        call = request["tool_call_id"]
        response = await cluster.request(
            "POST",
            f"/api/conversations/{session}/approvals/{call}",
            json={"approved": True},
        )
        assert response.headers["x-loopwire-instance"] == third
        assert (response.status_code, response.json()) == (
            200,
            {"tool_call_id": call, "status": "approved"},
        )
        after = await a.run()
        assert labels(after)[0] == "tool_complete:save_note"
        assert calls_of(a.seen, "save_note") == 1
        assert [await b.recv() for _ in a.seen[1:]] == a.seen[1:]

        again = await cluster.request(
            "POST",
            f"/api/conversations/{session}/approvals/{call}",
            json={"approved": True},
        )
        assert again.status_code in (404, 409)  # nothing waits for it now

    store = SqlStore(pg_database_url)
    await store.open()
    try:
        assert [n.text for n in await store.notes("local")] == ["buy milk"]
    finally:
        await store.close()


async def test_a_watcher_sees_each_frame_once_and_a_reconnect_elsewhere_replays_the_rest(
    offline_cluster: ClusterHarness,
) -> None:
    """A watcher elsewhere sees every frame; a reconnect replays only what it missed."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        a, owner = await cluster.connect(stack)
        session = (await a.recv())["session_id"]
        b_stack = await stack.enter_async_context(AsyncExitStack())
        b, watcher, _ = await elsewhere(cluster, b_stack, session, owner)

        await a.send(type="chat", content="3*7 and 2+2", agent_mode=True)
        whole = await a.run()
        seen_by_b = [await b.recv() for _ in range(len(whole) // 2)]
        await b_stack.aclose()  # b leaves halfway through
        assert seen_by_b == whole[: len(whole) // 2]
        assert seqs(whole) == list(range(1, len(whole) + 1))

        last = seen_by_b[-1]["seq"]
        third = next(i for i in cluster.others(owner) if i != watcher)
        await cluster.before(third)
        c, instance = await cluster.connect(
            stack, f"session_id={session}&last_seq={last}"
        )
        assert instance == third
        ready = await c.recv()
        assert (ready["resumed"], ready["last_seq"]) == (True, whole[-1]["seq"])
        missed = [await c.recv() for _ in whole[len(seen_by_b) :]]
        assert missed == whole[len(seen_by_b) :]  # exactly the missed frames

        more = await c.chat("and 5*5?")  # and the session goes on from there
        assert more[0]["seq"] == whole[-1]["seq"] + 1
        assert await a.until_label("response_complete") == more


async def test_a_paused_run_is_taken_over_when_its_instance_is_killed(
    offline_cluster: ClusterHarness, pg_database_url: str
) -> None:
    """A paused run outlives its killed instance and ends elsewhere, tools run once."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        a, owner, session, question = await paused(cluster, stack, *QUESTION)
        b = await watching(cluster, stack, a, session, owner)
        before = a.seen[1:]

        killed = time.perf_counter()
        assert await cluster.kill(owner) == -9
        heir = await cluster.took_over(session)
        taken_s = time.perf_counter() - killed
        assert heir != owner

        await b.send(
            type="agent_user_input", content="km", question_id=question["question_id"]
        )
        after = await b.run()
        answer = next(f for f in after if f["type"] == "chat_response")["message"]
        assert "21" in answer and "16.0934" in answer
        assert "tool_start:convert_units" in labels(after)
        assert calls_of([*before, *after], "calculator") == 1  # not run again
        assert after[0]["seq"] > question["seq"]
        print(f"{heir} took over from {owner} {taken_s:.2f} s after the kill")

    store = SqlStore(pg_database_url)
    await store.open()
    try:
        (record,) = await store.runs(session)
        assert (record.status, record.steps) == ("finished", 3)
        history = await store.messages(session)
        assert [m.name for m in history if m.role == "tool"].count("calculator") == 1
    finally:
        await store.close()


async def test_a_run_cut_off_mid_phase_by_a_kill_is_reported_interrupted(
    pg_database_url: str, redis_url: str, fake_openai: FakeOpenAIServer
) -> None:
    """A kill mid model call ends the run as interrupted, with no second call."""
    settings = hanging(fake_openai)
    async with (
        running_cluster(pg_database_url, redis_url, **settings) as cluster,
        AsyncExitStack() as stack,
    ):
        a, owner, session = await hung_run(cluster, stack, fake_openai)
        b = await watching(cluster, stack, a, session, owner)

        assert await cluster.kill(owner) == -9
        await cluster.took_over(session)
        after = await b.run()
        assert labels(after) == [
            "error:run_interrupted",
            "agent_completion",
            "response_complete",
        ]
        assert after[1]["reason"] == "interrupted"
        assert len(fake_openai.requests) == 1  # nothing was asked twice
