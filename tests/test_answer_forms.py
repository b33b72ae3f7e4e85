"""Questions as forms: `request_input` with an `answer_schema`.

The schema a model sends is checked (kept, or dropped to free text); the
question announces it; an answer that does not fit is refused with
`invalid_answer` and the question goes on waiting, over WebSocket and HTTP,
and after a restart; the answer that fits reaches the model as the tool's
result, as the text the user sent.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from backend.answer_forms import MAX_SCHEMA_BYTES, accept_schema, check_answer
from backend.app import create_app
from backend.errors import InvalidAnswer
from tests.conftest import StartServer, make_settings
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry
from tests.live_server import serving
from tests.ws_client import Client, Frame, labels

UNIT = {"type": "string", "enum": ["km", "mi"]}
COUNT = {"type": "integer", "minimum": 1, "maximum": 10}
YES_NO = {"type": "boolean"}
TRIP = {
    "type": "object",
    "properties": {"unit": UNIT, "count": COUNT, "round": YES_NO},
    "required": ["unit"],
}
TOKEN = "answer-forms-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
END = ["chat_response", "agent_completion", "response_complete"]


def asking(schema: Any, final: str = "done") -> list[object]:
    """A react run that asks "Which one?" with `schema`, then finishes."""
    question = {"question": "Which one?", "answer_schema": schema}
    return [
        reason("ask"),
        calls(("request_input", question)),
        observe("answered"),
        reason("done", finish=True, final=final),
    ]


def tool_results(llm: ScriptedLLM, call: int) -> list[str]:
    """The tool results in the model's request number `call`."""
    return [m.content for m in llm.requests[call].messages if m.role == "tool"]


async def asked(client: Client) -> Frame:
    await client.send(type="chat", content="convert 10 miles", agent_mode=True)
    before = await client.until_label("agent_request_input")
    assert labels(before) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "agent_request_input",
    ]
    return before[-1]


async def answer(client: Client, question: Frame, content: str) -> None:
    await client.send(
        type="agent_user_input", content=content, question_id=question["question_id"]
    )


async def refused(client: Client, question: Frame, content: str) -> Frame:
    """The error frame an answer gets (the run, still waiting, sends nothing else)."""
    await answer(client, question, content)
    error = await client.recv()
    assert error["type"] == "error"
    return error


# ------------------------------------------------------------ the schema check


