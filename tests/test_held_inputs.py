"""Messages sent while a run works (`chat.when_busy`): queued to run next,
told to the run as a steer, or interrupting it; kept across a restart."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

from backend.app import create_app
from backend.llm.base import LLMRequest, Message, ToolCall
from backend.llm.offline_run import read
from backend.llm.openai_compat.wire import payload
from tests.conftest import Harness, StartServer, make_settings
from tests.fakes import ScriptedLLM, SlowTool, calls, observe, reason, test_registry
from tests.live_server import serving
from tests.ws_client import Client, labels

END = ["chat_response", "agent_completion", "response_complete"]


def slow_step(*after: Any) -> list[Any]:
    """A react step whose tool waits until released, then `after`."""
    return [reason("wait", tools=["slow"]), calls(("slow", {"label": "a"})), *after]


def said_by_user(request: LLMRequest, text: str) -> int:
    """How many of the request's user messages are `text`."""
    return sum(1 for m in request.messages if m.role == "user" and m.content == text)


async def working(
    start_server: StartServer, *script: Any
) -> tuple[Harness, ScriptedLLM, SlowTool, Client]:
    """A server whose first run waits in its `slow` tool."""
    slow, llm = SlowTool(), ScriptedLLM(*script)
    harness = await start_server(llm, test_registry(slow))
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="first", agent_mode=True)
    await slow.started.wait()
    return harness, llm, slow, client


async def test_a_queued_message_runs_after_the_run(start_server: StartServer) -> None:
    """`queue`: held and shown as pending; when the run ends, it runs, and
    the run before never saw it."""
    _, llm, slow, client = await working(
        start_server,
        *slow_step(observe(should_continue=False, final="First done.")),
        "Second answer.",
    )
    await client.send(type="chat", content="second", when_busy="queue")
    queued = (await client.until_label("pending_input"))[-1]
    assert (queued["state"], queued["mode"], queued["content"], queued["position"]) == (
        "queued",
        "queue",
        "second",
        0,
    )
    assert queued["run_id"] is None
    assert queued["agent_mode"] is False  # as the chat asked
    slow.release.set()
    first = await client.run()
    second = await client.run()
    assert labels(first)[-5:] == ["tool_complete:slow", "agent_observe", *END]
    assert labels(second) == [
        "pending_input",
        *["token_stream"] * 3,
        "chat_response",
        "response_complete",
    ]
    started = second[0]
    assert (started["state"], started["input_id"]) == ("started", queued["input_id"])
    assert second[-1]["run_id"] == started["started_run_id"]
    assert [said_by_user(r, "second") for r in llm.requests] == [0, 0, 0, 1]


async def test_a_steer_is_told_to_the_run_once_at_a_phase_boundary(
    start_server: StartServer,
) -> None:
    """`steer`: the run sees the user's words after its tool call, once,
    in every later request; the run shows it as `agent_interjection`."""
    _, llm, slow, client = await working(
        start_server,
        *slow_step(observe("Metric it is.")),
        reason("done", finish=True, final="In km."),
    )
    await client.send(
        type="chat", content="use metric", when_busy="steer", agent_mode=True
    )
    queued = (await client.until_label("pending_input"))[-1]
    assert (queued["mode"], queued["state"], queued["agent_mode"]) == (
        "steer",
        "queued",
        True,
    )
    slow.release.set()
    rest = await client.run()
    assert labels(rest) == [
        "tool_complete:slow",
        "agent_interjection",
        "agent_observe",
        "agent_turn_start",
        "agent_reason",
        *END,
    ]
    told = rest[1]
    assert (told["content"], told["input_id"], told["step"]) == (
        "use metric",
        queued["input_id"],
        1,
    )
    assert [said_by_user(r, "use metric") for r in llm.requests] == [0, 0, 1, 1]


async def test_an_interrupt_stops_the_run_and_runs_first(
    start_server: StartServer,
) -> None:
    """`interrupt`: the run stops after its current phase, and the new
    message runs before one queued earlier."""
    _, llm, slow, client = await working(
        start_server,
        *slow_step(),
        "Interrupting answer.",
        "Queued answer.",
    )
    await client.send(type="chat", content="later", when_busy="queue")
    await client.until_label("pending_input")
    await client.send(type="chat", content="now instead", when_busy="interrupt")
    interrupt = (await client.until_label("pending_input"))[-1]
    assert (interrupt["mode"], interrupt["position"]) == ("interrupt", 0)
    slow.release.set()
    stopped = await client.run()
    assert labels(stopped)[-4:] == [
        "tool_complete:slow",
        "agent_stopped",
        "agent_completion",
        "response_complete",
    ]
    assert stopped[-2]["reason"] == "stopped"
    then = await client.run()
    assert then[0]["content"] == "now instead"
    last = await client.run()
    assert last[0]["content"] == "later"
    asked = [r.messages[-1].content for r in llm.requests[-2:]]
    assert asked == ["now instead", "later"]


