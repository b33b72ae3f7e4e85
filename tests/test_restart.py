"""Conversations and paused runs survive a restart of a real server process.

Each test runs `python -m backend serve` on the embedded offline model (or a
fake OpenAI-compatible server), over SQLite and over PostgreSQL, stops it —
gracefully with SIGTERM, or by SIGKILL as a crash — starts it again on the
same database and reconnects with the session id.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from backend.app import create_app
from tests.conftest import make_settings
from tests.databases import stored
from tests.fake_openai import FakeOpenAIServer, HangReply
from tests.fakes import ScriptedLLM, SlowTool, calls, observe, reason, test_registry
from tests.live_server import serving
from tests.server_process import ServerProcess, server_process
from tests.ws_client import Client, Frame, label, labels

pytestmark = pytest.mark.timeout(120)


async def closed_with(client: Client) -> tuple[list[Frame], int | None]:
    """The frames a client gets until the server closes, and the close code."""
    frames: list[Frame] = []
    try:
        while True:
            frames.append(await client.recv())
    except ConnectionClosed as closed:
        return frames, closed.rcvd.code if closed.rcvd else None


async def restarted(client: Client, server: ServerProcess) -> tuple[list[Frame], int]:
    """SIGTERM the server: what the client saw, and the process's exit status."""
    stop = asyncio.create_task(server.terminate())
    frames, code = await closed_with(client)
    status = await stop
    assert code == 1012
    return frames, status


def calls_of(frames: list[Frame], tool: str) -> int:
    return sum(1 for f in frames if label(f) == f"tool_start:{tool}")


async def test_history_and_replay_survive_a_restart(database_url: str) -> None:
    """A session resumed after a SIGTERM restart replays its frames, history kept."""
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(server_process(database_url))
        client = await first.client(stack)
        ready = await client.recv()
        session = ready["session_id"]
        run = await client.chat("what is 3*7?", agent_mode=True)
        assert run[-3]["type"] == "chat_response" and "21" in run[-3]["message"]

        goodbye, status = await restarted(client, first)
        assert labels(goodbye) == ["error:server_restarting"]
        assert status in (0, -15)
        seen = [*run, *goodbye]

    async with AsyncExitStack() as stack:  # the first server is gone; its data stays
        server = await stack.enter_async_context(server_process(database_url))
        client = await server.client(stack, f"session_id={session}&last_seq=0")
        ready = await client.recv()
        assert (ready["resumed"], ready["last_seq"]) == (True, seen[-1]["seq"])
        replayed = [await client.recv() for _ in seen]
        assert replayed == seen  # the same frames, byte for byte in meaning
        more = await client.chat("and 2+2?")
        assert more[0]["seq"] == seen[-1]["seq"] + 1

    async with stored(database_url) as store:
        history = await store.messages(session)
        users = [m.content for m in history if m.role == "user"]
        assert users == ["what is 3*7?", "and 2+2?"]


async def test_a_question_survives_a_sigterm_and_the_run_goes_on(
    database_url: str,
) -> None:
    """A question pending at SIGTERM is answered after restart; no tool runs twice."""
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(server_process(database_url))
        client = await server.client(stack)
        session = (await client.recv())["session_id"]
        await client.send(
            type="chat", content="3*7 and convert 10 miles", agent_mode=True
        )
        before = await client.until_label("agent_request_input")
        question = before[-1]
        goodbye, _ = await restarted(client, server)
        assert labels(goodbye) == ["error:server_restarting"]
        last = goodbye[-1]["seq"]

    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(server_process(database_url))
        client = await server.client(stack, f"session_id={session}&last_seq={last}")
        ready = await client.recv()
        assert (ready["resumed"], ready["last_seq"]) == (True, last)
        await client.send(
            type="agent_user_input", content="km", question_id=question["question_id"]
        )
        after = await client.run()

    assert after[0]["seq"] == last + 1
    assert labels(after)[:2] == ["agent_observe", "agent_turn_start"]
    assert "tool_start:convert_units" in labels(after)
    answer = next(f for f in after if f["type"] == "chat_response")["message"]
    assert "21" in answer and "16.0934" in answer
    assert calls_of([*before, *after], "calculator") == 1  # not run again
    async with stored(database_url) as store:
        history = await store.messages(session)
        assert [m.name for m in history if m.role == "tool"].count("calculator") == 1
        (record,) = await store.runs(session)
        assert (record.status, record.steps) == ("finished", 3)


