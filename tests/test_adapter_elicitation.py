"""An MCP server's question during a tool call, through the HTTP adapters.

The cafe MCP server (`mcp_servers/cafe_server.py`) asks while loopwire runs
its tool. Each adapter shows the question with who asks and the page to
open, takes an answer that reaches the server (the tool's result is
`accept {...}`), and takes a refusal (`decline` / `cancel`): AG-UI as the
interrupt's `metadata.loopwire` and a resume's `{"action": ...}`, the AI SDK
UI message stream as the question part's `askedBy` / `url` and a user
message's `metadata.action`, the OpenAI API as the reply's text and a last
message `/decline` or `/dismiss`.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from backend.transport.ag_ui_events import LINK_SCHEMA
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, test_registry
from tests.test_ag_ui import ag_ui, conversation, interrupt_of, run_input
from tests.test_mcp_elicitation import (
    ASKED_BY,
    ORDER_FORM,
    cafe_config,
    ordering,
    server_calls,
    tool_results,
)

TOKEN = "adapter-elicitation-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HEADER = "X-Loopwire-Conversation"
CHOSEN = '{"size":"large","cups":2,"oat_milk":false}'
SIGN_IN = "https://cafe.example/sign-in"


async def serve(
    start_server: StartServer,
    tmp_path: Path,
    llm: ScriptedLLM,
    protocol: str = "auto",
) -> Harness:
    return await start_server(
        llm,
        test_registry(),
        auth_token=TOKEN,
        mcp_config=cafe_config(tmp_path, protocol=protocol),
    )


def http(harness: Harness) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=harness.server.url(""), timeout=30, headers=AUTH)


# ------------------------------------------------------------ AG-UI


def resume(interrupt: dict[str, Any], payload: Any) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]


def ag_ui_results(events: list[Any]) -> list[str]:
    return [e.content for e in events if e.type == "TOOL_CALL_RESULT"]


async def test_ag_ui_interrupt_names_the_server_and_a_form_answer_reaches_it(
    start_server: StartServer, tmp_path: Path
) -> None:
    """The interrupt carries the server's form, `asked_by` and `url`; a
    resume with the form's value is the server's `accept`."""
    llm = ScriptedLLM(*ordering())
    harness = await serve(start_server, tmp_path, llm)
    async with http(harness) as client:
        first = await ag_ui(client, run_input(str(uuid.uuid4()), "order me a coffee"))
        interrupt = interrupt_of(first)
        answer = {"size": "large", "cups": 2}
        second = await ag_ui(
            client, run_input(conversation(first), resume=resume(interrupt, answer))
        )
    assert (interrupt["reason"], interrupt["message"]) == (
        "input_required",
        "What would you like?",
    )
    assert interrupt["responseSchema"] == ORDER_FORM
    loopwire = interrupt["metadata"]["loopwire"]
    assert (loopwire["asked_by"], loopwire["url"]) == (ASKED_BY, None)
    assert ag_ui_results(second) == [json.dumps(f"accept {CHOSEN}")]
    assert tool_results(llm, 2) == [f"accept {CHOSEN}"]
    assert server_calls(tmp_path) == ["order"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_ag_ui_resume_declines_or_dismisses(
    start_server: StartServer, tmp_path: Path, action: str
) -> None:
    """A resume payload `{"action": ...}` is what the server hears."""
    llm = ScriptedLLM(*ordering())
    harness = await serve(start_server, tmp_path, llm)
    async with http(harness) as client:
        first = await ag_ui(client, run_input(str(uuid.uuid4()), "order me a coffee"))
        payload = {"action": action}
        second = await ag_ui(
            client,
            run_input(conversation(first), resume=resume(interrupt_of(first), payload)),
        )
    assert ag_ui_results(second) == [f'"{action}"']
    assert tool_results(llm, 2) == [action]
    assert second[-1].type == "RUN_FINISHED"


async def test_ag_ui_a_page_to_open_is_accepted_by_action(
    start_server: StartServer, tmp_path: Path
) -> None:
    """URL mode: the interrupt names the page and asks for an action; a
    resume `{"action": "accept"}` says it is done there."""
    llm = ScriptedLLM(*ordering("cafe__sign_in"))
    harness = await serve(start_server, tmp_path, llm, protocol="legacy")
    async with http(harness) as client:
        first = await ag_ui(client, run_input(str(uuid.uuid4()), "sign me in"))
        interrupt = interrupt_of(first)
        payload = {"action": "accept"}
        second = await ag_ui(
            client, run_input(conversation(first), resume=resume(interrupt, payload))
        )
    assert interrupt["responseSchema"] == LINK_SCHEMA
    loopwire = interrupt["metadata"]["loopwire"]
    assert (loopwire["asked_by"], loopwire["url"]) == (ASKED_BY, SIGN_IN)
    assert ag_ui_results(second) == ['"accept"']


# ------------------------------------------------------------ UI message stream


def user(text: str, message_id: str, **metadata: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": message_id,
        "role": "user",
        "parts": [{"type": "text", "text": text}] if text else [],
    }
    if metadata:
        message["metadata"] = metadata
    return message


def ui_body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chat-1", "messages": list(messages), "trigger": "submit-message"}


async def ui_post(client: httpx.AsyncClient, body: dict[str, Any]) -> list[Any]:
    """The JSON parts of one `/api/ui-stream` response."""
    async with client.stream("POST", "/api/ui-stream", json=body) as response:
        assert response.status_code == 200, await response.aread()
        return [
            json.loads(line.removeprefix("data: "))
            async for line in response.aiter_lines()
            if line.startswith("data: {")
        ]


async def ui_asked(client: httpx.AsyncClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """Order a coffee: the question part, and the assistant message it ends."""
    parts = await ui_post(client, ui_body(user("order me a coffee", "u1")))
    question = next(p for p in parts if p["type"] == "data-loopwire-question")
    meta = parts[0]["messageMetadata"]
    assistant = {
        "id": meta["runId"],
        "role": "assistant",
        "metadata": meta,
        "parts": [question],
    }
    return question, assistant


def ui_outputs(parts: list[Any]) -> list[Any]:
    return [p["output"] for p in parts if p["type"] == "tool-output-available"]


async def test_ui_stream_question_part_names_the_server_and_an_answer_reaches_it(
    start_server: StartServer, tmp_path: Path
) -> None:
    """The question part has `askedBy`, `url` and the form; the next user
    message's text is the answer the server accepts."""
    llm = ScriptedLLM(*ordering())
    harness = await serve(start_server, tmp_path, llm)
    async with http(harness) as client:
        question, assistant = await ui_asked(client)
        answer = user('{"size": "large", "cups": 2}', "u2")
        parts = await ui_post(client, ui_body(user("order", "u1"), assistant, answer))
    data = question["data"]
    assert data == {
        "questionId": question["id"],
        "question": "What would you like?",
        "step": 1,
        "timeoutS": 300.0,
        "answerSchema": ORDER_FORM,
        "askedBy": ASKED_BY,
        "url": None,
    }
    assert ui_outputs(parts) == [f"accept {CHOSEN}"]
    assert tool_results(llm, 2) == [f"accept {CHOSEN}"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_ui_stream_metadata_action_declines_or_dismisses(
    start_server: StartServer, tmp_path: Path, action: str
) -> None:
    """A user message with `metadata.action` refuses the question; its text
    is not sent as an answer."""
    llm = ScriptedLLM(*ordering())
    harness = await serve(start_server, tmp_path, llm)
    async with http(harness) as client:
        _question, assistant = await ui_asked(client)
        refusal = user("No thanks", "u2", action=action)
        parts = await ui_post(client, ui_body(user("order", "u1"), assistant, refusal))
    assert ui_outputs(parts) == [action]
    assert tool_results(llm, 2) == [action]


async def test_ui_stream_a_decline_with_no_question_waiting_is_a_409(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A refusal is never taken as a new chat message."""
    harness = await serve(start_server, tmp_path, ScriptedLLM())
    async with http(harness) as client:
        body = ui_body(user("", "u1", action="decline"))
        response = await client.post("/api/ui-stream", json=body)
    assert response.status_code == 409
    assert response.json()["error_type"] == "no_pending_input"


# ------------------------------------------------------------ OpenAI API


def sdk(harness: Harness) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=harness.server.url("/v1"), api_key=TOKEN, max_retries=0
    )


async def completion(
    client: openai.AsyncOpenAI, text: str, conversation_id: str
) -> tuple[str, str]:
    """One reply's content, and the conversation's id."""
    raw = await client.chat.completions.with_raw_response.create(
        model="loopwire-react",
        messages=[{"role": "user", "content": text}],
        extra_headers={HEADER: conversation_id},
    )
    return raw.parse().choices[0].message.content or "", raw.headers[HEADER]


ORDER_TEXT = (
    "The MCP server 'cafe' asks: What would you like?\n"
    "Reply with a JSON object: size: one of small, large; "
    "cups: an integer from 1 to 4; oat_milk: true or false (optional).\n"
    "Reply /decline to decline, or /dismiss to dismiss the question."
)


async def test_openai_reply_names_the_server_and_an_answer_reaches_it(
    start_server: StartServer, tmp_path: Path
) -> None:
    """The reply that ends at the question says who asks, the form, and how
    to refuse; the next message answers it."""
    llm = ScriptedLLM(*ordering())
    harness = await serve(start_server, tmp_path, llm)
    async with sdk(harness) as client:
        asked, conversation_id = await completion(client, "order me", "new")
        answered, _ = await completion(
            client, '{"size": "large", "cups": 2}', conversation_id
        )
    assert asked == ORDER_TEXT
    assert answered == "Ordered."
    assert tool_results(llm, 2) == [f"accept {CHOSEN}"]


@pytest.mark.parametrize(
    ("command", "action"), [("/decline", "decline"), ("/dismiss", "cancel")]
)
async def test_openai_decline_and_dismiss_commands(
    start_server: StartServer, tmp_path: Path, command: str, action: str
) -> None:
    """A last message of exactly `/decline` or `/dismiss` refuses the question."""
    llm = ScriptedLLM(*ordering())
    harness = await serve(start_server, tmp_path, llm)
    async with sdk(harness) as client:
        _asked, conversation_id = await completion(client, "order me", "new")
        answered, _ = await completion(client, command, conversation_id)
    assert answered == "Ordered."
    assert tool_results(llm, 2) == [action]


async def test_openai_reply_names_a_page_to_open(
    start_server: StartServer, tmp_path: Path
) -> None:
    """URL mode: the reply names the page; any reply but a refusal accepts."""
    llm = ScriptedLLM(*ordering("cafe__sign_in"))
    harness = await serve(start_server, tmp_path, llm, protocol="legacy")
    async with sdk(harness) as client:
        asked, conversation_id = await completion(client, "sign me in", "new")
        await completion(client, "done", conversation_id)
    assert asked == (
        "The MCP server 'cafe' asks: Sign in to the cafe to see your loyalty "
        f"points.\nOpen {SIGN_IN}, then reply done.\n"
        "Reply /decline to decline, or /dismiss to dismiss the question."
    )
    assert tool_results(llm, 2) == ["accept"]
