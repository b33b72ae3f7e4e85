"""An MCP server's questions during a tool call (elicitation), put to the
person as a durable pause.

A real MCP server written with the official SDK (`mcp_servers/cafe_server.py`)
runs as a subprocess; loopwire's run shows its question as an
`agent_request_input` naming the server, checks the answer against the form,
and hands the server `accept` with the values, `decline` or `cancel`. At
protocol 2026-07-28 the question comes back inside the call's result; at
2025-11-25 the server sends it as a request of its own (and may ask for a
link to be opened). A question pending when loopwire stops is asked again
by the next server on the same database, and the call made again gets the
answer without asking twice.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_types import ElicitRequestFormParams, ErrorData
from websockets.asyncio.client import connect

from backend.answer_forms import Unsupported
from backend.app import create_app
from backend.pauses import Pauses, wait_unpaused
from backend.tools.elicitation import Elicitation, ElicitationReply
from backend.tools.mcp_elicitation import Routes, form
from tests.conftest import StartServer, make_settings
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry
from tests.live_server import serving
from tests.ws_client import Client, Frame, labels

CAFE = Path(__file__).resolve().parent / "mcp_servers" / "cafe_server.py"
ORDER_FORM = {
    "type": "object",
    "properties": {
        "size": {
            "type": "string",
            "enum": ["small", "large"],
            "title": "Size",
            "description": "How big a cup",
        },
        "cups": {
            "type": "integer",
            "minimum": 1,
            "maximum": 4,
            "title": "Cups",
            "description": "How many cups",
        },
        "oat_milk": {
            "type": "boolean",
            "default": False,
            "title": "Oat Milk",
            "description": "With oat milk",
        },
    },
    "required": ["size", "cups"],
    "additionalProperties": False,
}
ASKED_BY = "the MCP server 'cafe'"
END = ["chat_response", "agent_completion", "response_complete"]


def cafe_config(tmp_path: Path, protocol: str = "auto") -> str:
    """The cafe server (every tool read-only: it runs without approval and
    again after a restart), logging its calls to `tmp_path / calls.log`."""
    server = {
        "command": sys.executable,
        "args": [str(CAFE)],
        "env": {"CAFE_LOG": str(tmp_path / "calls.log")},
        "protocol": protocol,
        "effects": {"default": {"read_only": True}},
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"cafe": server}}), encoding="utf-8")
    return str(path)


def server_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def ordering(tool: str = "cafe__order", final: str = "Ordered.") -> list[object]:
    return [
        reason("order", tools=[tool]),
        calls((tool, {})),
        observe("done", should_continue=False, final=final),
    ]


def tool_results(llm: ScriptedLLM, request: int) -> list[str]:
    return [m.content for m in llm.requests[request].messages if m.role == "tool"]


async def asked(client: Client) -> Frame:
    """Start an ordering run; the server's question, after its tool's start."""
    await client.send(type="chat", content="order me a coffee", agent_mode=True)
    frames = await client.until_label("agent_request_input")
    assert labels(frames)[-2:] == ["tool_start:cafe__order", "agent_request_input"]
    return frames[-1]


async def reply(client: Client, question: Frame, **fields: Any) -> None:
    await client.send(
        type="agent_user_input", question_id=question["question_id"], **fields
    )


# ------------------------------------------------------------ end to end


async def test_a_form_is_asked_checked_and_accepted(
    start_server: StartServer, tmp_path: Path
) -> None:
    """The server's form is the run's question, naming the server; an answer
    outside the form is refused and the question waits; the fitting answer
    reaches the server, whose result the model reads."""
    llm = ScriptedLLM(*ordering())
    harness = await start_server(llm, test_registry(), mcp_config=cafe_config(tmp_path))
    client, _ = await harness.ready_client()
    question = await asked(client)
    assert question["question"] == "What would you like?"
    assert question["asked_by"] == ASKED_BY
    assert question["answer_schema"] == ORDER_FORM
    assert question["url"] is None

    await reply(client, question, content='{"size": "huge", "cups": 2}')
    error = await client.recv()
    assert (error["type"], error["error_type"], error["message"]) == (
        "error",
        "invalid_answer",
        "field 'size' must be one of: small, large",
    )
    await reply(client, question, content='{"size": "large", "cups": 2}')
    frames = await client.run()
    assert labels(frames)[0] == "tool_complete:cafe__order"
    chosen = '{"size":"large","cups":2,"oat_milk":false}'
    assert frames[0]["result"] == f"accept {chosen}"
    assert tool_results(llm, 2) == [f"accept {chosen}"]
    assert labels(frames)[-3:] == END
    assert server_calls(tmp_path) == ["order"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_form_declined_or_dismissed(
    start_server: StartServer, tmp_path: Path, action: str
) -> None:
    """Declining or dismissing the question is what the server hears."""
    llm = ScriptedLLM(*ordering())
    harness = await start_server(llm, test_registry(), mcp_config=cafe_config(tmp_path))
    client, _ = await harness.ready_client()
    question = await asked(client)
    await reply(client, question, action=action)
    frames = await client.run()
    assert frames[0]["result"] == action
    assert tool_results(llm, 2) == [action]


async def test_an_answer_with_content_and_a_decline_is_refused(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A decline carries no content: one that does is an invalid message."""
    llm = ScriptedLLM(*ordering())
    harness = await start_server(llm, test_registry(), mcp_config=cafe_config(tmp_path))
    client, _ = await harness.ready_client()
    question = await asked(client)
    await reply(client, question, action="decline", content="no thanks")
    error = await client.recv()
    assert error["error_type"] == "invalid_message"
    assert "has no content" in error["message"]
    await reply(client, question, action="decline")
    assert (await client.run())[0]["result"] == "decline"


