"""The HTTP API and shutdowns across three instances behind nginx.

A conversation owned by one instance is run, followed, read, given files and
deleted through the others; an instance shut down with SIGTERM hands its
paused runs over; a client that reconnects right after its instance was
killed waits out the lease and carries on.
"""

from __future__ import annotations

import json
import time
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from backend.store.sql import SqlStore
from tests.cluster_harness import HEADER, LEASE_S, ClusterHarness, running_cluster
from tests.test_cluster import (
    APPROVAL,
    QUESTION,
    calls_of,
    paused,
    watching,
)
from tests.test_files import AS_ALICE, AS_BOB, users
from tests.test_restart import closed_with
from tests.ws_client import label, labels

pytestmark = pytest.mark.timeout(180)


def sse_events(text: str) -> list[tuple[str, str]]:
    """(event, data) of each event in a text/event-stream body."""
    events = []
    for block in text.split("\r\n\r\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if ": " in line
        )
        if "event" in fields:
            events.append((fields["event"], fields.get("data", "")))
    return events


async def test_the_http_api_reaches_a_conversation_owned_elsewhere(
    offline_cluster: ClusterHarness,
) -> None:
    """Runs, streams, replays and reads through other instances reach the owner."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        a, owner = await cluster.connect(stack)
        session = (await a.recv())["session_id"]
        await a.chat("what is 3*7?", agent_mode=True)

        # a whole run, asked of another instance: one JSON document
        await cluster.after(owner)
        response = await cluster.request(
            "POST",
            "/api/agent",
            json={
                "query": "and 2+2?",
                "conversation_id": session,
                "stream": False,
            },
        )
        assert response.status_code == 200, response.text
        assert response.headers[HEADER] != owner
        document = response.json()
        assert document["conversation_id"] == session
        user, assistant = document["user_message"], document["assistant_message"]
        assert (user["role"], user["content"]) == ("user", "and 2+2?")
        assert "4" in assistant["content"]
        assert document["agent_metadata"]["reason"] == "finished"
        assert document["agent_metadata"]["execution_trace"]
        run = await a.run()  # the owner's client saw it all
        assert run[-3]["message"] == document["assistant_message"]["content"]

        # streamed through a third instance: the same frames as events
        await cluster.after(response.headers[HEADER])
        streamed = await cluster.request(
            "POST",
            "/api/agent",
            json={"query": "and 5*5?", "conversation_id": session},
        )
        assert streamed.status_code == 200
        events = sse_events(streamed.text)
        frames = [json.loads(data) for event, data in events if event != "done"]
        assert frames == await a.run()
        done = json.loads(events[-1][1])
        assert (done["conversation_id"], done["reason"]) == (session, "finished")
        ids = [user["id"], assistant["id"], done["message_id"]]

        # replay of the conversation's frames from anywhere
        replay = await cluster.request(
            "GET",
            f"/api/conversations/{session}/events",
            headers={"Last-Event-ID": str(frames[0]["seq"] - 1)},
        )
        replayed = [json.loads(d) for e, d in sse_events(replay.text) if e != "done"]
        assert replayed == frames

        # read through any instance: what the owner holds, saved first; the
        # ids the owner gave are positions in it
        for _ in range(3):
            read = await cluster.request("GET", f"/api/conversations/{session}")
            assert read.status_code == 200
            messages = read.json()["messages"]
            users = [m["content"] for m in messages if m["role"] == "user"]
            assert users == ["what is 3*7?", "and 2+2?", "and 5*5?"]
            assert [messages[i]["content"] for i in ids] == [
                "and 2+2?",
                assistant["content"],
                frames[-3]["message"],
            ]


async def test_files_and_deletion_through_other_instances(
    offline_cluster: ClusterHarness,
) -> None:
    """Uploads and deletes via other instances reach the owner; watchers are told."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        a, owner, session, _ = await paused(cluster, stack, *QUESTION)

        await cluster.after(owner)
        uploaded = await cluster.request(
            "POST",
            f"/api/conversations/{session}/files",
            files={"file": ("cities.csv", b"city,pop\nOslo,709000\n", "text/csv")},
        )
        assert uploaded.status_code == 201, uploaded.text
        assert uploaded.headers[HEADER] != owner
        update = await a.recv()  # the owner's session hears of it
        assert (update["type"], update["added"]) == (
            "files_update",
            [uploaded.json()["id"]],
        )

        await cluster.after(owner)
        busy = await cluster.request("DELETE", f"/api/conversations/{session}")
        assert busy.status_code == 409  # its run is waiting for an answer
        await a.send(type="agent_control", action="stop")
        await a.run()
        b = await watching(cluster, stack, a, session, owner)

        await cluster.after(owner)
        deleted = await cluster.request("DELETE", f"/api/conversations/{session}")
        assert deleted.status_code == 204
        gone = await cluster.request("GET", f"/api/conversations/{session}")
        assert gone.status_code == 404

        # a client still showing it elsewhere is told, not left waiting
        await b.send(type="chat", content="hello again")
        told = await b.recv()
        assert (told["seq"], label(told)) == (0, "error:invalid_message")
        assert "no longer exists" in told["message"]