@pytest.mark.parametrize(
    "schema",
    [
        UNIT,
        YES_NO,
        COUNT,
        {"type": "number", "minimum": 0.5, "description": "Litres"},
        {"type": "string", "maxLength": 40, "title": "Name"},
        TRIP,
        {"type": "string", "enum": [f"option {n}" for n in range(20)]},
    ],
)
def test_a_supported_schema_is_kept(schema: dict[str, Any]) -> None:
    """Choices, yes/no, bounded numbers, text and a small object are kept as sent."""
    assert accept_schema(schema) == schema


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (["km", "mi"], "not a JSON object"),
        ({"type": 5}, "not a valid JSON Schema"),
        ({"type": "array", "items": UNIT}, "type 'array' is not supported"),
        ({"type": "string", "enum": [str(n) for n in range(21)]}, "21 choices"),
        ({"type": "string", "enum": ["km", 3]}, "choice 3 is not a non-empty"),
        ({"type": "string", "pattern": "^a"}, "keywords not supported: pattern"),
        ({"type": "string", "$ref": "https://x.test/s"}, "not supported: $ref"),
        ({"type": "object", "properties": {"trip": TRIP}}, "type 'object'"),
        (
            {"type": "string", "description": "x" * MAX_SCHEMA_BYTES},
            f"bytes of JSON (at most {MAX_SCHEMA_BYTES})",
        ),
    ],
)
def test_a_bad_schema_is_dropped_to_free_text(
    schema: object, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A bad, unsupported or oversized schema is dropped (None) and the reason logged."""
    with caplog.at_level(logging.WARNING, "backend.answer_forms"):
        assert accept_schema(schema) is None
    (record,) = caplog.records
    assert record.getMessage().startswith("answer_schema dropped, asked as free text")
    assert why in record.getMessage()


@pytest.mark.parametrize(
    ("schema", "content", "problem"),
    [
        (UNIT, "miles", "the answer must be one of: km, mi"),
        (COUNT, "42", "the answer must be at most 10"),
        (COUNT, "0", "the answer must be at least 1"),
        (COUNT, "2.5", "the answer must be a whole number"),
        (COUNT, "ten", "the answer must be a whole number, written as JSON"),
        (COUNT, "NaN", "the answer must be a whole number, written as JSON"),
        (YES_NO, "yes", "the answer must be true or false, written as JSON"),
        (YES_NO, "1", "the answer must be true or false"),
        (TRIP, '{"count": 2}', "the answer must have the field 'unit'"),
        (TRIP, '{"unit": "km", "count": 11}', "field 'count' must be at most 10"),
    ],
)
def test_an_answer_that_does_not_fit_is_refused(
    schema: dict[str, Any], content: str, problem: str
) -> None:
    """An answer outside its schema is an `InvalidAnswer` naming the problem."""
    with pytest.raises(InvalidAnswer) as refusal:
        check_answer(schema, content)
    assert str(refusal.value) == problem


@pytest.mark.parametrize(
    ("schema", "content"),
    [
        (None, "anything at all"),
        (UNIT, "km"),
        (COUNT, "10"),
        (YES_NO, "false"),
        (TRIP, '{"unit": "mi", "count": 1, "round": true}'),
    ],
)
def test_an_answer_that_fits_is_taken(
    schema: dict[str, Any] | None, content: str
) -> None:
    """Free text takes anything; a fitting answer passes its schema."""
    check_answer(schema, content)


# ------------------------------------------------------------ over WebSocket


async def test_a_choice_refuses_an_answer_outside_it(start_server: StartServer) -> None:
    """Choices over WebSocket: an answer outside them is refused, the question
    waits, and the fitting answer reaches the model as the tool's result."""
    llm = ScriptedLLM(*asking(UNIT, final="16.09 km"))
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()
    question = await asked(client)
    assert (question["question"], question["answer_schema"]) == ("Which one?", UNIT)

    error = await refused(client, question, "miles")
    assert {k: v for k, v in error.items() if k != "ts"} == {
        "type": "error",
        "seq": question["seq"] + 1,
        "session_id": question["session_id"],
        "run_id": None,
        "error_type": "invalid_answer",
        "message": "the answer must be one of: km, mi",
        "about": question["question_id"],
        "resets_at": None,
    }
    session = harness.service.sessions[question["session_id"]]
    assert session.run.state.pending_question.question_id == question["question_id"]
    assert len(llm.requests) == 2  # nothing moved

    await answer(client, question, "km")
    after = await client.run()
    assert labels(after) == ["agent_observe", "agent_turn_start", "agent_reason", *END]
    assert tool_results(llm, 2) == ["km"]
    assert after[-3]["message"] == "16.09 km"


@pytest.mark.parametrize(
    ("schema", "wrong", "problem", "right"),
    [
        (COUNT, "42", "the answer must be at most 10", "7"),
        (YES_NO, "yes", "the answer must be true or false, written as JSON", "true"),
    ],
)
async def test_a_number_and_a_yes_no_question(
    start_server: StartServer,
    schema: dict[str, Any],
    wrong: str,
    problem: str,
    right: str,
) -> None:
    """A bounded number and a yes/no: the wrong answer refused, the right one
    reaching the model as its JSON text."""
    llm = ScriptedLLM(*asking(schema))
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()
    question = await asked(client)
    assert question["answer_schema"] == schema

    error = await refused(client, question, wrong)
    assert (error["error_type"], error["message"]) == ("invalid_answer", problem)
    await answer(client, question, right)
    after = await client.run()
    assert labels(after)[-3:] == END
    assert tool_results(llm, 2) == [right]


async def test_a_bad_schema_asks_in_free_text(start_server: StartServer) -> None:
    """A schema the server cannot ask with is dropped: free text, any answer taken."""
    llm = ScriptedLLM(*asking({"type": "array"}))
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()
    question = await asked(client)
    assert question["answer_schema"] is None
    await answer(client, question, "whatever I like")
    assert labels(await client.run())[-3:] == END
    assert tool_results(llm, 2) == ["whatever I like"]


async def test_a_free_text_question_has_no_schema(start_server: StartServer) -> None:
    """A question without `answer_schema` announces `answer_schema: null`."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("answered"),
        reason("done", finish=True, final="done"),
    )
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()
    question = await asked(client)
    assert question["answer_schema"] is None
    await answer(client, question, "furlongs")
    assert labels(await client.run())[-3:] == END


# ------------------------------------------------------------ over HTTP


async def test_an_out_of_schema_answer_over_http_is_a_422(
    start_server: StartServer,
) -> None:
    """`POST …/input` with an answer outside the schema is a 422 `invalid_answer`;
    the question waits and a fitting answer is taken."""
    llm = ScriptedLLM(*asking(UNIT))
    harness = await start_server(llm, test_registry(), auth_token=TOKEN)
    client, _ = await harness.ready_client(**AUTH)
    question = await asked(client)
    base = f"/api/conversations/{question['session_id']}/input"
    async with httpx.AsyncClient(
        base_url=harness.server.url(""), timeout=30, headers=AUTH
    ) as http:
        wrong = await http.post(
            base, json={"content": "miles", "question_id": question["question_id"]}
        )
        right = await http.post(
            base, json={"content": "mi", "question_id": question["question_id"]}
        )
    assert wrong.status_code == 422
    assert (wrong.json()["error_type"], wrong.json()["message"]) == (
        "invalid_answer",
        "the answer must be one of: km, mi",
    )
    assert right.json() == {"status": "answered"}
    assert labels(await client.run())[-3:] == END
    assert tool_results(llm, 2) == ["mi"]


# ------------------------------------------------------------ across a restart


async def test_a_form_question_survives_a_restart(tmp_path: Path) -> None:
    """A form question pending when its server stops is asked again, with its
    schema, by the next server on the same database, which still enforces it."""
    settings = make_settings(database_url=f"sqlite:///{tmp_path / 'forms.db'}")
    first = ScriptedLLM(*asking(UNIT)[:2])
    app = create_app(settings, llm=first, registry=test_registry())
    async with (
        serving(app, settings=settings) as server,
        connect(server.url("/ws", scheme="ws")) as connection,
    ):
        client = Client(connection)
        session = (await client.recv())["session_id"]
        question = await asked(client)

    again = ScriptedLLM(*asking(UNIT, final="10 miles is 16.09 km")[2:])
    app = create_app(settings, llm=again, registry=test_registry())
    query = f"/ws?session_id={session}&last_seq=0"
    async with (
        serving(app, settings=settings) as server,
        connect(server.url(query, scheme="ws")) as connection,
    ):
        client = Client(connection)
        assert (await client.recv())["resumed"] is True
        replayed = await client.until_label("agent_request_input")
        assert replayed[-1]["answer_schema"] == UNIT
        error = await refused(client, question, "miles")
        assert (error["error_type"], error["message"]) == (
            "invalid_answer",
            "the answer must be one of: km, mi",
        )
        await answer(client, question, "km")
        after = await client.run()
    assert labels(after)[-3:] == END
    assert tool_results(again, 0) == ["km"]
    assert after[-3]["message"] == "10 miles is 16.09 km"


async def test_the_offline_model_suggests_units_and_takes_any(
    start_server: StartServer,
) -> None:
    """With nothing configured, "convert 10 miles" asks with suggested units
    (`examples`: buttons in the page), and an answer outside them is taken."""
    harness = await start_server()
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="convert 10 miles", agent_mode=True)
    asked = (await client.until_label("agent_request_input"))[-1]
    assert asked["answer_schema"] == {
        "type": "string",
        "examples": ["km", "m", "ft", "mm"],
    }
    await client.send(type="agent_user_input", content="yd")
    rest = await client.run()
    assert "17600" in rest[-3]["message"]
