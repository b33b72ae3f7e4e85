"""People in the loop across instances, through nginx: messages held while a
run works and remembered approvals, sent through an instance that does not
own the conversation, reach the owner's run."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest

from backend.store.sql import SqlStore
from tests.cluster_harness import ClusterHarness
from tests.test_cluster import APPROVAL, QUESTION, elsewhere, paused, watching
from tests.ws_client import labels

pytestmark = pytest.mark.timeout(180)


async def test_a_steer_and_a_queued_message_through_another_instance(
    offline_cluster: ClusterHarness,
) -> None:
    """While the owner's run waits for an answer, a steer and a queued
    message sent through another instance are held by the owner; the
    answer resumes the run, which is told the steer once, and the queued
    message runs next."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        a, owner, session, question = await paused(cluster, stack, *QUESTION)
        b = await watching(cluster, stack, a, session, owner)
        await b.send(type="chat", content="be brief", when_busy="steer")
        await b.send(type="chat", content="what is 2+2", when_busy="queue")
        held = [(await b.until_label("pending_input"))[-1] for _ in range(2)]
        await b.send(
            type="agent_user_input", content="km", question_id=question["question_id"]
        )
        first = await a.run()
        second = await a.run()
    assert [(h["mode"], h["state"], h["position"]) for h in held] == [
        ("steer", "queued", 0),
        ("queue", "queued", 1),
    ]
    told = [f for f in first if f.get("update_type") == "agent_interjection"]
    assert [(f["content"], f["input_id"]) for f in told] == [
        ("be brief", held[0]["input_id"])
    ]
    started = second[0]
    assert (started["state"], started["input_id"]) == ("started", held[1]["input_id"])
    assert "4" in next(f for f in second if f["type"] == "chat_response")["message"]


async def test_always_allow_through_another_instance_is_kept_by_the_owner(
    offline_cluster: ClusterHarness, pg_database_url: str
) -> None:
    """An approval remembered through another instance is stored once, for
    the conversation's owner; the next call in that conversation runs
    without asking."""
    cluster = offline_cluster
    async with AsyncExitStack() as stack:
        a, owner, session, request = await paused(cluster, stack, *APPROVAL)
        b, _, _ = await elsewhere(cluster, stack, session, owner)
        await b.send(
            type="tool_approval_response",
            tool_call_id=request["tool_call_id"],
            approved=True,
            remember="conversation",
        )
        first = await a.run()
        await a.send(type="chat", content="save a note: buy eggs", agent_mode=True)
        second = await a.run()
    assert "tool_approval_decided" in labels(first)
    assert "tool_approval_request:save_note" not in labels(second)
    assert "tool_complete:save_note" in labels(second)
    store = SqlStore(pg_database_url)
    await store.open()
    try:
        grants = [
            (grant.tool, grant.conversation_id)
            for grant in await store.tool_grants("local")
            if grant.conversation_id == session
        ]
    finally:
        await store.close()
    assert grants == [("save_note", session)]
