"""The fence as one instance sees it, in process, on SQLite and PostgreSQL.

Another instance taking a conversation over is played by a second `SqlStore`
on the same database raising its epoch (`take`), as a real take-over does.
The offline model's "save a note: …" waits for the approval of `save_note`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from backend.chat.sessions import UNSAVABLE
from backend.chat.subscription import CLOSING
from backend.store.base import StoreError
from backend.store.sql import SqlStore
from tests.service_harness import ServiceClient
from tests.test_session_table import running
from tests.ws_client import Frame

pytestmark = pytest.mark.timeout(60)

ASKED = "tool_approval_request:save_note"


async def waiting(client: ServiceClient) -> Frame:
    await client.send(type="chat", content="save a note: buy milk", agent_mode=True)
    return (await client.until_label(ASKED))[-1]


async def closing(client: ServiceClient) -> tuple[list[dict[str, Any]], str]:
    """The frames queued for the client up to its close, and the close's reason."""
    frames = []
    while (text := await client.subscription.next_frame()) != CLOSING:
        frames.append(json.loads(text))
    return frames, client.subscription.closing[1]


async def test_a_prompt_and_a_runs_end_are_stored_before_anyone_sees_them(
    database_url: str,
) -> None:
    """The approval prompt and final frame are stored before the client gets either."""
    async with running(database_url) as lw:
        client = await lw.client()
        session = client.session.id
        asked = await waiting(client)
        stored = [f.seq for f in await lw.store.frames(session, max_bytes=1 << 20)]
        assert asked["seq"] == stored[-1]  # stored when the client got it
        (record,) = await lw.store.live_runs(session)
        pending = json.loads(record.state)["pending_approval"]
        assert (record.status, pending["tool_call_id"]) == (
            "waiting",
            asked["tool_call_id"],
        )

        await client.send(
            type="tool_approval_response",
            tool_call_id=asked["tool_call_id"],
            approved=True,
        )
        done = (await client.run())[-1]
        stored = [f.seq for f in await lw.store.frames(session, max_bytes=1 << 20)]
        assert (done["type"], stored[-1]) == ("response_complete", done["seq"])
        assert [r.status for r in await lw.store.runs(session)] == ["finished"]


async def test_a_decision_reaching_a_stale_owner_is_refused_and_it_lets_go(
    database_url: str,
) -> None:
    """Another instance took the conversation over while the run waited
    here: the approval is not taken (the store refuses to record it), the
    client is told `moved` outside the sequence and closed, the tool does not
    run, and nothing more is written from here."""
    async with running(database_url) as lw:
        client = await lw.client()
        session = client.session.id
        asked = await waiting(client)
        other = SqlStore(database_url)
        try:
            taken = await other.take(session, max_frame_bytes=1 << 20)
            assert taken is not None

            await client.send(
                type="tool_approval_response",
                tool_call_id=asked["tool_call_id"],
                approved=True,
            )
            frames, reason = await closing(client)
            assert [(f["type"], f["error_type"], f["seq"]) for f in frames] == [
                ("error", "moved", 0)
            ]
            assert "moved to another server" in reason
            assert session not in lw.service.sessions
            assert await other.notes("local") == []
            (record,) = await other.runs(session)
            assert record.status == "waiting"  # as the stale owner left it
            assert json.loads(record.state)["resolution"] is None
            assert await other.last_seq(session) == asked["seq"]
        finally:
            await other.close()


async def test_a_conversation_whose_writes_keep_failing_is_let_go(
    database_url: str,
) -> None:
    """`store_max_failures` flushes fail in a row (no retry time): the run
    ends `store_error`, and the conversation is let go with the reason
    rather than tried forever; what was stored before stays."""
    async with running(database_url, store_retry_s=0, store_max_failures=2) as lw:
        client = await lw.client()
        session = client.session.id
        await client.chat("what is 2+2?")

        async def refuse(*_args: Any, **_kwargs: Any) -> None:
            raise StoreError("the disk is full")

        lw.store.write = refuse  # type: ignore[method-assign]
        await client.send(type="chat", content="what is 3+3?")
        frames, reason = await closing(client)
        assert [f["error_type"] for f in frames if f["type"] == "error"] == [
            "store_error"
        ]
        assert reason == UNSAVABLE
        assert session not in lw.service.sessions


async def test_a_session_that_keeps_nothing_still_shows_what_it_holds_back(
    database_url: str,
) -> None:
    """Frames held until they are stored are shown by a session with nothing
    to store too (its conversation deleted under a client that chats on):
    only a session let go drops them."""
    async with running(database_url) as lw:
        client = await lw.client()
        await client.chat("what is 2+2?")
        assert lw.service.forget(client.session.id)
        frames = await client.chat("what is 3+3?")
        assert [f["type"] for f in frames][-2:] == [
            "chat_response",
            "response_complete",
        ]
