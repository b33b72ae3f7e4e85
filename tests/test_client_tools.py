"""Client tools: tools a client declares for a run (`chat.client_tools`, an
AG-UI client's frontend tools) and runs itself. The model calls them like
any tool; the run waits for the client's `tool_result` as it waits for an
approval, durably."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
from ag_ui.core import RunFinishedEvent

from backend.app import create_app
from backend.llm.base import Message
from tests.conftest import Harness, StartServer, make_settings
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry
from tests.js_clients import needs_node, run_node
from tests.live_server import serving
from tests.test_ag_ui import (
    AUTH,
    END,
    REASONING,
    START,
    TEXT,
    TOKEN,
    TOOL_CALL,
    ag_ui,
    client,
    conversation,
    kinds,
    one_step,
    plain,
    serve,
)
from tests.test_agent_api import events, frame_labels, read_until
from tests.ws_client import Client, labels

LOCATE = {
    "name": "get_location",
    "description": "Where the user is, from the browser.",
    "parameters": {
        "type": "object",
        "properties": {"precision": {"type": "string"}},
    },
}
RUN_END = ["chat_response", "agent_completion", "response_complete"]


def locating(*after: Any) -> list[Any]:
    """A react run that calls the client's `get_location`, then `after`."""
    return [
        reason("Ask the browser.", tools=["get_location"]),
        calls(("get_location", {"precision": "city"})),
        *after,
    ]


def tool_messages(llm: ScriptedLLM, call: int) -> list[Message]:
    return [m for m in llm.requests[call].messages if m.role == "tool"]


async def located(
    start_server: StartServer, *after: Any, **settings: Any
) -> tuple[Harness, ScriptedLLM, Client, list[dict[str, Any]]]:
    """A WebSocket run that waits for the client's `get_location` result."""
    llm = ScriptedLLM(*locating(*after))
    harness = await start_server(llm, test_registry(), **settings)
    ws, _ready = await harness.ready_client()
    await ws.send(
        type="chat", content="Where am I?", agent_mode=True, client_tools=[LOCATE]
    )
    return harness, llm, ws, await ws.until_label("client_tool_call:get_location")


async def test_a_client_tool_call_waits_for_the_clients_result(
    start_server: StartServer,
) -> None:
    """The model is offered the client's tool; its call is sent as
    `client_tool_call`, and the client's result is the call's result."""
    _, llm, ws, before = await located(
        start_server, observe("Lyon.", should_continue=False, final="You are in Lyon.")
    )
    assert labels(before) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:get_location",
        "client_tool_call:get_location",
    ]
    asked = before[-1]
    assert asked["tool_call_id"] == before[-2]["tool_call_id"]
    assert (asked["arguments"], asked["step"], asked["timeout_s"]) == (
        {"precision": "city"},
        1,
        300.0,
    )
    offered = {tool.name: tool for tool in llm.requests[1].tools}
    assert offered["get_location"].parameters == LOCATE["parameters"]
    assert {"add", "request_input"} <= set(offered)

    await ws.send(
        type="tool_result", tool_call_id=asked["tool_call_id"], content="Lyon"
    )
    rest = await ws.run()
    assert labels(rest) == ["tool_complete:get_location", "agent_observe", *RUN_END]
    assert rest[0]["result"] == "Lyon"
    assert [m.content for m in tool_messages(llm, 2)] == ["Lyon"]
    assert rest[-3]["message"] == "You are in Lyon."


async def test_a_failed_client_call_is_a_tool_error_the_model_sees(
    start_server: StartServer,
) -> None:
    """`is_error` makes the client's text the call's error."""
    _, llm, ws, before = await located(
        start_server, observe("No.", should_continue=False, final="I can't tell.")
    )
    call_id = before[-1]["tool_call_id"]
    await ws.send(
        type="tool_result",
        tool_call_id=call_id,
        content="the user denied location access",
        is_error=True,
    )
    rest = await ws.run()
    assert labels(rest) == [
        "tool_error:get_location:failed",
        "agent_observe",
        *RUN_END,
    ]
    assert rest[0]["error"] == "the user denied location access"
    assert [m.content for m in tool_messages(llm, 2)] == [
        "Error (failed): the user denied location access"
    ]