async def test_a_sigterm_hands_a_paused_run_to_another_instance(
    offline_cluster: ClusterHarness,
) -> None:
    """A SIGTERM'd owner hands its run awaiting approval on; the tool runs once."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        a, owner, session, request = await paused(cluster, stack, *APPROVAL)
        b = await watching(cluster, stack, a, session, owner)

        stopping = time.perf_counter()
        await cluster.process(owner).terminate()
        goodbye, code = await closed_with(a)
        assert (labels(goodbye), code) == (["error:server_restarting"], 1012)
        heir = await cluster.took_over(session)
        print(f"{heir} took over {time.perf_counter() - stopping:.2f} s after SIGTERM")

        await b.send(
            type="tool_approval_response",
            tool_call_id=request["tool_call_id"],
            approved=True,
        )
        after = await b.run()
        # every client of the session sees the same frames: the owner's
        # goodbye too, then the run going on from where it waited
        assert labels(after)[:2] == [
            "error:server_restarting",
            "tool_complete:save_note",
        ]
        assert after[0] == goodbye[0]
        assert calls_of([*a.seen, *after], "save_note") == 1


async def test_a_client_back_right_after_a_kill_resumes_on_another_instance(
    offline_cluster: ClusterHarness,
) -> None:
    """A client back after its owner is killed resumes elsewhere and the run goes on."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(AsyncExitStack())
        a, owner, session, question = await paused(cluster, first, *QUESTION)
        await cluster.kill(owner)
        await closed_with(a)

        again, instance = await cluster.connect(
            stack, f"session_id={session}&last_seq={question['seq']}"
        )
        ready = await again.recv()
        assert instance != owner
        assert (ready["type"], ready["resumed"]) == ("session_ready", True)
        await again.send(
            type="agent_user_input", content="km", question_id=question["question_id"]
        )
        after = await again.run()
        assert (
            "16.0934"
            in next(f for f in after if label(f) == "chat_response")["message"]
        )
        assert calls_of([*a.seen, *after], "calculator") == 1


async def test_another_users_conversation_is_theirs_on_no_instance(
    pg_database_url: str, redis_url: str, tmp_path: Path
) -> None:
    """Another user naming a conversation gets a new one and cannot touch its run."""
    tokens = users(tmp_path)
    async with (
        running_cluster(
            pg_database_url, redis_url, lease_ttl_s=LEASE_S, auth_tokens_file=tokens
        ) as cluster,
        AsyncExitStack() as stack,
    ):
        a, owner = await cluster.connect(stack, headers=AS_ALICE)
        session = (await a.recv())["session_id"]
        await a.send(type="chat", content="3*7 and convert 10 miles", agent_mode=True)
        question = (await a.until_label("agent_request_input"))[-1]

        # Bob names Alice's conversation through another instance: he gets a
        # new one of his own, as an unknown id would give him
        await cluster.after(owner)
        b, where = await cluster.connect(
            stack, f"session_id={session}&last_seq=0", headers=AS_BOB
        )
        ready = await b.recv()
        assert where != owner
        assert (ready["resumed"], ready["session_id"] != session) == (False, True)
        for path, body in (("stop", {}), ("input", {"content": "km"})):
            await cluster.after(owner)
            refused = await cluster.request(
                "POST",
                f"/api/conversations/{session}/{path}",
                json=body,
                headers=AS_BOB,
            )
            assert refused.headers[HEADER] != owner
            assert refused.status_code == 404
        # nothing reached her run: it still waits for her answer
        await a.send(
            type="agent_user_input", content="km", question_id=question["question_id"]
        )
        after = await a.run()
        assert labels(after)[0] == "agent_observe"
        assert "agent_stopped" not in labels(after)


async def test_versions_are_switched_through_another_instance_and_outlive_a_kill(
    offline_cluster: ClusterHarness, pg_database_url: str
) -> None:
    """An edit on the owner; its versions listed and switched through another
    instance over HTTP; the owner killed: the heir lists the same versions
    and the conversation goes on from the version switched to."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(AsyncExitStack())
        a, owner = await cluster.connect(first)
        session = (await a.recv())["session_id"]
        original = await a.chat("hello there", selected_tools=[])
        await a.chat(
            "what is 3*7?", selected_tools=[], replace_from=original[0]["run_id"]
        )
        base = f"/api/conversations/{session}/branches"

        await cluster.after(owner)
        listed = await cluster.request("GET", base)
        assert (listed.status_code, listed.headers[HEADER] != owner) == (200, True)
        (fork,) = listed.json()["forks"]
        assert [v["request"] for v in fork["versions"]] == [
            "hello there",
            "what is 3*7?",
        ]
        await cluster.after(owner)
        switched = await cluster.request(
            "POST", f"{base}/{fork['versions'][0]['branch_id']}"
        )
        assert switched.status_code == 200, switched.text
        assert switched.headers[HEADER] != owner
        frames = await a.until_label("branch_switched")
        for _ in range(frames[-1]["resent"]):
            await a.recv()

        await cluster.kill(owner)
        await closed_with(a)
        seen = a.seen[-1]["seq"]
        again, _ = await cluster.connect(stack, f"session_id={session}&last_seq={seen}")
        assert (await again.recv())["resumed"] is True
        relisted = (await cluster.request("GET", base)).json()["forks"]
        assert [v["request"] for v in relisted[0]["versions"]] == [
            "hello there",
            "what is 3*7?",
        ]
        assert relisted[0]["current"] == 0
        await again.chat("thanks", selected_tools=[])

    store = SqlStore(pg_database_url)
    await store.open()
    try:
        said = [m.content for m in await store.messages(session) if m.role == "user"]
        assert said == ["hello there", "thanks"]
    finally:
        await store.close()
