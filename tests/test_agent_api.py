"""`POST /api/agent` (Server-Sent Events and JSON) and the HTTP controls,
against a live server."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.transport.openapi import openapi, text
from tests.conftest import Harness, StartServer
from tests.fakes import Hang, ScriptedLLM, calls, observe, reason, test_registry
from tests.ws_client import labels

TOKEN = "agent-api-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
END = ["chat_response", "agent_completion", "response_complete"]


def one_step() -> list[object]:
    return [
        reason("Add them.", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe("It is 5.", should_continue=False, final="2 + 3 = 5"),
    ]


@dataclass
class Event:
    event: str
    id: str | None
    data: str

    @property
    def frame(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.data)
        return parsed


async def events(response: httpx.Response) -> AsyncIterator[Event]:
    """The response's server-sent events (comments, e.g. pings, skipped)."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if fields:
                yield Event(
                    fields.get("event", "message"), fields.get("id"), fields["data"]
                )
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


async def read_until(stream: AsyncIterator[Event], name: str) -> list[Event]:
    seen = []
    async for event in stream:
        seen.append(event)
        if event.event == name or (event.data and _label(event) == name):
            return seen
    raise AssertionError(f"the stream ended before {name}: {[e.event for e in seen]}")


def _label(event: Event) -> str:
    if event.event == "done":
        return "done"
    return labels([event.frame])[0]


def frame_labels(seen: list[Event]) -> list[str]:
    return [_label(e) for e in seen]


def client(harness: Harness, **kwargs: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=harness.server.url(""), timeout=30, headers=AUTH, **kwargs
    )


async def serve(start_server: StartServer, *script: object, **settings: Any) -> Harness:
    return await start_server(
        ScriptedLLM(*script), test_registry(), auth_token=TOKEN, **settings
    )


# ------------------------------------------------------------ refusals


async def test_no_token_no_run(start_server: StartServer) -> None:
    """A request without a bearer token gets a 401 and never reaches the model."""
    harness = await serve(start_server)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        response = await http.post("/api/agent", json={"query": "hi"})
    assert response.status_code == 401
    assert response.json()["error_type"] == "unauthorized"
    assert harness.service.llm.requests == []


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, [("query", "Field required")]),
        ({"query": ""}, [("query", "String should have at least 1 character")]),
        ({"query": 1}, [("query", "Input should be a valid string")]),
        ({"query": " \n"}, [("query", "must not be blank")]),
        (
            {"query": "x", "system_prompt": "  "},
            [("system_prompt", "must not be blank")],
        ),
        (
            {"query": "x", "system_prompt": "s" * 20_001},
            [("system_prompt", "String should have at most 20000 characters")],
        ),
        (
            {"query": "x", "conversation_id": "../etc"},
            [("conversation_id", "String should match pattern '^[0-9a-f]{32}$'")],
        ),
        (
            {"query": "x", "stream": "yes"},
            [("stream", "Input should be a valid boolean")],
        ),
        (
            {"query": "x", "max_steps": 0},
            [("max_steps", "Input should be greater than or equal to 1")],
        ),
        (
            {"query": "x", "selected_tools": ["t" * 200]},
            [("selected_tools.0", "String should have at most 128 characters")],
        ),
        ({"query": "x", "temperature": 2}, [("temperature", "unknown field")]),
        (
            {"query": "", "max_steps": "5", "extra": 1},
            [
                ("query", "String should have at least 1 character"),
                ("max_steps", "Input should be a valid integer"),
                ("extra", "unknown field"),
            ],
        ),
    ],
)
async def test_each_bad_field_is_named(
    start_server: StartServer, body: dict[str, Any], fields: list[tuple[str, str]]
) -> None:
    """Every invalid field in a request body is named with its problem in a 400."""
    harness = await serve(start_server)
    async with client(harness) as http:
        response = await http.post("/api/agent", json=body)
    assert response.status_code == 400
    answer = response.json()
    assert [(f["field"], f["problem"]) for f in answer["fields"]] == fields
    assert answer["message"] == "invalid agent request: " + "; ".join(
        f"{field}: {problem}" for field, problem in fields
    )
    assert harness.service.llm.requests == []


