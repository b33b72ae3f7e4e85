"""Sessions in memory are bounded: idle ones leave and come back from the store.

A session with no socket and no run leaves memory after the grace period
(or sooner, when `max_sessions` needs room), taking its executor state (rate
limits) with it; a reconnect loads it back from the store whole: history,
the replay window and its `seq`. Runs on SQLite and on PostgreSQL, with the
embedded offline model and the built-in tools.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backend.agent.kit import LoopKit
from backend.agent.registry import StrategyRegistry
from backend.app import default_registry, default_strategies, make_service
from backend.chat.service import ChatService
from backend.chat.session import Session
from backend.errors import Busy
from backend.llm.offline import OfflineLLM
from backend.prompts import PromptProvider
from backend.store.sql import SqlStore
from backend.tools.executor import ToolExecutor
from tests.conftest import make_settings
from tests.service_harness import ServiceClient
from tests.ws_client import labels

pytestmark = pytest.mark.timeout(60)


@dataclass
class Running:
    service: ChatService
    executor: ToolExecutor
    store: SqlStore

    async def client(self, session_id: str | None = None) -> ServiceClient:
        session, _ = await self.service.open_session(session_id)
        return ServiceClient(self.service, session)


@asynccontextmanager
async def running(url: str, **overrides: Any) -> AsyncIterator[Running]:
    """A started service on the offline model, saving to the database at `url`."""
    store = SqlStore(url)
    await store.open()
    registry = default_registry(store)
    kits: list[LoopKit] = []

    def strategies(kit: LoopKit) -> StrategyRegistry:
        kits.append(kit)
        return default_strategies(kit)

    settings = make_settings(database_url=url, **overrides)
    service = make_service(
        settings, OfflineLLM(registry), registry, PromptProvider(), strategies, store
    )
    try:
        async with service:
            yield Running(service, kits[0].tools.executor, store)
    finally:
        await store.close()


def leave(client: ServiceClient) -> Session:
    """The client's socket goes away, as the transport lets it go."""
    client.session.outbox.unsubscribe(client.subscription)
    client.session.touch()
    return client.session


def age(session: Session, seconds: float) -> None:
    """Pretend the session has been idle for `seconds` more (with no await
    between this and `evict_idle`, the write-behind task cannot get there
    first)."""
    session.last_active -= seconds


async def test_an_idle_session_leaves_memory_and_comes_back_whole(
    database_url: str,
) -> None:
    """An idle session past its grace leaves memory with its limits, reloads whole."""
    async with running(database_url, session_grace_s=60) as lw:
        client = await lw.client()
        await client.send(type="chat", content="forget note 1", agent_mode=True)
        frames = await client.until_label("tool_approval_request:delete_note")
        await client.send(  # deleting asks
            type="tool_approval_response",
            tool_call_id=frames[-1]["tool_call_id"],
            approved=True,
        )
        frames += await client.run()
        assert "tool_start:delete_note" in labels(frames)
        assert lw.executor.sessions_tracked == 1  # notes are rate limited
        session = leave(client)

        await lw.service.flush(session)  # as the write-behind task would
        assert lw.service.table.evict_idle() == 0  # within the grace period
        age(session, 61)
        assert lw.service.table.evict_idle() == 1
        assert lw.service.sessions == {}
        assert lw.executor.sessions_tracked == 0  # its rate limits went with it

        back, resumed = await lw.service.open_session(session.id)
        assert resumed and back is not session
        assert back.history.messages == session.history.messages
        replay = back.outbox.subscribe(after_seq=0)
        replayed = [json.loads(await replay.next_frame()) for _ in frames]
        assert replayed == frames
        again = ServiceClient(lw.service, back)
        more = await again.chat("what is 2+2?")
        assert more[0]["seq"] == frames[-1]["seq"] + 1
        assert "4" in next(f for f in more if f["type"] == "chat_response")["message"]

    users = [m.content for m in back.history.messages if m.role == "user"]
    assert users == ["forget note 1", "what is 2+2?"]


async def test_a_socket_or_a_run_keeps_a_session_in_memory(database_url: str) -> None:
    """A socket, or a run awaiting an answer, keeps an idle session in memory."""
    async with running(database_url, session_grace_s=60) as lw:
        watched = await lw.client()
        await watched.chat("what is 2+2?")
        age(watched.session, 61)  # idle long ago, but a socket is on it

        asking = await lw.client()
        await asking.send(type="chat", content="convert 10 miles", agent_mode=True)
        question = (await asking.until_label("agent_request_input"))[-1]
        paused = leave(asking)
        age(paused, 61)  # no socket, but its run waits for an answer

        assert lw.service.table.evict_idle() == 0
        assert set(lw.service.sessions) == {watched.session.id, paused.id}

        back = await lw.client(paused.id)
        assert back.session is paused
        await back.send(
            type="agent_user_input", content="km", question_id=question["question_id"]
        )
        answer = await back.run()
        assert (
            "16.0934"
            in next(f for f in answer if f["type"] == "chat_response")["message"]
        )
        leave(back)
        await lw.service.flush(paused)  # as the write-behind task would
        age(paused, 61)
        assert lw.service.table.evict_idle() == 1
        assert set(lw.service.sessions) == {watched.session.id}


async def test_the_cap_makes_room_from_the_longest_idle_and_refuses_when_all_are_busy(
    database_url: str,
) -> None:
    """At the cap the longest idle session is evicted; with none idle, it is `Busy`."""
    async with running(database_url, max_sessions=3, session_grace_s=600) as lw:
        first, second = await lw.client(), await lw.client()
        await first.chat("what is 1+1?")
        await second.chat("what is 2+2?")
        leave(first)
        leave(second)
        age(first.session, 5)  # idle longer than `second`
        third = await lw.client()
        fourth = await lw.client()  # needs room: the longest idle goes
        assert set(lw.service.sessions) == {
            second.session.id,
            third.session.id,
            fourth.session.id,
        }
        again = ServiceClient(lw.service, second.session)
        await again.send(type="chat", content="what is 3+3?")
        with pytest.raises(Busy, match="3 active sessions"):
            await lw.service.open_session()

        # The evicted one is in the store and still reachable by id, once
        # there is room again: `second` is idle after its run.
        await again.run()
        leave(again)
        back = await lw.client(first.session.id)
        assert back.session is not first.session
        assert back.session.history.messages == first.session.history.messages
        assert second.session.id not in lw.service.sessions


async def test_the_write_behind_task_lets_idle_sessions_go_by_itself(
    tmp_path: Path,
) -> None:
    """The background sweep evicts an idle session itself, after saving its history."""
    url = f"sqlite:///{tmp_path / 'loopwire.db'}"
    async with running(url, session_grace_s=0.05) as lw:
        client = await lw.client()
        await client.chat("what is 3*7?", agent_mode=True)
        session = leave(client)
        async with asyncio.timeout(10):
            while lw.service.sessions:
                await lw.service.table.next_sweep()
        stored = await lw.store.messages(session.id)
        assert [m.role for m in stored] == [m.role for m in session.history.messages]