async def test_what_does_not_fit_the_wait_is_refused_and_it_goes_on_waiting(
    start_server: StartServer,
) -> None:
    """An answer, another call's result or a second result are refused
    clearly; the wait goes on and the right result settles it."""
    _, _, ws, before = await located(
        start_server, observe("Lyon.", should_continue=False, final="Lyon.")
    )
    call_id = before[-1]["tool_call_id"]
    await ws.send(type="agent_user_input", content="Lyon")
    answer = await ws.until_label("error:no_pending_input")
    assert answer[-1]["message"] == (
        "the run waits for the result of client tool 'get_location' (call "
        f"{call_id!r}): send it as tool_result, not as an answer"
    )
    await ws.send(type="tool_result", tool_call_id="call_other", content="x")
    other = await ws.until_label("error:no_pending_input")
    assert other[-1]["message"] == (
        f"tool call 'call_other' is not the pending one ({call_id!r}); it may "
        "have timed out or been answered"
    )
    await ws.send(type="tool_result", tool_call_id=call_id, content="Lyon")
    rest = await ws.run()
    assert labels(rest) == ["tool_complete:get_location", "agent_observe", *RUN_END]
    await ws.send(type="tool_result", tool_call_id=call_id, content="Lyon")
    late = await ws.until_label("error:no_pending_input")
    assert late[-1]["message"] == "no client tool call is waiting for a result"


async def test_a_result_is_not_an_answer_to_a_question(
    start_server: StartServer,
) -> None:
    """While a question waits, a `tool_result` is refused and says what
    the run waits for."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("km", should_continue=False, final="16 km"),
    )
    harness = await start_server(llm, test_registry())
    ws, _ = await harness.ready_client()
    await ws.send(
        type="chat", content="convert", agent_mode=True, client_tools=[LOCATE]
    )
    asked = await ws.until_label("agent_request_input")
    await ws.send(
        type="tool_result", tool_call_id=asked[-1]["question_id"], content="km"
    )
    refused = await ws.until_label("error:no_pending_input")
    assert refused[-1]["message"] == (
        "no client tool call is waiting for a result: the run waits for the "
        "answer to a question (agent_user_input)"
    )
    await ws.send(type="agent_user_input", content="km")
    assert labels(await ws.run())[-1] == "response_complete"


async def test_bad_client_tools_are_refused_before_a_run(
    start_server: StartServer,
) -> None:
    """A name the server's tools use, a name a provider would refuse, a
    schema that is not an object's, or a name twice: no run starts."""
    harness = await start_server(ScriptedLLM(), test_registry())
    ws, ready = await harness.ready_client()
    bad = {
        "the name(s) add are taken by the server's tools": [{"name": "add"}],
        "String should match pattern": [{"name": "get location"}],
        "parameters must be a JSON Schema of an object": [
            {"name": "x", "parameters": {"type": "string"}}
        ],
        "client_tools names a tool twice: x": [{"name": "x"}, {"name": "x"}],
    }
    for expected, tools in bad.items():
        await ws.send(type="chat", content="hi", agent_mode=True, client_tools=tools)
        refused = await ws.until_label("error:invalid_message")
        assert expected in refused[-1]["message"], refused[-1]["message"]
    session = harness.service.sessions.get(ready["session_id"])
    assert session is None or len(session.history) == 0


async def test_stop_while_waiting_closes_the_call(start_server: StartServer) -> None:
    """Stop ends a run waiting for a client's result: the call is cancelled,
    and a late result is refused."""
    _, _, ws, before = await located(start_server)
    await ws.send(type="agent_control", action="stop")
    rest = await ws.run()
    assert labels(rest) == [
        "tool_error:get_location:cancelled",
        "agent_stopped",
        "agent_completion",
        "response_complete",
    ]
    call_id = before[-1]["tool_call_id"]
    await ws.send(type="tool_result", tool_call_id=call_id, content="Lyon")
    late = await ws.until_label("error:no_pending_input")
    assert late[-1]["message"] == "no client tool call is waiting for a result"


async def test_no_result_in_time_is_a_timeout_the_model_sees(
    start_server: StartServer,
) -> None:
    """A client that never answers: the call times out and the run goes on."""
    _, llm, ws, _ = await located(
        start_server,
        observe("No location.", should_continue=False, final="I can't tell."),
        request_input_timeout_s=0.05,
    )
    rest = await ws.run()
    assert labels(rest) == [
        "tool_error:get_location:timeout",
        "agent_observe",
        *RUN_END,
    ]
    assert [m.content for m in tool_messages(llm, 2)] == [
        "Error (timeout): no result came from the client within 0.05 seconds"
    ]