async def test_what_the_service_refuses_is_a_400(start_server: StartServer) -> None:
    """An unknown strategy, tool or model is a 400; an unknown conversation is a 404."""
    harness = await serve(start_server)
    async with client(harness) as http:
        strategy = await http.post(
            "/api/agent", json={"query": "x", "loop_strategy": "nope"}
        )
        tool = await http.post(
            "/api/agent", json={"query": "x", "selected_tools": ["nope"]}
        )
        model = await http.post("/api/agent", json={"query": "x", "model": "o1-pro"})
        unknown = await http.post(
            "/api/agent", json={"query": "x", "conversation_id": "a" * 32}
        )
    assert [r.status_code for r in (strategy, tool, model)] == [400, 400, 400]
    assert strategy.json()["message"].startswith("unknown loop_strategy 'nope'")
    assert tool.json()["message"].startswith("unknown tool(s) in selected_tools: nope")
    assert model.json()["message"].startswith("model 'o1-pro' is not offered here")
    assert (unknown.status_code, unknown.json()["error_type"]) == (404, "not_found")
    assert harness.service.llm.requests == []


async def test_a_body_is_bounded_as_a_chat_frame_is(start_server: StartServer) -> None:
    """A body over the frame limit is a 413, with its size declared or streamed."""
    harness = await serve(start_server, max_message_bytes=4096)
    body = json.dumps({"query": "q" * 5000}).encode()
    async with client(harness) as http:
        declared = await http.post(
            "/api/agent", content=body, headers={"Content-Type": "application/json"}
        )

        async def chunks() -> AsyncIterator[bytes]:
            yield body[:3000]
            yield body[3000:]

        streamed = await http.post(
            "/api/agent", content=chunks(), headers={"Content-Type": "application/json"}
        )
    assert (declared.status_code, declared.json()["message"]) == (
        413,
        f"body is {len(body)} bytes; the limit is 4096",
    )
    assert (streamed.status_code, streamed.json()["message"]) == (
        413,
        "body is over 4096 bytes, the limit",
    )
    assert harness.service.llm.requests == []


async def test_a_busy_conversation_is_a_409(start_server: StartServer) -> None:
    """A second run on a conversation with a run in progress is refused with a 409."""
    hang = Hang()
    harness = await serve(start_server, hang)
    async with (
        client(harness) as http,
        http.stream(
            "POST", "/api/agent", json={"query": "wait", "detach": True}
        ) as first,
    ):
        stream = events(first)
        started = await read_until(stream, "agent_turn_start")
        conversation = started[0].frame["session_id"]
        await hang.started.wait()
        busy = await http.post(
            "/api/agent", json={"query": "again", "conversation_id": conversation}
        )
        assert busy.status_code == 409
        assert busy.json()["error_type"] == "busy"
        stopped = await http.post(f"/api/conversations/{conversation}/stop", json={})
        assert stopped.json() == {"status": "stopping", "mode": "immediate"}
        rest = await read_until(stream, "done")
    assert frame_labels(rest)[-4:] == ["agent_stopped", *END[1:], "done"]


# -------------------------------------------------------------- streaming


