"""The Python client and `loopwire chat` answer an MCP server's questions,
against a live loopwire running the cafe MCP server (`mcp_servers/`): a
form answered, a question declined (from a handler, by `decline()`, by the
blocking client, with `/decline` at the CLI) or dismissed, and a page to
open."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest

from backend.protocol import AgentRequestInput, ToolComplete
from loopwire import AgentClient, Declined, Event, SyncAgentClient
from loopwire.exit_codes import ExitCode
from loopwire.transcript import answer_hint
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, Step, asks_which_unit, test_registry
from tests.test_cli import piped, run_chat
from tests.test_mcp_elicitation import (
    ASKED_BY,
    END,
    ORDER_FORM,
    cafe_config,
    ordering,
    tool_results,
)
from tests.ws_client import label

ASKED = [
    "agent_start",
    "agent_turn_start",
    "agent_reason",
    "tool_start:cafe__order",
    "agent_request_input",
]
AFTER = ["tool_complete:cafe__order", "agent_observe", *END]
SMALL = '{"size": "small", "cups": 1}'
CHOSEN = 'accept {"size":"small","cups":1,"oat_milk":false}'


def names(events: Sequence[Event]) -> list[str]:
    return [label(event.model_dump()) for event in events]


def url(harness: Harness) -> str:
    return harness.server.url("/ws", "ws")


async def cafe(
    start_server: StartServer,
    tmp_path: Path,
    tool: str = "cafe__order",
    *,
    stopped: bool = False,
) -> tuple[ScriptedLLM, Harness]:
    """A loopwire with the cafe server whose model calls `tool` once (and
    then observes, unless the run is `stopped` while the call waits)."""
    script = cast(list[Step], ordering(tool))  # its steps, typed loosely
    llm = ScriptedLLM(*(script[:2] if stopped else script))
    protocol = "auto" if tool == "cafe__order" else "legacy"
    config = cafe_config(tmp_path, protocol=protocol)
    return llm, await start_server(llm, test_registry(), mcp_config=config)


def result(events: Sequence[Event]) -> str:
    """The cafe tool's result, as the run reported it."""
    complete = next(e for e in events if isinstance(e, ToolComplete))
    assert isinstance(complete.result, str)
    return complete.result


# ------------------------------------------------------------ the client


async def test_on_question_answers_the_servers_form(
    start_server: StartServer, tmp_path: Path
) -> None:
    """The handler gets the question naming the server, with its form and no
    page; its answer reaches the server, and the model reads the result."""
    llm, harness = await cafe(start_server, tmp_path)
    asked: list[AgentRequestInput] = []

    def order(question: AgentRequestInput) -> str:
        asked.append(question)
        return SMALL

    async with AgentClient(url(harness), on_question=order) as client:
        result_ = await client.run("order me a coffee")
    assert [(q.asked_by, q.url, q.answer_schema) for q in asked] == [
        (ASKED_BY, None, ORDER_FORM)
    ]
    assert asked[0].question == "What would you like?"
    assert names(result_.events) == [*ASKED, *AFTER]
    assert result(result_.events) == CHOSEN
    assert tool_results(llm, 2) == [CHOSEN]
    assert result_.answer == "Ordered."


@pytest.mark.parametrize(
    ("declined", "action"), [(Declined(), "decline"), (Declined(True), "cancel")]
)
async def test_on_question_declines_or_dismisses(
    start_server: StartServer, tmp_path: Path, declined: Declined, action: str
) -> None:
    """A handler returning `Declined` declines (`dismiss`: cancels): that is
    what the server hears, and its result is what the model reads."""
    llm, harness = await cafe(start_server, tmp_path)
    async with AgentClient(url(harness), on_question=lambda q: declined) as client:
        result_ = await client.run("order me a coffee")
    assert names(result_.events) == [*ASKED, *AFTER]
    assert result(result_.events) == action
    assert tool_results(llm, 2) == [action]


async def test_decline_from_the_loop_body(
    start_server: StartServer, tmp_path: Path
) -> None:
    """`decline()` on the pending question sends the decline; the run goes
    on with the server's answer to it, and nothing is pending after."""
    llm, harness = await cafe(start_server, tmp_path)
    seen: list[Event] = []
    async with AgentClient(url(harness)) as client:
        async for event in client.chat("order me a coffee"):
            seen.append(event)
            if isinstance(event, AgentRequestInput):
                await client.decline()
                assert client.pending_question is None
    assert names(seen) == [*ASKED, *AFTER]
    assert result(seen) == "decline"
    assert tool_results(llm, 2) == ["decline"]


async def test_the_sync_client_dismisses(
    start_server: StartServer, tmp_path: Path
) -> None:
    """`SyncAgentClient.decline(dismiss=True)` cancels the server's question."""
    llm, harness = await cafe(start_server, tmp_path)

    def run() -> list[Event]:
        seen: list[Event] = []
        with SyncAgentClient(url(harness)) as client:
            for event in client.chat("order me a coffee"):
                seen.append(event)
                if isinstance(event, AgentRequestInput):
                    client.decline(dismiss=True)
        return seen

    seen = await asyncio.to_thread(run)
    assert names(seen) == [*ASKED, *AFTER]
    assert tool_results(llm, 2) == ["cancel"]