async def test_a_client_tool_over_http_returns_its_result_mid_stream(
    start_server: StartServer,
) -> None:
    """`POST /api/agent` declares the tool; the result posted to
    `tool-results/{id}` resumes the stream; a wrong id is a 409."""
    llm = ScriptedLLM(*locating(observe("Lyon.", should_continue=False, final="Lyon.")))
    harness = await start_server(llm, test_registry(), auth_token=TOKEN)
    body = {"query": "Where am I?", "client_tools": [LOCATE]}
    async with (
        client(harness) as http,
        http.stream("POST", "/api/agent", json=body) as response,
    ):
        stream = events(response)
        before = await read_until(stream, "client_tool_call:get_location")
        asked = before[-1].frame
        base = f"/api/conversations/{asked['session_id']}/tool-results"
        wrong = await http.post(f"{base}/call_other", json={"content": "x"})
        returned = await http.post(
            f"{base}/{asked['tool_call_id']}", json={"content": "Lyon"}
        )
        after = [event async for event in stream]
    assert (wrong.status_code, wrong.json()["error_type"]) == (409, "no_pending_input")
    assert returned.json() == {
        "tool_call_id": asked["tool_call_id"],
        "status": "returned",
    }
    assert frame_labels(before + after)[3:] == [
        "tool_start:get_location",
        "client_tool_call:get_location",
        "tool_complete:get_location",
        "agent_observe",
        *RUN_END,
        "done",
    ]
    assert after[-1].frame["tools_used"] == ["get_location"]


# ------------------------------------------------------------ AG-UI


def frontend_input(thread: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A `RunAgentInput` declaring the frontend tool `get_location`."""
    return {
        "threadId": thread,
        "runId": uuid.uuid4().hex,
        "messages": messages,
        "tools": [LOCATE],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }


ASK = {"id": "u1", "role": "user", "content": "Where am I?"}


def answered(call_id: str, result: str) -> list[dict[str, Any]]:
    """The history an AG-UI client sends back with its tool's result."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_location", "arguments": '{"precision": "city"}'},
    }
    return [
        ASK,
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": call_id, "content": result},
    ]


AWAITS = [*START, *TOOL_CALL, "STEP_FINISHED", "RUN_FINISHED"]
RESUMED = [
    "RUN_STARTED",
    "STEP_STARTED",
    *REASONING,  # observe, with the final answer
    *TEXT,
    *END,
]


async def test_a_frontend_tool_call_ends_the_ag_ui_run_and_its_result_resumes_it(
    start_server: StartServer,
) -> None:
    """The call streams as a tool call and ends the AG-UI run; the next
    input, ending with the tool message, goes on with the same run."""
    llm = ScriptedLLM(*locating(observe("Lyon.", should_continue=False, final="Lyon.")))
    harness = await start_server(llm, test_registry(), auth_token=TOKEN)
    async with client(harness) as http:
        first = await ag_ui(http, frontend_input(str(uuid.uuid4()), [ASK]))
        thread = conversation(first)
        finished = first[-1]
        assert isinstance(finished, RunFinishedEvent) and finished.result is not None
        waiting = finished.result["loopwire"]["awaiting_tool_result"]
        second = await ag_ui(
            http, frontend_input(thread, answered(waiting["tool_call_id"], "Lyon"))
        )
    assert kinds(first) == AWAITS
    assert (waiting["tool_name"], waiting["arguments"]) == (
        "get_location",
        {"precision": "city"},
    )
    assert kinds(second) == RESUMED
    assert (
        second[0].metadata["loopwire"]["run_id"]
        == first[0].metadata["loopwire"]["run_id"]
    )  # type: ignore[attr-defined]
    assert [m.content for m in tool_messages(llm, 2)] == ["Lyon"]


async def test_a_tool_message_nothing_waits_for_is_refused(
    start_server: StartServer,
) -> None:
    """A tool result for a thread loopwire does not know is a 404; for one
    whose run does not wait, a 409 that says so."""
    harness = await serve(start_server, *one_step())
    async with client(harness) as http:
        done = await ag_ui(http, frontend_input(str(uuid.uuid4()), [ASK]))
        idle = await http.post(
            "/api/ag-ui", json=frontend_input(conversation(done), answered("c9", "x"))
        )
        unknown = await http.post(
            "/api/ag-ui", json=frontend_input(uuid.uuid4().hex, answered("c9", "x"))
        )
    assert (idle.status_code, idle.json()["message"]) == (
        409,
        "no client tool call is waiting for a result",
    )
    assert (unknown.status_code, unknown.json()["error_type"]) == (404, "not_found")