async def test_the_old_protocol_asks_by_request(
    start_server: StartServer, tmp_path: Path
) -> None:
    """At protocol 2025-11-25 the server asks with a request of its own
    during the call (`ctx.elicit`): the same question, the same answer."""
    llm = ScriptedLLM(*ordering("cafe__order_old_style"))
    config = cafe_config(tmp_path, protocol="legacy")
    harness = await start_server(llm, test_registry(), mcp_config=config)
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="order me a coffee", agent_mode=True)
    question = (await client.until_label("agent_request_input"))[-1]
    assert (question["asked_by"], question["answer_schema"]) == (ASKED_BY, ORDER_FORM)
    await reply(client, question, content='{"size": "small", "cups": 1}')
    frames = await client.run()
    chosen = '{"size":"small","cups":1,"oat_milk":false}'
    assert frames[0]["result"] == f"accept {chosen}"


async def test_a_link_to_open(start_server: StartServer, tmp_path: Path) -> None:
    """URL mode: the question carries the page to open and no form; accept
    once done there."""
    llm = ScriptedLLM(*ordering("cafe__sign_in"))
    config = cafe_config(tmp_path, protocol="legacy")
    harness = await start_server(llm, test_registry(), mcp_config=config)
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="sign me in", agent_mode=True)
    question = (await client.until_label("agent_request_input"))[-1]
    assert question["question"] == "Sign in to the cafe to see your loyalty points."
    assert question["url"] == "https://cafe.example/sign-in"
    assert question["answer_schema"] is None
    await reply(client, question)
    assert (await client.run())[0]["result"] == "accept"