async def test_an_approval_survives_a_sigterm_and_the_tool_runs_once(
    database_url: str,
) -> None:
    """An approval pending at SIGTERM is given after restart; the tool runs once."""
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(server_process(database_url))
        client = await server.client(stack)
        session = (await client.recv())["session_id"]
        await client.send(type="chat", content="save a note: buy milk", agent_mode=True)
        before = await client.until_label("tool_approval_request:save_note")
        call_id = before[-1]["tool_call_id"]
        goodbye, _ = await restarted(client, server)
        last = goodbye[-1]["seq"]

    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(server_process(database_url))
        client = await server.client(stack, f"session_id={session}&last_seq={last}")
        assert (await client.recv())["resumed"] is True
        await client.send(
            type="tool_approval_response", tool_call_id=call_id, approved=True
        )
        after = await client.run()

    assert labels(after)[0] == "tool_complete:save_note"
    assert calls_of([*before, *after], "save_note") == 1
    async with stored(database_url) as store:
        assert [n.text for n in await store.notes("local")] == ["buy milk"]


async def test_a_tool_the_shutdown_could_not_wait_for_is_in_doubt_after_the_restart(
    database_url: str,
) -> None:
    """A run still inside a tool call when the grace ran out is cut off; the
    next start continues it with the call in doubt. `slow` cannot tell
    whether it took effect, so the user is asked (an approval `in_doubt`,
    stored and replayed to the reconnecting client); declined, the call is
    reported as one that may have run, is not run again, and the run goes
    on to its answer."""
    slow = SlowTool()
    llm = ScriptedLLM(reason(tools=["slow"]), calls(("slow", {"label": "x"})))
    app = create_app(
        make_settings(database_url=database_url, shutdown_grace_s=0),
        llm=llm,
        registry=test_registry(slow),
    )
    async with serving(app) as server, connect(server.url("/ws", "ws")) as socket:
        client = Client(socket)
        session = (await client.recv())["session_id"]
        await client.send(type="chat", content="run slow", agent_mode=True)
        before = await client.until_label("tool_start:slow")
        await slow.started.wait()
    assert slow.cancelled.is_set()

    slow.started.clear()
    again = ScriptedLLM(observe(should_continue=False, final="Left it alone."))
    app = create_app(
        make_settings(database_url=database_url),
        llm=again,
        registry=test_registry(slow),
    )
    async with serving(app) as server:
        query = f"?session_id={session}&last_seq={before[-1]['seq']}"
        async with connect(server.url("/ws", "ws") + query) as socket:
            client = Client(socket)
            assert (await client.recv())["resumed"] is True
            asked = await client.until_label("tool_approval_request:slow")
            assert asked[-1]["in_doubt"] is True
            await client.send(  # an approval that does not say it runs it again
                type="tool_approval_response",
                tool_call_id=asked[-1]["tool_call_id"],
                approved=True,
            )
            refused = await client.recv()
            assert (refused["type"], refused["error_type"]) == (
                "error",
                "no_pending_approval",
            )
            assert "approve with in_doubt: true" in refused["message"]
            # the shutdown stored all it sent and let go cleanly: no gap
            assert [f["seq"] for f in asked] == [before[-1]["seq"] + 1]
            await client.send(
                type="tool_approval_response",
                tool_call_id=asked[-1]["tool_call_id"],
                approved=False,
            )
            after = await client.run()
    assert not slow.started.is_set()  # not run again
    assert labels(after)[0] == "tool_error:slow:cancelled"
    assert "may or may not have taken effect" in after[0]["error"]
    assert labels(after)[-3:] == [
        "chat_response",
        "agent_completion",
        "response_complete",
    ]
    assert after[-2]["reason"] == "finished"

    async with stored(database_url) as store:
        (record,) = await store.runs(session)
        assert record.status == "finished"
        history = await store.messages(session)
        assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
        assert history[2].status == "cancelled"
        assert history[3].content == "Left it alone."


async def test_a_crash_mid_phase_is_reported_interrupted_after_the_restart(
    database_url: str, fake_openai: FakeOpenAIServer
) -> None:
    """A run killed mid-LLM-call is reported as interrupted when its session resumes."""
    fake_openai.script(HangReply(partial_content="Thinking"))
    settings = {"llm_base_url": fake_openai.base_url, "llm_api_key": "test"}
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            server_process(database_url, **settings)
        )
        client = await server.client(stack)
        session = (await client.recv())["session_id"]
        await client.send(type="chat", content="think hard", agent_mode=True)
        before = await client.until_label("agent_turn_start")
        await fake_openai.wait_for_requests(1)
        assert await server.kill() == -9

    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            server_process(database_url, **settings)
        )
        query = f"session_id={session}&last_seq={before[-1]['seq']}"
        client = await server.client(stack, query)
        assert (await client.recv())["resumed"] is True
        after = await client.run()
    assert labels(after) == [
        "error:run_interrupted",
        "agent_completion",
        "response_complete",
    ]
    assert after[1]["reason"] == "interrupted"