async def test_a_held_message_can_be_cancelled(start_server: StartServer) -> None:
    """`cancel_input` drops a held message unused; a second cancel is refused."""
    _, llm, slow, client = await working(
        start_server, *slow_step(observe(should_continue=False, final="Done."))
    )
    await client.send(type="chat", content="never mind", when_busy="queue")
    queued = (await client.until_label("pending_input"))[-1]
    await client.send(type="cancel_input", input_id=queued["input_id"])
    cancelled = (await client.until_label("pending_input"))[-1]
    assert (cancelled["state"], cancelled["reason"]) == (
        "cancelled",
        "cancelled by the user",
    )
    await client.send(type="cancel_input", input_id=queued["input_id"])
    refused = (await client.until_label("error:no_pending_input"))[-1]
    assert "no held message" in refused["message"]
    slow.release.set()
    await client.run()
    assert all(said_by_user(r, "never mind") == 0 for r in llm.requests)


async def test_without_when_busy_a_message_is_still_refused(
    start_server: StartServer,
) -> None:
    """The default stays a clear `busy` refusal; a steer to a plain run is
    queued instead (it has no phase boundary)."""
    _, _, slow, client = await working(
        start_server, *slow_step(observe(should_continue=False, final="Done."))
    )
    await client.send(type="chat", content="hello?")
    busy = (await client.until_label("error:busy"))[-1]
    assert "a run is already active" in busy["message"]
    slow.release.set()
    await client.run()


async def test_held_messages_survive_a_restart(tmp_path: Path) -> None:
    """A steer and a queued message sent while a run waits for an answer
    outlive the server: after it, the steer is told once and the queued
    message runs."""
    settings = make_settings(database_url=f"sqlite:///{tmp_path / 'loopwire.db'}")
    asking = ScriptedLLM(reason("ask"), calls(("request_input", {"question": "Unit?"})))
    async with AsyncExitStack() as stack:
        app = create_app(settings, llm=asking, registry=test_registry())
        server = await stack.enter_async_context(serving(app, settings=settings))
        client, ready = await Harness(server, stack).ready_client()
        await client.send(type="chat", content="convert", agent_mode=True)
        await client.until_label("agent_request_input")
        await client.send(type="chat", content="be brief", when_busy="steer")
        await client.until_label("pending_input")
        await client.send(type="chat", content="then this", when_busy="queue")
        await client.until_label("pending_input")
    again = ScriptedLLM(
        observe("km", should_continue=False, final="16 km."), "And this."
    )
    async with AsyncExitStack() as stack:
        app = create_app(settings, llm=again, registry=test_registry())
        server = await stack.enter_async_context(serving(app, settings=settings))
        client, _ = await Harness(server, stack).ready_client(
            f"session_id={ready['session_id']}"
        )
        await client.send(type="agent_user_input", content="km")
        first = await client.until_label("response_complete")
        second = await client.run()
    assert "agent_interjection" in labels(first)
    assert second[0]["state"] == "started" and second[0]["content"] == "then this"
    assert [said_by_user(r, "be brief") for r in again.requests] == [1, 1]
    assert [said_by_user(r, "then this") for r in again.requests] == [0, 1]


async def test_over_http_a_held_message_is_a_202(start_server: StartServer) -> None:
    """`POST /api/agent` with `when_busy` while a run works answers 202
    with the held input; it then runs like one sent over the socket."""
    slow = SlowTool()
    llm = ScriptedLLM(
        *slow_step(observe(should_continue=False, final="Done.")),
        reason("Add them.", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe("It is 5.", should_continue=False, final="5"),
    )
    harness = await start_server(llm, test_registry(slow))
    client, ready = await harness.ready_client()
    await client.send(type="chat", content="first", agent_mode=True)
    await slow.started.wait()
    body = {
        "query": "after that",
        "conversation_id": ready["session_id"],
        "when_busy": "queue",
        "stream": False,
    }
    async with httpx.AsyncClient(base_url=harness.server.url(""), timeout=30) as http:
        held = await http.post("/api/agent", json=body)
        busy = await http.post("/api/agent", json={**body, "when_busy": "refuse"})
    assert held.status_code == 202
    answer = held.json()
    assert (answer["conversation_id"], answer["mode"], answer["state"]) == (
        ready["session_id"],
        "queue",
        "queued",
    )
    assert (busy.status_code, busy.json()["error_type"]) == (409, "busy")
    slow.release.set()
    await client.run()
    then = await client.run()
    assert (then[0]["input_id"], then[0]["state"]) == (answer["input_id"], "started")
    assert [said_by_user(r, "after that") for r in llm.requests] == [0, 0, 0, 1, 1, 1]


def test_an_interjection_is_the_users_words_but_no_new_request() -> None:
    """A provider is sent an interjection as a plain user message (its mark
    is loopwire's own); the offline model reads past it to the request."""
    add = ToolCall(id="call_1", name="add", arguments='{"expression": "2+3"}')
    history = [
        Message.user("What is 2+3?"),
        Message.assistant(None, [add]),
        Message.tool("call_1", "add", '{"expression": "2+3", "result": 5.0}'),
        Message.interjection("in words, please"),
    ]
    sent = payload(LLMRequest(messages=history), default_model="m")["messages"]
    assert sent[-1] == {"role": "user", "content": "in words, please"}
    seen = read(history)
    assert (seen.request, len(seen.results), seen.latest_is_result) == (
        "What is 2+3?",
        1,
        True,
    )