async def test_a_frontend_tool_wait_survives_a_restart(tmp_path: Path) -> None:
    """A run waiting for a frontend tool's result outlives its server."""
    url = f"sqlite:///{tmp_path / 'loopwire.db'}"
    settings = make_settings(database_url=url, auth_token=TOKEN)
    app = create_app(settings, llm=ScriptedLLM(*locating()), registry=test_registry())
    async with (
        serving(app, settings=settings) as server,
        httpx.AsyncClient(base_url=server.url(""), timeout=30, headers=AUTH) as http,
    ):
        first = await ag_ui(http, frontend_input(str(uuid.uuid4()), [ASK]))
    finished = first[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.result is not None
    call_id = finished.result["loopwire"]["awaiting_tool_result"]["tool_call_id"]

    again = ScriptedLLM(observe("Lyon.", should_continue=False, final="Lyon."))
    app = create_app(settings, llm=again, registry=test_registry())
    async with (
        serving(app, settings=settings) as server,
        httpx.AsyncClient(base_url=server.url(""), timeout=30, headers=AUTH) as http,
    ):
        second = await ag_ui(
            http, frontend_input(conversation(first), answered(call_id, "Lyon"))
        )
    assert kinds(second) == RESUMED
    assert [m.content for m in tool_messages(again, 0)] == ["Lyon"]
    observed = again.requests[0]
    # observe lets the model call nothing, and offers the run's tools, the
    # client's among them (the same list every call sends: prompt caching)
    assert observed.tool_choice == "none"
    assert [tool.name for tool in observed.tools] == [
        "add",
        "fail",
        "slow",
        "get_location",
        "request_input",
    ]
    assert second[-1].result["answer"] == "Lyon."  # type: ignore[attr-defined]


FRONTEND_SCRIPT = """
import { HttpAgent } from "@ag-ui/client";

const headers = { Authorization: `Bearer ${process.env.TOKEN}` };
const agent = new HttpAgent({ url: process.env.AG_UI_URL, headers });
const tools = [JSON.parse(process.env.TOOL)];
const runs = [];

async function run() {
  const seen = [];
  await agent.runAgent({ tools }, {
    onEvent: ({ event }) => { seen.push(event.type); },
    onRunStartedEvent: ({ event }) => {
      agent.threadId = event.metadata.loopwire.conversation_id;
    },
  });
  runs.push(seen);
}

agent.addMessage({ id: "u1", role: "user", content: "Where am I?" });
await run();
const asked = agent.messages.find((m) => m.role === "assistant" && m.toolCalls);
const [call] = asked.toolCalls;
agent.addMessage({ id: "t1", role: "tool", toolCallId: call.id, content: "Lyon" });
await run();
const answer = agent.messages.filter((m) => m.role === "assistant" && m.content);
console.log(JSON.stringify({
  runs,
  call: [call.function.name, JSON.parse(call.function.arguments)],
  answer: answer.map((m) => m.content),
  tools: agent.messages.filter((m) => m.role === "tool").length,
}));
"""


@needs_node
async def test_the_ag_ui_client_runs_a_frontend_tool(
    start_server: StartServer,
) -> None:
    """`@ag-ui/client`'s HttpAgent sees the call, sends its tool's result
    in the next run, and gets the answer (one tool message, its own)."""
    harness = await serve(
        start_server,
        *locating(observe("Lyon.", should_continue=False, final="You are in Lyon.")),
    )
    out = await run_node(
        FRONTEND_SCRIPT,
        {
            "AG_UI_URL": harness.server.url("/api/ag-ui"),
            "TOKEN": TOKEN,
            "TOOL": json.dumps(LOCATE),
        },
    )
    seen = json.loads(out)
    assert seen["runs"] == [plain(AWAITS), plain(RESUMED)]
    assert seen["call"] == ["get_location", {"precision": "city"}]
    assert seen["answer"] == ["You are in Lyon."]
    assert seen["tools"] == 1