async def test_a_run_streams_every_frame_in_order_then_done(
    start_server: StartServer,
) -> None:
    """An SSE run sends every frame in seq order with its id, then a `done` summary."""
    harness = await serve(start_server, *one_step())
    async with (
        client(harness) as http,
        http.stream("POST", "/api/agent", json={"query": "2+3?"}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-store"
        seen = [event async for event in events(response)]
    assert frame_labels(seen) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:add",
        "tool_complete:add",
        "agent_observe",
        *END,
        "done",
    ]
    frames = [e.frame for e in seen[:-1]]
    assert [e.id for e in seen[:-1]] == [str(f["seq"]) for f in frames]
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert [e.event for e in seen[:-1]] == [f["type"] for f in frames]
    conversation, run = frames[0]["session_id"], frames[0]["run_id"]
    assert seen[-1].id is None and seen[-1].frame == {
        "conversation_id": conversation,
        "run_id": run,
        "steps": 1,
        "reason": "finished",
        "tools_used": ["add"],
        "message_id": 3,  # user, the call, its result, the answer
    }
    session = harness.service.sessions[conversation]
    assert session.history[3].content == "2 + 3 = 5"


async def test_last_event_id_replays_what_was_missed(start_server: StartServer) -> None:
    """`Last-Event-ID` replays only the frames after it; nothing runs again."""
    harness = await serve(start_server, *one_step())
    async with client(harness) as http:
        async with http.stream(
            "POST", "/api/agent", json={"query": "2+3?"}
        ) as response:
            first = [event async for event in events(response)]
        conversation = first[0].frame["session_id"]
        again = {"query": "ignored", "conversation_id": conversation}
        async with http.stream(
            "POST", "/api/agent", json=again, headers={"Last-Event-ID": "6"}
        ) as response:
            replayed = [event async for event in events(response)]
        async with http.stream(
            "GET",
            f"/api/conversations/{conversation}/events",
            headers={"Last-Event-ID": "8"},
        ) as response:
            tail = [event async for event in events(response)]
        bad = await http.post("/api/agent", json=again, headers={"Last-Event-ID": "x"})
    assert [e.id for e in replayed[:-1]] == ["7", "8", "9"]
    assert [e.data for e in replayed[:-1]] == [e.data for e in first[6:9]]
    assert replayed[-1].event == "done" and [e.id for e in tail[:-1]] == ["9"]
    assert len(harness.service.llm.requests) == 3  # nothing ran again
    assert bad.status_code == 400


async def test_a_question_answered_over_http_mid_stream(
    start_server: StartServer,
) -> None:
    """An HTTP answer to the pending question resumes the stream; a wrong id is 409."""
    harness = await serve(
        start_server,
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("km it is"),
        reason("done", finish=True, final="16.09 km"),
    )
    async with (
        client(harness) as http,
        http.stream(
            "POST", "/api/agent", json={"query": "convert 10 miles"}
        ) as response,
    ):
        stream = events(response)
        before = await read_until(stream, "agent_request_input")
        question = before[-1].frame
        base = f"/api/conversations/{question['session_id']}"
        wrong = await http.post(
            f"{base}/input", json={"content": "km", "question_id": "other"}
        )
        answered = await http.post(
            f"{base}/input",
            json={"content": "km", "question_id": question["question_id"]},
        )
        after = [event async for event in stream]
    assert (wrong.status_code, wrong.json()["error_type"]) == (409, "no_pending_input")
    assert answered.json() == {"status": "answered"}
    assert frame_labels(before + after) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "agent_request_input",
        "agent_observe",
        "agent_turn_start",
        "agent_reason",
        *END,
        "done",
    ]


async def test_steps_granted_and_a_stop_after_the_step_over_http(
    start_server: StartServer,
) -> None:
    """HTTP step grants and stops act on a live run; zero steps or a bad mode is 400."""
    hang = Hang()
    harness = await serve(
        start_server,
        reason("Add them.", tools=["add"]),
        hang,
    )
    async with (
        client(harness) as http,
        http.stream(
            "POST", "/api/agent", json={"query": "2+3?", "max_steps": 1}
        ) as response,
    ):
        stream = events(response)
        before = await read_until(stream, "agent_reason")
        base = f"/api/conversations/{before[0].frame['session_id']}"
        granted = await http.post(f"{base}/steps", json={"add": 2})
        zero = await http.post(f"{base}/steps", json={"add": 0})
        stop = await http.post(f"{base}/stop", json={"mode": "after_step"})
        odd = await http.post(f"{base}/stop", json={"mode": "later"})
        await http.post(f"{base}/stop", json={"mode": "immediate"})
        after = [event async for event in stream]
    assert granted.json() == {"status": "granted", "max_steps": 3}
    assert (zero.status_code, zero.json()["fields"][0]["field"]) == (400, "add")
    assert stop.json() == {"status": "stopping", "mode": "after_step"}
    assert odd.status_code == 400
    assert frame_labels(after)[:1] == ["agent_steps_granted"]
    assert frame_labels(after)[-4:] == ["agent_stopped", *END[1:], "done"]
    assert hang.cancelled.is_set()


async def test_a_client_that_goes_away_stops_its_run(start_server: StartServer) -> None:
    """Closing an attached run's stream stops the run, which still ends in a reply."""
    hang = Hang()
    harness = await serve(start_server, hang)
    async with (
        client(harness) as http,
        http.stream("POST", "/api/agent", json={"query": "go"}) as response,
    ):
        await read_until(events(response), "agent_turn_start")
        conversation = harness.service.sessions
        await hang.started.wait()
    await hang.cancelled.wait()  # the run was stopped when the stream closed
    (session,) = conversation.values()
    while session.run is not None:  # the run's end is being written
        await session.run.task  # type: ignore[misc]
    assert session.history[-1].role == "assistant"