async def test_a_form_loopwire_cannot_show_is_refused_to_the_server(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A multi-select is not asked: the server is told why, and its tool's
    failure is the call's result."""
    llm = ScriptedLLM(*ordering("cafe__survey"))
    config = cafe_config(tmp_path, protocol="legacy")
    harness = await start_server(llm, test_registry(), mcp_config=config)
    client, _ = await harness.ready_client()
    frames = await client.chat("take the survey", agent_mode=True)
    assert "agent_request_input" not in labels(frames)
    failed = next(f for f in frames if f["type"] == "tool_error")
    assert "asks for several choices at once" in failed["error"]


async def test_stop_after_step_waits_for_the_answer(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A graceful stop while the server asks keeps the question: the answer
    reaches the server, its call ends, and the run stops after the step."""
    llm = ScriptedLLM(*ordering()[:2])
    harness = await start_server(llm, test_registry(), mcp_config=cafe_config(tmp_path))
    client, _ = await harness.ready_client()
    question = await asked(client)
    await client.send(type="agent_control", action="stop_after_step")
    await reply(client, question, content='{"size": "small", "cups": 1}')
    frames = await client.run()
    assert labels(frames) == [
        "tool_complete:cafe__order",
        "agent_stopped",
        "agent_completion",
        "response_complete",
    ]
    chosen = '{"size":"small","cups":1,"oat_milk":false}'
    assert frames[0]["result"] == f"accept {chosen}"
    assert (frames[1]["mode"], frames[2]["reason"]) == ("after_step", "stopped")


# ------------------------------------------------------------ across a restart


async def test_a_question_pending_at_a_restart_is_answered_once(
    tmp_path: Path,
) -> None:
    """Loopwire stops while the server's question waits. The next loopwire on
    the same database shows the question again; its answer goes to the call
    made again, whose repeated question is not asked twice."""
    db = f"sqlite:///{tmp_path / 'cafe.db'}"
    settings = make_settings(database_url=db, mcp_config=cafe_config(tmp_path))
    first = ScriptedLLM(*ordering()[:2])
    app = create_app(settings, llm=first, registry=test_registry())
    async with (
        serving(app, settings=settings) as server,
        connect(server.url("/ws", scheme="ws")) as connection,
    ):
        client = Client(connection)
        session = (await client.recv())["session_id"]
        question = await asked(client)

    again = ScriptedLLM(*ordering()[2:])
    app = create_app(settings, llm=again, registry=test_registry())
    query = f"/ws?session_id={session}&last_seq=0"
    async with (
        serving(app, settings=settings) as server,
        connect(server.url(query, scheme="ws")) as connection,
    ):
        client = Client(connection)
        assert (await client.recv())["resumed"] is True
        replayed = (await client.until_label("agent_request_input"))[-1]
        assert replayed["question_id"] == question["question_id"]
        assert replayed["asked_by"] == ASKED_BY
        await reply(client, question, content='{"size": "large", "cups": 3}')
        frames = await client.run()
    assert "agent_request_input" not in labels(frames)
    chosen = '{"size":"large","cups":3,"oat_milk":false}'
    assert frames[0]["result"] == f"accept {chosen}"
    assert tool_results(again, 0) == [f"accept {chosen}"]
    assert labels(frames)[-3:] == END
    assert server_calls(tmp_path) == ["order"]  # the first call never finished


# ------------------------------------------------------------ the parts


def test_an_mcp_form_becomes_an_answer_form() -> None:
    """Titled choices become plain ones, `format` a hint; the rest is kept."""
    requested = {
        "type": "object",
        "properties": {
            "tier": {
                "type": "string",
                "oneOf": [
                    {"const": "basic", "title": "Basic"},
                    {"const": "pro", "title": "Pro"},
                ],
            },
            "email": {"type": "string", "format": "email", "description": "Yours"},
        },
        "required": ["tier", "gone"],
    }
    assert form(requested) == {
        "type": "object",
        "properties": {
            "tier": {"type": "string", "enum": ["basic", "pro"]},
            "email": {"type": "string", "description": "Yours (email)"},
        },
        "required": ["tier"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("requested", "problem"),
    [
        ({"type": "object"}, "a form must be an object with properties"),
        (
            {"type": "object", "properties": {"n": {"type": "array"}}},
            "field 'n' asks for several choices at once",
        ),
        (
            {"type": "object", "properties": {"n": {"type": "null"}}},
            "field 'n' has type 'null'",
        ),
    ],
)
def test_a_form_that_cannot_be_shown(requested: dict[str, Any], problem: str) -> None:
    """What cannot be shown is named."""
    with pytest.raises(Unsupported, match=problem):
        form(requested)


async def test_an_old_style_question_with_two_calls_in_flight_is_refused() -> None:
    """Before 2026-07-28 nothing says which call asks: with two in flight,
    the server is told so and nobody is asked."""
    routes = Routes("cafe")
    asked: list[Elicitation] = []
    started = [asyncio.Event(), asyncio.Event()]
    release = asyncio.Event()

    async def ask(elicitation: Elicitation) -> ElicitationReply:
        asked.append(elicitation)
        return ElicitationReply("accept", {})

    async def busy(index: int) -> str:
        started[index].set()
        await release.wait()
        return "done"

    running = [asyncio.create_task(routes.call(ask, busy(i))) for i in (0, 1)]
    for event in started:
        await event.wait()
    params = ElicitRequestFormParams(message="?", requested_schema=ORDER_FORM)
    answer = await routes.callback(None, params)  # type: ignore[arg-type]
    release.set()
    assert await asyncio.gather(*running) == ["done", "done"]
    assert asked == []
    assert isinstance(answer, ErrorData)
    assert answer.message == (
        "loopwire cannot ask: 2 of its calls are in flight and its protocol "
        "does not say which one asks"
    )


async def test_a_pause_stops_the_clock() -> None:
    """Time in a pause does not count against the limit: work that waits in
    a pause past the limit is not timed out, and one that does not pause is."""
    pauses = Pauses()
    loop = asyncio.get_running_loop()
    held = loop.create_future()
    pause = pauses.paused()
    pause.__enter__()
    waiting = asyncio.ensure_future(wait_unpaused(held, 0.05, pauses))
    done, _ = await asyncio.wait({waiting}, timeout=0.2)
    assert not done  # four times the limit has passed, all of it paused
    pause.__exit__(None, None, None)
    held.set_result(None)
    assert await waiting is True
    assert pauses.total_s() >= 0.2

    never = loop.create_future()
    assert await wait_unpaused(never, 0.01, pauses) is False


async def test_stop_now_while_the_server_asks(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Stop now cancels the call that asks: the run ends at once, stopped,
    and the server never gets an answer."""
    llm = ScriptedLLM(*ordering()[:2])
    harness = await start_server(llm, test_registry(), mcp_config=cafe_config(tmp_path))
    client, _ = await harness.ready_client()
    await asked(client)
    await client.send(type="agent_control", action="stop")
    frames = await client.run()
    assert labels(frames)[0] == "tool_error:cafe__order:cancelled"
    assert labels(frames)[-2:] == ["agent_completion", "response_complete"]
    assert frames[-2]["reason"] == "stopped"
    assert server_calls(tmp_path) == []