async def test_the_models_own_question_may_be_declined(
    start_server: StartServer,
) -> None:
    """A question the model asks (no `asked_by`) declined: the model hears so."""
    llm = ScriptedLLM(*asks_which_unit())
    harness = await start_server(llm, test_registry())
    asked: list[AgentRequestInput] = []

    def no(question: AgentRequestInput) -> Declined:
        asked.append(question)
        return Declined()

    async with AgentClient(url(harness), on_question=no) as client:
        result_ = await client.run("convert 10 miles")
    assert [(q.question, q.asked_by, q.url) for q in asked] == [
        ("Which unit?", None, None)
    ]
    assert tool_results(llm, 2) == ["(The user declined to answer this question.)"]
    assert result_.answer == "16.09 km"


# ------------------------------------------------------------ the CLI

HEAD = [
    "— step 1 / 10",
    "  [reason] I will work it out.",
    "  → cafe__order({})",
    "  ? the MCP server 'cafe' asks: What would you like?",
    '    answer as JSON: {"size": "small" | "large", "cups": integer 1…4, '
    '"oat_milk"?: true | false}',
]
PROMPT = "your answer (or /decline, /dismiss)> "


def ending(lines: list[str]) -> list[str]:
    """The transcript's last lines, the run's time and conversation left out."""
    assert re.fullmatch(r"\(done: finished, 1 step\(s\), \d+ ms\)", lines[-2])
    assert re.fullmatch(r"\(conversation [0-9a-f]{32}: .*\)", lines[-1])
    return lines[-6:-2]


FINISHED = ["  [observe] The result is in.", "", "assistant: Ordered."]


async def test_the_cli_answers_the_form_from_an_argument(
    start_server: StartServer, tmp_path: Path
) -> None:
    """`--answer` with the form's JSON: the transcript names the server and
    says how to decline; the server gets the values; the run finishes."""
    llm, harness = await cafe(start_server, tmp_path)
    status, lines, err = await run_chat(
        url(harness), "order me a coffee", answer=[SMALL]
    )
    assert (status, err) == (ExitCode.FINISHED, [])
    assert lines[:6] == [*HEAD, PROMPT + SMALL]
    shown = '  ← cafe__order: "accept {\\"size\\":\\"small\\",\\"cups\\":1,\\"oat_milk\\":false}"'
    assert ending(lines) == [shown, *FINISHED]
    assert tool_results(llm, 2) == [CHOSEN]


@pytest.mark.parametrize(
    ("line", "action"), [("/decline", "decline"), ("/dismiss", "cancel")]
)
async def test_the_cli_declines_from_an_argument(
    start_server: StartServer, tmp_path: Path, line: str, action: str
) -> None:
    """`--answer /decline` declines (`/dismiss`: cancels) the server's
    question; the run goes on to its end."""
    llm, harness = await cafe(start_server, tmp_path)
    status, lines, err = await run_chat(
        url(harness), "order me a coffee", answer=[line]
    )
    assert (status, err) == (ExitCode.FINISHED, [])
    assert lines[:6] == [*HEAD, PROMPT + line]
    assert ending(lines) == [f'  ← cafe__order: "{action}"', *FINISHED]
    assert tool_results(llm, 2) == [action]


async def test_the_cli_shows_the_page_and_takes_enter_as_done(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A page to open is shown with what to do; an empty line on stdin says
    it is done there: the server hears `accept`."""
    llm, harness = await cafe(start_server, tmp_path, "cafe__sign_in")
    with piped("\n") as stdin:
        status, lines, err = await run_chat(url(harness), "sign me in", stdin)
    assert (status, err) == (ExitCode.FINISHED, [])
    assert lines[2:6] == [
        "  → cafe__sign_in({})",
        "  ? the MCP server 'cafe' asks: Sign in to the cafe to see your "
        "loyalty points.",
        "    open https://cafe.example/sign-in and press Enter here once done there",
        "press Enter once done there (or /decline, /dismiss)> ",
    ]
    assert ending(lines) == ['  ← cafe__sign_in: "accept"', *FINISHED]
    assert tool_results(llm, 2) == ["accept"]


async def test_the_cli_without_input_names_who_asks(
    start_server: StartServer, tmp_path: Path
) -> None:
    """`--no-input`: the server's question stops the run (exit 7), as the
    model's does, and stderr says who asked."""
    _, harness = await cafe(start_server, tmp_path, stopped=True)
    status, lines, err = await run_chat(
        url(harness), "order me a coffee", no_input=True
    )
    assert status == ExitCode.NO_INPUT
    assert lines[:5] == HEAD
    assert err == [
        "loopwire: the MCP server 'cafe' asks “What would you like?” but "
        "--no-input is set; stopping the run"
    ]


def test_the_cli_says_what_a_forms_answer_looks_like() -> None:
    """Each kind of answer schema has its hint; free text has none."""
    hints = [
        answer_hint(schema)
        for schema in (
            {"type": "string", "enum": ["km", "mi"]},
            {"type": "boolean"},
            {"type": "number", "minimum": 0.5},
            {"type": "integer"},
            {"type": "string"},
            {},
        )
    ]
    assert hints == [
        "answer one of: km, mi",
        "answer true or false",
        "answer number 0.5…",
        "answer integer",
        "",
        "",
    ]