async def test_a_detached_run_goes_on_without_its_client(
    start_server: StartServer,
) -> None:
    """A detached run keeps going after its stream closes, until it is stopped."""
    hang = Hang()
    harness = await serve(start_server, hang)
    async with client(harness) as http:
        async with http.stream(
            "POST", "/api/agent", json={"query": "go", "detach": True}
        ) as response:
            first = await read_until(events(response), "agent_turn_start")
            await hang.started.wait()
        conversation = first[0].frame["session_id"]
        assert not hang.cancelled.is_set()
        run = harness.service.sessions[conversation].run
        assert run is not None and run.run_id == first[0].frame["run_id"]
        await http.post(f"/api/conversations/{conversation}/stop", json={})
    await hang.cancelled.wait()


# -------------------------------------------------------------- JSON mode


async def test_stream_false_answers_one_document(start_server: StartServer) -> None:
    """With `stream: false` the run answers one JSON document with its metadata."""
    harness = await serve(start_server, *one_step())
    async with client(harness) as http:
        response = await http.post(
            "/api/agent", json={"query": "2+3?", "stream": False}
        )
    assert response.status_code == 200
    body = response.json()
    conversation = body["conversation_id"]
    session = harness.service.sessions[conversation]
    assert body["run_id"] and len(conversation) == 32
    assert body["user_message"] == {"id": 0, "role": "user", "content": "2+3?"}
    assert body["assistant_message"] == {
        "id": 3,
        "role": "assistant",
        "content": "2 + 3 = 5",
    }
    assert [m.role for m in session.history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert session.history[3].content == "2 + 3 = 5"
    metadata = body["agent_metadata"]
    assert (metadata["steps"], metadata["reason"], metadata["tools_used"]) == (
        1,
        "finished",
        ["add"],
    )
    trace = [(t["step"], t["phase"]) for t in metadata["execution_trace"]]
    assert trace == [(1, "turn"), (1, "reason"), (1, "act")] + [(1, "tools")] * 3 + [
        (1, "observe")
    ]
    assert metadata["usage"]["llm_calls"] == 3 and metadata["errors"] == []
    assert set(metadata["execution_trace"][0]) == {
        "step",
        "phase",
        "started_at",
        "duration_ms",
        "llm_calls",
        "tool_calls",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
    }


async def test_a_system_prompt_reaches_every_call_of_the_run(
    start_server: StartServer,
) -> None:
    """A client system prompt follows the server's in every call, never in history."""
    harness = await serve(start_server, *one_step())
    async with client(harness) as http:
        response = await http.post(
            "/api/agent",
            json={
                "query": "2+3?",
                "stream": False,
                "system_prompt": "Answer in French.",
            },
        )
    assert response.status_code == 200
    requests = harness.service.llm.requests
    assert [r.purpose for r in requests] == ["reason", "act", "observe"]
    for request in requests:
        server, client_own = request.messages[:2]
        assert (server.role, client_own.role) == ("system", "system")
        assert server.content.startswith("You are loopwire")  # the server's own first
        assert client_own.content == "Answer in French."
        assert [m.content for m in request.messages].count("Answer in French.") == 1
    # the instructions are the run's, not the conversation's: never in history
    session = harness.service.sessions[response.json()["conversation_id"]]
    assert all(m.content != "Answer in French." for m in session.history)


async def test_an_operator_can_refuse_client_system_prompts(
    start_server: StartServer,
) -> None:
    """With client system prompts off, one is refused and none reaches the model."""
    harness = await serve(start_server, *one_step(), client_system_prompts=False)
    async with client(harness) as http:
        refused = await http.post(
            "/api/agent", json={"query": "2+3?", "system_prompt": "Be terse."}
        )
        plain = await http.post("/api/agent", json={"query": "2+3?", "stream": False})
    assert refused.status_code == 400
    assert refused.json() == {
        "error_type": "invalid_message",
        "message": "this server does not take a system_prompt from clients "
        "(LOOPWIRE_CLIENT_SYSTEM_PROMPTS=false); send the message without it",
    }
    assert plain.status_code == 200
    assert all(r.messages[1].role != "system" for r in harness.service.llm.requests)


async def test_another_users_conversation_cannot_be_driven(
    start_server: StartServer, tmp_path: Any
) -> None:
    """Another user gets a 404 for every way of driving or reading someone's run."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {TOKEN}\nbob: bob-token-0123456789abc\n")
    tokens.chmod(0o600)
    hang = Hang()
    harness = await start_server(
        ScriptedLLM(hang), test_registry(), auth_tokens_file=tokens
    )
    bob = {"Authorization": "Bearer bob-token-0123456789abc"}
    async with client(harness) as http:
        async with http.stream(
            "POST", "/api/agent", json={"query": "go", "detach": True}
        ) as response:
            first = await read_until(events(response), "agent_turn_start")
        conversation = first[0].frame["session_id"]
        base = f"/api/conversations/{conversation}"
        await hang.started.wait()
        attempts = [
            await http.post(f"{base}/stop", json={}, headers=bob),
            await http.post(f"{base}/steps", json={"add": 1}, headers=bob),
            await http.post(f"{base}/input", json={"content": "x"}, headers=bob),
            await http.post(
                f"{base}/approvals/call_1", json={"approved": True}, headers=bob
            ),
            await http.post(
                "/api/agent",
                json={"query": "x", "conversation_id": conversation},
                headers=bob,
            ),
            await http.get(f"{base}/events", headers=bob),
        ]
        assert [r.status_code for r in attempts] == [404] * 6
        assert not hang.cancelled.is_set()
        await http.post(f"{base}/stop", json={})
    await hang.cancelled.wait()


def test_the_openapi_document_in_docs_is_not_stale() -> None:
    """The committed `docs/openapi.json` matches the document the code generates."""
    kept = Path(__file__).resolve().parent.parent / "docs" / "openapi.json"
    assert kept.read_text(encoding="utf-8") == text(), (
        "docs/openapi.json is stale: run `make schema`"
    )


async def test_the_openapi_document_is_served_and_matches_the_routes(
    start_server: StartServer,
) -> None:
    """`/openapi.json` serves the generated document, and its paths are all routes."""
    harness = await serve(start_server)
    async with client(harness) as http:
        served = await http.get("/openapi.json")
    assert served.json() == openapi()
    paths = served.json()["paths"]
    assert sorted(paths) == [
        "/api/admin/signins",
        "/api/admin/signins/{signin_id}",
        "/api/admin/usage",
        "/api/admin/users/{user}/revoke",
        "/api/ag-ui",
        "/api/agent",
        "/api/conversations",
        "/api/conversations/import",
        "/api/conversations/{conversation_id}",
        "/api/conversations/{conversation_id}/approvals/{tool_call_id}",
        "/api/conversations/{conversation_id}/branches",
        "/api/conversations/{conversation_id}/branches/{branch_id}",
        "/api/conversations/{conversation_id}/budget",
        "/api/conversations/{conversation_id}/events",
        "/api/conversations/{conversation_id}/export",
        "/api/conversations/{conversation_id}/files",
        "/api/conversations/{conversation_id}/files/{file_id}",
        "/api/conversations/{conversation_id}/input",
        "/api/conversations/{conversation_id}/shares",
        "/api/conversations/{conversation_id}/steps",
        "/api/conversations/{conversation_id}/stop",
        "/api/conversations/{conversation_id}/tool-results/{tool_call_id}",
        "/api/info",
        "/api/me/instructions",
        "/api/shares/{share_id}",
        "/api/sources/{source}/documents/{path}",
        "/api/tool-grants",
        "/api/tool-grants/{grant_id}",
        "/api/ui-stream",
        "/api/ui-stream/{chat_id}/stream",
        "/api/usage",
        "/healthz",
        "/metrics",
        "/s/{share_id}",
        "/v1/chat/completions",
        "/v1/models",
    ]
    routes = {
        re.sub(r":\w+\}", "}", getattr(r, "path", ""))  # `{path:path}` is `{path}`
        for r in harness.server.app.routes
    }
    assert set(paths) <= routes


async def test_a_body_of_many_long_unknown_fields_is_not_echoed(
    start_server: StartServer,
) -> None:
    """A 400 for many long unknown fields names only 20, cut short, in a small body."""
    harness = await serve(start_server)
    body: dict[str, Any] = {"query": "x"} | {
        f"{i:03d}" + "k" * 300: 1 for i in range(30)
    }
    async with client(harness) as http:
        response = await http.post("/api/agent", json=body)
    answer = response.json()
    assert response.status_code == 400 and len(answer["fields"]) == 20
    assert answer["fields"][0] == {
        "field": "000" + "k" * 36 + "…",
        "problem": "unknown field",
    }
    assert answer["message"].endswith("; and 10 more")
    assert len(response.content) < 3000
