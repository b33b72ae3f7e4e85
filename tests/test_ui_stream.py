"""`POST /api/ui-stream`: the AI SDK's UI message stream, against a live
server — parsed here part by part, and consumed by the real `ai` npm
package (`readUIMessageStream`, `DefaultChatTransport`) in Node."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from backend.protocol import server_message_adapter
from backend.transport.ui_stream_parts import Parts
from tests.cluster_harness import HEADER, ClusterHarness
from tests.conftest import Harness, StartServer
from tests.fake_openai import FakeOpenAIServer
from tests.fakes import (
    Hang,
    Saver,
    ScriptedLLM,
    approval_registry,
    asks_which_unit,
    calls,
    observe,
    reason,
)
from tests.js_clients import needs_node, run_node
from tests.test_cluster import APPROVAL, QUESTION, dropped_elsewhere

TOKEN = "ui-stream-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
URL = "/api/ui-stream"
DONE = "[DONE]"


def user(text: str, message_id: str = "u1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def body(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "id": "chat-1",
        "messages": list(messages),
        "trigger": "submit-message",
        **fields,
    }


async def serve(
    start_server: StartServer, *script: object, saver: Saver | None = None
) -> Harness:
    return await start_server(
        ScriptedLLM(*script),  # type: ignore[arg-type]
        approval_registry(saver),
        auth_token=TOKEN,
    )


def client(harness: Harness) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=harness.server.url(""), timeout=30, headers=AUTH)


async def lines(response: httpx.Response) -> AsyncIterator[Any]:
    """Each `data:` line's part (the `[DONE]` line as the string)."""
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            data = line.removeprefix("data: ")
            yield data if data == DONE else json.loads(data)


async def post(http: httpx.AsyncClient, payload: dict[str, Any]) -> list[Any]:
    """The parts of one request's stream, `[DONE]` last."""
    async with http.stream("POST", URL, json=payload) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert response.headers["content-type"].startswith("text/event-stream")
        return [part async for part in lines(response)]


def named(parts: list[Any], **names: str) -> list[Any]:
    """`parts` with each id in `names` replaced by its name (ids are random)."""
    text = json.dumps(parts)
    for name, value in names.items():
        text = text.replace(value, name)
    loaded: list[Any] = json.loads(text)
    return loaded


def started(parts: list[Any]) -> tuple[str, str]:
    """The conversation and run ids the stream's `start` part names."""
    meta = parts[0]["messageMetadata"]
    return meta["conversationId"], meta["runId"]


def reasoning(block: str, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "reasoning-start", "id": block},
        {"type": "reasoning-delta", "id": block, "delta": text},
        {"type": "reasoning-end", "id": block},
    ]


def text(block: str, delta: str) -> list[dict[str, Any]]:
    return [
        {"type": "text-start", "id": block},
        {"type": "text-delta", "id": block, "delta": delta},
        {"type": "text-end", "id": block},
    ]


START = {
    "type": "start",
    "messageId": "R",
    "messageMetadata": {"conversationId": "C", "runId": "R"},
}
AGENT_START = {
    "type": "data-loopwire-update",
    "data": {
        "update_type": "agent_start",
        "max_steps": 10,
        "strategy": "react",
        "budget": None,
    },
}


def finish(finish_reason: str = "stop", **metadata: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "finish", "finishReason": finish_reason}
    if metadata:
        part["messageMetadata"] = metadata
    return part


def usage(prompt: int, completion: int, calls: int) -> dict[str, int]:
    """`agent_completion.usage` of calls whose server counted their tokens."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "llm_calls": calls,
        "cached_tokens": 0,
        "reasoning_tokens": 0,
        "estimated_calls": 0,
        "cost_usd": None,
    }


def tool_call(
    call: str, name: str, arguments: dict[str, Any] | str
) -> list[dict[str, Any]]:
    ids = {"toolCallId": call, "toolName": name}
    return [
        {"type": "tool-input-start", **ids, "dynamic": True},
        {"type": "tool-input-available", **ids, "input": arguments, "dynamic": True},
    ]


def save_run(*after: object) -> list[object]:
    return [reason("save it"), calls(("save", {"text": "milk"})), *after]


def approval_response(first: list[Any], approved: bool) -> dict[str, Any]:
    """The assistant message as `useChat` sends it back once the user
    answered its approval request."""
    request = next(
        p for p in first if p != DONE and p["type"] == "tool-approval-request"
    )
    return {
        "id": first[0]["messageId"],
        "role": "assistant",
        "metadata": first[0]["messageMetadata"],
        "parts": [
            {"type": "step-start"},
            {
                "type": "dynamic-tool",
                "toolName": "save",
                "toolCallId": request["toolCallId"],
                "state": "approval-responded",
                "input": {"text": "milk"},
                "approval": {"id": request["approvalId"], "approved": approved},
            },
        ],
    }


# ------------------------------------------------------------------- runs


async def test_a_run_with_a_tool_call_streams_each_part_in_order(
    start_server: StartServer,
) -> None:
    """A tool-calling run is one step of reasoning, the call and its output, the answer, `finish`, `[DONE]`."""
    harness = await serve(
        start_server,
        reason("Add them.", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe("It is 5.", should_continue=False, final="2 + 3 = 5"),
    )
    async with client(harness) as http:
        parts = await post(http, body(user("2+3?")))
    conversation, run = started(parts)
    call = next(p["toolCallId"] for p in parts if p["type"] == "tool-input-start")
    assert named(parts, C=conversation, R=run, X=call) == [
        START,
        AGENT_START,
        {"type": "start-step"},
        *reasoning("R-reasoning-3", "I will work it out."),
        *tool_call("X", "add", {"expression": "2+3"}),
        {
            "type": "tool-output-available",
            "toolCallId": "X",
            "output": {"expression": "2+3", "result": 5.0},
            "dynamic": True,
        },
        *reasoning("R-reasoning-6", "The result is in."),
        *text("R-text-7", "2 + 3 = 5"),
        {"type": "finish-step"},
        finish(steps=1, reason="finished", usage=usage(30, 34, 3)),
        DONE,
    ]
    assert harness.service.sessions[conversation].history[-1].content == "2 + 3 = 5"


async def test_an_approval_ends_the_response_and_the_next_request_decides(
    start_server: StartServer,
) -> None:
    """An approval request ends the first response; the approval in the next one runs the tool in the same run."""
    saver = Saver()
    harness = await serve(
        start_server,
        *save_run(observe(should_continue=False, final="Saved.")),
        saver=saver,
    )
    async with client(harness) as http:
        first = await post(http, body(user("remember milk")))
        conversation, run = started(first)
        assert saver.saved == []
        decided = approval_response(first, approved=True)
        second = await post(http, body(user("remember milk"), decided))
    call = first[-5]["toolCallId"]
    assert named(first, C=conversation, R=run, X=call) == [
        START,
        AGENT_START,
        {"type": "start-step"},
        *reasoning("R-reasoning-3", "I will work it out."),
        *tool_call("X", "save", {"text": "milk"}),
        {"type": "tool-approval-request", "approvalId": "X", "toolCallId": "X"},
        {
            "type": "data-loopwire-approval",
            "id": "X",
            "data": {
                "toolCallId": "X",
                "toolName": "save",
                "description": "Save a note (asks the user first).",
                "step": 1,
                "inDoubt": False,
                "untrustedSources": [],
            },
        },
        {"type": "finish-step"},
        finish("tool-calls"),
        DONE,
    ]
    assert named(second, C=conversation, R=run, X=call) == [
        START,
        {
            "type": "tool-output-available",
            "toolCallId": "X",
            "output": {"saved": "milk"},
            "dynamic": True,
        },
        *reasoning("R-reasoning-7", "The result is in."),
        *text("R-text-8", "Saved."),
        {"type": "finish-step"},
        finish(steps=1, reason="finished", usage=usage(30, 29, 3)),
        DONE,
    ]
    assert saver.saved == ["milk"]


async def test_a_declined_approval_is_a_denied_output(
    start_server: StartServer,
) -> None:
    """A declined approval reports the call denied and the run ends unrun."""
    saver = Saver()
    harness = await serve(start_server, *save_run("I did not save it."), saver=saver)
    async with client(harness) as http:
        first = await post(http, body(user("remember milk")))
        second = await post(
            http, body(user("remember milk"), approval_response(first, False))
        )
    kinds = [p if p == DONE else p["type"] for p in second]
    assert kinds[:2] == ["start", "tool-output-denied"]
    assert kinds[-3:] == ["finish-step", "finish", DONE]
    assert second[-2]["messageMetadata"]["reason"] == "rejected"
    assert second[-2]["finishReason"] == "other"
    assert saver.saved == []


async def test_a_question_is_answered_by_the_next_user_message(
    start_server: StartServer,
) -> None:
    """A question ends the response as a data part; the next user message answers it and the run goes on."""
    harness = await serve(
        start_server,
        *asks_which_unit(),
    )
    async with client(harness) as http:
        first = await post(http, body(user("convert 10 miles")))
        conversation, run = started(first)
        question = first[-4]
        asked = {
            "id": first[0]["messageId"],
            "role": "assistant",
            "metadata": first[0]["messageMetadata"],
            "parts": [
                {"type": "step-start"},
                {
                    "type": question["type"],
                    "id": question["id"],
                    "data": question["data"],
                },
            ],
        }
        second = await post(
            http, body(user("convert 10 miles"), asked, user("km", "u2"))
        )
    call = question["id"]
    assert named(first, C=conversation, R=run, Q=call) == [
        START,
        AGENT_START,
        {"type": "start-step"},
        *reasoning("R-reasoning-3", "I will work it out."),
        {
            "type": "data-loopwire-question",
            "id": "Q",
            "data": {
                "questionId": "Q",
                "question": "Which unit?",
                "step": 1,
                "timeoutS": 300.0,
                "answerSchema": None,
                "askedBy": None,
                "url": None,
            },
        },
        {"type": "finish-step"},
        finish("other"),
        DONE,
    ]
    assert named(second, C=conversation, R=run, Q=call) == [
        {**START, "messageId": "R:Q"},
        {"type": "start-step"},
        *reasoning("R-reasoning-5", "The result is in."),
        {"type": "finish-step"},
        {"type": "start-step"},
        *reasoning("R-reasoning-7", "I will work it out."),
        *text("R-text-8", "16.09 km"),
        {"type": "finish-step"},
        finish(steps=2, reason="finished", usage=usage(40, 45, 4)),
        DONE,
    ]
    observed = harness.service.llm.requests[2]
    assert observed.purpose == "observe"
    assert "km" in json.dumps([m.content for m in observed.messages])


async def test_a_client_that_aborts_stops_its_run(start_server: StartServer) -> None:
    """Closing the stream mid-run stops the run; its end is still written."""
    hang = Hang()
    harness = await serve(start_server, hang)
    async with (
        client(harness) as http,
        http.stream("POST", URL, json=body(user("go"))) as response,
    ):
        stream = lines(response)
        first = await anext(stream)
        await hang.started.wait()
    await hang.cancelled.wait()
    session = harness.service.sessions[first["messageMetadata"]["conversationId"]]
    while session.run is not None:  # the run's end is being written
        await session.run.task
    assert session.history[-1].role == "assistant"


async def test_a_detached_run_goes_on_without_its_client(
    start_server: StartServer,
) -> None:
    """With `detach: true` in the body, closing the stream leaves the run going."""
    hang = Hang()
    harness = await serve(start_server, hang)
    async with client(harness) as http:
        async with http.stream(
            "POST", URL, json=body(user("go"), detach=True)
        ) as response:
            first = await anext(lines(response))
            await hang.started.wait()
        conversation, run = started([first])
        assert harness.service.sessions[conversation].run.run_id == run
        assert not hang.cancelled.is_set()
        await http.post(f"/api/conversations/{conversation}/stop", json={})
    await hang.cancelled.wait()


async def test_regenerate_edits_and_resends_the_run(start_server: StartServer) -> None:
    """`regenerate-message` replaces the named run: its history is gone, a new run answers."""
    harness = await serve(
        start_server,
        reason("a", finish=True, final="first answer"),
        reason("b", finish=True, final="second answer"),
    )
    async with client(harness) as http:
        first = await post(http, body(user("hi")))
        conversation, run = started(first)
        again = body(
            user("hi"), trigger="regenerate-message", messageId=run, id=conversation
        )
        async with http.stream("POST", URL, json=again) as response:
            second = [part async for part in lines(response)]
    _, new_run = started(second)
    assert new_run != run
    history = harness.service.sessions[conversation].history
    assert [(m.role, m.content) for m in history] == [
        ("user", "hi"),
        ("assistant", "second answer"),
    ]


def answer_of(parts: list[Any]) -> dict[str, Any]:
    """The assistant message `useChat` keeps of a response, as it sends it back."""
    texts = [p["delta"] for p in parts if p != DONE and p["type"] == "text-delta"]
    return {
        "id": parts[0]["messageId"],
        "role": "assistant",
        "metadata": parts[0]["messageMetadata"],
        "parts": [{"type": "step-start"}, {"type": "text", "text": "".join(texts)}],
    }


def answers(*finals: str) -> list[str]:
    """One single-step run per final answer."""
    return [reason(f"run {i}", finish=True, final=f) for i, f in enumerate(finals)]


def one_step(final: str, seq: int) -> list[Any]:
    """The parts of a run `R` that answers `final` in its first reason (its
    reason frame's `seq` in the conversation)."""
    return [
        START,
        AGENT_START,
        {"type": "start-step"},
        *reasoning(f"R-reasoning-{seq}", "I will work it out."),
        *text(f"R-text-{seq + 1}", final),
        {"type": "finish-step"},
        finish(steps=1, reason="finished", usage=usage(10, 16, 1)),
        DONE,
    ]


def seen(request: Any) -> list[tuple[str, str]]:
    """The conversation a model call was given (its system prompt left out)."""
    return [(m.role, m.content) for m in request.messages if m.role != "system"]


async def saved_runs(harness: Harness, conversation: str) -> list[str]:
    await harness.service.flush_session(conversation)
    runs = await harness.service.store.runs(conversation)
    return [run.id for run in sorted(runs, key=lambda run: run.started_at)]


async def test_regenerate_without_a_message_id_replaces_the_last_answer(
    start_server: StartServer,
) -> None:
    """`regenerate()` sends no `messageId` and drops the last answer: the run the last user message started is replaced."""
    harness = await serve(start_server, *answers("first", "second", "third"))
    async with client(harness) as http:
        first = await post(http, body(user("hi")))
        conversation, run_1 = started(first)
        sent = [user("hi"), answer_of(first), user("and then?", "u2")]
        second = await post(http, body(*sent))
        again = await post(http, body(*sent, trigger="regenerate-message"))
    _, run_3 = started(again)
    assert named(again, C=conversation, R=run_3) == one_step("third", 16)
    assert seen(harness.service.llm.requests[2]) == [
        ("user", "hi"),
        ("assistant", "first"),
        ("user", "and then?"),  # not the answer "second" it replaces
    ]
    history = harness.service.sessions[conversation].history
    assert [(m.role, m.content) for m in history] == [
        ("user", "hi"),
        ("assistant", "first"),
        ("user", "and then?"),
        ("assistant", "third"),
    ]
    assert await saved_runs(harness, conversation) == [run_1, run_3]
    assert started(second)[1] not in (run_1, run_3)


async def test_editing_an_earlier_message_replaces_its_run_and_every_later_one(
    start_server: StartServer,
) -> None:
    """`sendMessage({ text, messageId })` edits a user message: the run it started and the later ones go, the new text runs."""
    harness = await serve(start_server, *answers("first", "second", "third", "fourth"))
    async with client(harness) as http:
        first = await post(http, body(user("hi")))
        conversation, _ = started(first)
        await post(http, body(user("hi"), answer_of(first), user("and then?", "u2")))
        edited = [user("hi"), answer_of(first), user("what else?", "u2")]
        third = await post(http, body(*edited, messageId="u2"))
        _, run_3 = started(third)
        history = harness.service.sessions[conversation].history
        after_one = [(m.role, m.content) for m in history]
        fourth = await post(
            http, body(user("hello", "u1"), messageId="u1", id=conversation)
        )
    _, run_4 = started(fourth)
    assert after_one == [
        ("user", "hi"),
        ("assistant", "first"),
        ("user", "what else?"),
        ("assistant", "third"),
    ]
    assert named(third, C=conversation, R=run_3) == one_step("third", 16)
    assert named(fourth, C=conversation, R=run_4) == one_step("fourth", 23)
    assert seen(harness.service.llm.requests[2]) == [
        ("user", "hi"),
        ("assistant", "first"),
        ("user", "what else?"),  # the old "and then?" and its answer are gone
    ]
    assert seen(harness.service.llm.requests[3]) == [("user", "hello")]
    assert [(m.role, m.content) for m in history] == [
        ("user", "hello"),
        ("assistant", "fourth"),
    ]
    assert await saved_runs(harness, conversation) == [run_4]


def asking(run: str, conversation: str) -> dict[str, Any]:
    """An assistant message of run `run` that asked a question."""
    return {
        "id": run,
        "role": "assistant",
        "metadata": {"conversationId": conversation, "runId": run},
        "parts": [
            {
                "type": "data-loopwire-question",
                "id": "q1",
                "data": {"questionId": "q1", "question": "Which?"},
            }
        ],
    }


UNMAPPED = [
    (
        lambda a: body(
            user("hi"), {**a, "id": "run-x"}, user("b", "u2"), messageId="u2"
        ),
        404,
        "invalid ui-stream request: the assistant message 'run-x' before message 'u2' is not a saved run of conversation '<C>'",
    ),
    (
        lambda a: body(user("hi"), a, user("b", "u2"), messageId="u2"),
        404,
        "invalid ui-stream request: message 'u2' started no saved run of conversation '<C>', so there is nothing to replace: send it as a new message",
    ),
    (
        lambda a: body(user("hi"), a, user("b", "u2"), trigger="regenerate-message"),
        404,
        "invalid ui-stream request: message 'u2' started no saved run of conversation '<C>', so there is nothing to replace: send it as a new message",
    ),
    (
        lambda a: body(user("hi"), a, user("b", "u2"), user("c", "u3"), messageId="u3"),
        400,
        "invalid ui-stream request: cannot tell which run message 'u3' started: the message before it, 'u2', is not an answer",
    ),
    (
        lambda a: body(
            user("hi"),
            asking(a["id"], a["metadata"]["conversationId"]),
            user("b", "u2"),
            messageId="u2",
        ),
        400,
        "invalid ui-stream request: message 'u2' answered a question of run '<R>', and an answer cannot be edited: regenerate({ messageId: '<R>' }) runs that run again",
    ),
    (
        lambda a: body(user("hi"), a, trigger="regenerate-message"),
        400,
        "invalid ui-stream request: regenerate-message without messageId needs the user's message last (the answer to regenerate left out, as regenerate() sends it)",
    ),
]


@pytest.mark.parametrize(("payload", "status", "message"), UNMAPPED)
async def test_an_edit_loopwire_cannot_map_to_a_run_is_refused(
    start_server: StartServer, payload: Any, status: int, message: str
) -> None:
    """An edit or regenerate whose message maps to no saved run is refused naming it; nothing runs, nothing is removed."""
    harness = await serve(start_server, *answers("first"))
    async with client(harness) as http:
        first = await post(http, body(user("hi")))
        conversation, run = started(first)
        response = await http.post(URL, json=payload(answer_of(first)))
    expected = message.replace("<C>", conversation).replace("<R>", run)
    assert (response.status_code, response.json()["message"]) == (status, expected)
    assert len(harness.service.llm.requests) == 1
    history = harness.service.sessions[conversation].history
    assert [(m.role, m.content) for m in history] == [
        ("user", "hi"),
        ("assistant", "first"),
    ]


async def test_resume_replays_the_waiting_run_and_204_without_one(
    start_server: StartServer,
) -> None:
    """`GET …/{chat}/stream` replays the run in progress to where it waits; 204 when none runs."""
    harness = await serve(
        start_server, *save_run(observe(should_continue=False, final="ok"))
    )
    async with client(harness) as http:
        first = await post(http, body(user("remember milk")))
        conversation, _ = started(first)
        async with http.stream("GET", f"{URL}/{conversation}/stream") as response:
            replayed = [part async for part in lines(response)]
        nothing = await http.get(f"{URL}/{'0' * 32}/stream")
        not_an_id = await http.get(f"{URL}/chat-1/stream")
        await post(http, body(user("remember milk"), approval_response(first, True)))
        ended = await http.get(f"{URL}/{conversation}/stream")
    assert replayed == first
    assert [nothing.status_code, not_an_id.status_code, ended.status_code] == [204] * 3


# --------------------------------------------------------------- refusals


async def test_no_token_no_run(start_server: StartServer) -> None:
    """Without the bearer token the request is a 401 and the model is never called."""
    harness = await serve(start_server)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        response = await http.post(URL, json=body(user("hi")))
        resumed = await http.get(f"{URL}/{'0' * 32}/stream")
    assert (response.status_code, resumed.status_code) == (401, 401)
    assert harness.service.llm.requests == []


@pytest.mark.parametrize(
    ("payload", "status", "message"),
    [
        (
            {},
            400,
            "invalid ui-stream request: id: Field required; messages: Field required; trigger: Field required",
        ),
        (
            body(),
            400,
            "invalid ui-stream request: messages: List should have at least 1 item after validation, not 0",
        ),
        (
            body(user("hi"), trigger="resume-stream"),
            400,
            "invalid ui-stream request: trigger: Input should be 'submit-message' or 'regenerate-message'",
        ),
        (
            body(user("hi"), extra=1),
            400,
            "invalid ui-stream request: extra: unknown field",
        ),
        (
            body(user(" ")),
            400,
            "invalid ui-stream request: the last user message has no text",
        ),
        (
            body(
                {
                    "id": "u",
                    "role": "user",
                    "parts": [{"type": "file", "url": "x", "mediaType": "text/plain"}],
                }
            ),
            400,
            "file parts are not taken here: upload files with POST /api/conversations/{id}/files",
        ),
        (
            body(user("hi"), trigger="regenerate-message"),
            400,
            "cannot tell the conversation of message 'u1': the chat's id is not one of the caller's conversations and no assistant message names one (open the chat with its conversation's id: useChat({ id: conversationId }))",
        ),
        (
            body(user("hi"), messageId="u1"),
            400,
            "cannot tell the conversation of message 'u1': the chat's id is not one of the caller's conversations and no assistant message names one (open the chat with its conversation's id: useChat({ id: conversationId }))",
        ),
        (
            body(
                {
                    "id": "a",
                    "role": "assistant",
                    "parts": [{"type": "text", "text": "x"}],
                }
            ),
            400,
            "invalid ui-stream request: the last message is the assistant's but answers no approval request",
        ),
        (
            body(
                {
                    "id": "a",
                    "role": "assistant",
                    "metadata": {"conversationId": "../x"},
                    "parts": [],
                },
                user("hi"),
            ),
            400,
            "metadata.conversationId is not a conversation id",
        ),
        (
            body(
                {
                    "id": "a",
                    "role": "assistant",
                    "metadata": {"conversationId": "0" * 32},
                    "parts": [],
                },
                user("hi"),
            ),
            404,
            f"no conversation {'0' * 32!r}",
        ),
        (body(user("x" * 70_000)), 413, "the message is over 65536 bytes, the limit"),
    ],
)
async def test_bad_requests_are_refused_clearly(
    start_server: StartServer, payload: dict[str, Any], status: int, message: str
) -> None:
    """Each malformed or unsupported request gets its status and a message saying what is wrong."""
    harness = await serve(start_server)
    async with client(harness) as http:
        response = await http.post(URL, json=payload)
    assert (response.status_code, response.json()["message"]) == (status, message)
    assert harness.service.llm.requests == []


async def test_an_approval_nothing_waits_on_is_a_409(start_server: StartServer) -> None:
    """Approving when no run waits is refused as `no_pending_approval`, and nothing runs."""
    harness = await serve(start_server, reason("a", finish=True, final="hello"))
    async with client(harness) as http:
        first = await post(http, body(user("hi")))
        stale = approval_response(
            [
                *first[:1],
                {
                    "type": "tool-approval-request",
                    "approvalId": "call_9",
                    "toolCallId": "call_9",
                },
            ],
            True,
        )
        response = await http.post(URL, json=body(user("hi"), stale))
    assert (response.status_code, response.json()["error_type"]) == (
        409,
        "no_pending_approval",
    )


# ------------------------------------------------------------- the ai package

NODE_SCRIPT = """
import {
  DefaultChatTransport, parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema,
} from 'ai';

const url = process.env.UI_STREAM_URL;
const headers = { authorization: `Bearer ${process.env.TOKEN}` };

async function last(stream, message) {
  let latest;
  for await (const m of readUIMessageStream({ stream, message, terminateOnError: true })) latest = m;
  return latest;
}

// 1: Node's fetch, the SDK's own SSE parser and message reader
const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'remember milk' }] };
const response = await fetch(url, {
  method: 'POST',
  headers: { ...headers, 'content-type': 'application/json' },
  body: JSON.stringify({ id: 'chat-1', messages: [user], trigger: 'submit-message' }),
});
const chunks = parseJsonEventStream({ stream: response.body, schema: uiMessageChunkSchema })
  .pipeThrough(new TransformStream({
    transform(result, controller) {
      if (!result.success) throw result.error;
      controller.enqueue(result.value);
    },
  }));
const asked = await last(chunks);

// 2: the user approves, as useChat's addToolApprovalResponse does; the
// SDK's transport sends the messages back and reads the answer
const approved = structuredClone(asked);
for (const part of approved.parts) {
  if (part.type === 'dynamic-tool' && part.state === 'approval-requested') {
    part.state = 'approval-responded';
    part.approval = { ...part.approval, approved: true };
  }
}
const transport = new DefaultChatTransport({ api: url, headers });
const stream = await transport.sendMessages({
  chatId: 'chat-1', messages: [user, approved], trigger: 'submit-message',
  messageId: approved.id, abortSignal: undefined,
});
const answered = await last(stream, approved);
console.log(JSON.stringify({
  header: response.headers.get('x-vercel-ai-ui-message-stream'), asked, answered,
}));
"""


@needs_node
async def test_the_ai_package_reads_a_tool_call_an_approval_and_the_answer(
    start_server: StartServer,
) -> None:
    """The `ai` package's parser and `readUIMessageStream` build the message through an approval to the answer."""
    saver = Saver()
    harness = await serve(
        start_server,
        *save_run(observe(should_continue=False, final="Saved: milk.")),
        saver=saver,
    )
    out = await run_node(
        NODE_SCRIPT, {"UI_STREAM_URL": harness.server.url(URL), "TOKEN": TOKEN}
    )
    result = json.loads(out)
    asked, answered = result["asked"], result["answered"]
    conversation, run = asked["metadata"]["conversationId"], asked["id"]
    call = answered["parts"][3]["toolCallId"]
    assert result["header"] == "v1"
    assert named(answered, C=conversation, R=run, X=call) == {
        "id": "R",
        "role": "assistant",
        "metadata": {
            "conversationId": "C",
            "runId": "R",
            "steps": 1,
            "reason": "finished",
            "usage": usage(30, 30, 3),
        },
        "parts": [
            {"type": "data-loopwire-update", "data": AGENT_START["data"]},
            {"type": "step-start"},
            {
                "type": "reasoning",
                "id": "R-reasoning-3",
                "text": "I will work it out.",
                "state": "done",
            },
            {
                "type": "dynamic-tool",
                "toolName": "save",
                "toolCallId": "X",
                "state": "output-available",
                "input": {"text": "milk"},
                "output": {"saved": "milk"},
                "approval": {"id": "X", "approved": True},
            },
            {
                "type": "data-loopwire-approval",
                "id": "X",
                "data": {
                    "toolCallId": "X",
                    "toolName": "save",
                    "description": "Save a note (asks the user first).",
                    "step": 1,
                    "inDoubt": False,
                    "untrustedSources": [],
                },
            },
            {
                "type": "reasoning",
                "id": "R-reasoning-7",
                "text": "The result is in.",
                "state": "done",
            },
            {"type": "text", "text": "Saved: milk.", "state": "done"},
        ],
    }
    assert saver.saved == ["milk"]


CHAT_SCRIPT = """
import {
  AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses,
} from 'ai';

class State {  // what useChat keeps in React state, as plain fields
  status = 'ready'; error = undefined; messages = [];
  pushMessage = m => { this.messages = [...this.messages, m]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = this.messages.map((x, j) => (j === i ? m : x)); };
  snapshot = thing => structuredClone(thing);
}

let finished;
const chat = new (class extends AbstractChat {})({
  state: new State(),
  transport: new DefaultChatTransport({
    api: process.env.UI_STREAM_URL,
    headers: { authorization: `Bearer ${process.env.TOKEN}` },
  }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  onError: error => { console.error(error); process.exit(1); },
  onFinish: () => finished?.(),
});
const settled = () => new Promise(resolve => { finished = resolve; });

await chat.sendMessage({ text: 'remember milk' });
const asking = chat.messages.at(-1).parts.find(p => p.state === 'approval-requested');
const approvedAnswer = settled();
await chat.addToolApprovalResponse({ id: asking.approval.id, approved: true });
await approvedAnswer;
await chat.sendMessage({ text: 'convert 10 miles' });
await chat.sendMessage({ text: 'km' });
console.log(JSON.stringify(chat.messages));
"""


def outline(message: dict[str, Any]) -> tuple[str, list[str]]:
    """A UI message as its role and its parts' kinds (a tool: its state,
    a text or a question: what it says)."""
    kinds = []
    for part in message["parts"]:
        if part["type"] == "dynamic-tool":
            kinds.append(f"{part['toolName']}:{part['state']}")
        elif part["type"] == "text":
            kinds.append(f"text:{part['text']}")
        elif part["type"] == "data-loopwire-question":
            kinds.append(f"question:{part['data']['question']}")
        elif part["type"] != "data-loopwire-update":
            kinds.append(part["type"])
    return message["role"], kinds


@needs_node
async def test_the_ai_package_chat_drives_an_approval_and_a_question(
    start_server: StartServer,
) -> None:
    """The SDK's own `Chat` with `DefaultChatTransport`, headless: an approval sent automatically, then a question answered."""
    saver = Saver()
    harness = await serve(
        start_server,
        *save_run(observe(should_continue=False, final="Saved.")),
        *asks_which_unit(),
        saver=saver,
    )
    out = await run_node(
        CHAT_SCRIPT, {"UI_STREAM_URL": harness.server.url(URL), "TOKEN": TOKEN}
    )
    messages = json.loads(out)
    assert [outline(m) for m in messages] == [
        ("user", ["text:remember milk"]),
        (
            "assistant",
            [
                "step-start",
                "reasoning",
                "save:output-available",
                "data-loopwire-approval",
                "reasoning",
                "text:Saved.",
            ],
        ),
        ("user", ["text:convert 10 miles"]),
        ("assistant", ["step-start", "reasoning", "question:Which unit?"]),
        ("user", ["text:km"]),
        (
            "assistant",
            ["step-start", "reasoning", "step-start", "reasoning", "text:16.09 km"],
        ),
    ]
    runs = {m["metadata"]["runId"] for m in messages if m["role"] == "assistant"}
    conversations = {
        m["metadata"]["conversationId"] for m in messages if m["role"] == "assistant"
    }
    assert len(runs) == 2 and len(conversations) == 1
    assert messages[5]["id"] == f"{messages[3]['id']}:{messages[3]['parts'][-1]['id']}"
    assert saver.saved == ["milk"]
    history = harness.service.sessions[conversations.pop()].history
    assert [(m.role, m.content) for m in history if m.role != "assistant"] == [
        ("user", "remember milk"),
        ("tool", '{\n  "saved": "milk"\n}'),
        ("user", "convert 10 miles"),
        ("tool", "km"),  # the answer went to the waiting run, not a new one
    ]


EDIT_SCRIPT = """
import { AbstractChat, DefaultChatTransport } from 'ai';

class State {  // what useChat keeps in React state, as plain fields
  status = 'ready'; error = undefined;
  constructor(messages) { this.messages = messages; }
  pushMessage = m => { this.messages = [...this.messages, m]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = this.messages.map((x, j) => (j === i ? m : x)); };
  snapshot = thing => structuredClone(thing);
}

const sent = [];  // what the SDK's transport posted, in short
const transport = new DefaultChatTransport({
  api: process.env.UI_STREAM_URL,
  headers: { authorization: `Bearer ${process.env.TOKEN}` },
  fetch: (url, init) => {
    const body = JSON.parse(init.body);
    sent.push({
      trigger: body.trigger,
      messageId: 'messageId' in body ? body.messageId : '(absent)',
      messages: body.messages.map(m => `${m.role}:${m.id}`),
    });
    return fetch(url, init);
  },
});
const open = (id, messages) => new (class extends AbstractChat {})({
  ...(id ? { id } : {}),
  state: new State(messages),
  transport,
  onError: error => { console.error(error); process.exit(1); },
});

const chat = open(undefined, []);
await chat.sendMessage({ text: 'hi' });
await chat.sendMessage({ text: 'and then?' });
const dropped = chat.messages.at(-1).id;
await chat.regenerate();
const regenerated = structuredClone(chat.messages);

// the page opens the chat again by its conversation's id, as a route
// /chat/[id] does with useChat({ id, messages }), and edits the first message
const conversation = chat.messages.at(-1).metadata.conversationId;
const again = open(conversation, chat.messages);
const first = again.messages[0].id;
await again.sendMessage({ text: 'hello', messageId: first });
console.log(JSON.stringify({
  sent, dropped, first, conversation, regenerated, edited: again.messages,
}));
"""


@needs_node
async def test_the_ai_package_chat_regenerates_and_edits_the_first_message(
    start_server: StartServer,
) -> None:
    """The SDK's own `Chat`: `regenerate()` with no argument, then `sendMessage({ text, messageId })` editing the first message."""
    harness = await serve(start_server, *answers("first", "second", "third", "fourth"))
    out = await run_node(
        EDIT_SCRIPT, {"UI_STREAM_URL": harness.server.url(URL), "TOKEN": TOKEN}
    )
    result = json.loads(out)
    first, conversation = result["first"], result["conversation"]
    regenerated, edited = result["regenerated"], result["edited"]
    u2 = regenerated[2]["id"]
    runs = [regenerated[1]["id"], result["dropped"], regenerated[3]["id"]]
    assert named(result["sent"], U1=first, U2=u2, R1=runs[0]) == [
        {"trigger": "submit-message", "messageId": "(absent)", "messages": ["user:U1"]},
        {
            "trigger": "submit-message",
            "messageId": "(absent)",
            "messages": ["user:U1", "assistant:R1", "user:U2"],
        },
        {
            "trigger": "regenerate-message",
            "messageId": "(absent)",
            "messages": ["user:U1", "assistant:R1", "user:U2"],
        },
        {"trigger": "submit-message", "messageId": "U1", "messages": ["user:U1"]},
    ]
    assert [outline(m) for m in regenerated] == [
        ("user", ["text:hi"]),
        ("assistant", ["step-start", "reasoning", "text:first"]),
        ("user", ["text:and then?"]),
        ("assistant", ["step-start", "reasoning", "text:third"]),
    ]
    assert [outline(m) for m in edited] == [
        ("user", ["text:hello"]),
        ("assistant", ["step-start", "reasoning", "text:fourth"]),
    ]
    assert len(set(runs)) == 3 and edited[0]["id"] == first
    assert [seen(r) for r in harness.service.llm.requests[2:]] == [
        [("user", "hi"), ("assistant", "first"), ("user", "and then?")],
        [("user", "hello")],
    ]
    history = harness.service.sessions[conversation].history
    assert [(m.role, m.content) for m in history] == [
        ("user", "hello"),
        ("assistant", "fourth"),
    ]
    assert await saved_runs(harness, conversation) == [edited[1]["id"]]


async def test_a_stop_ends_the_stream_with_the_stopped_run(
    start_server: StartServer,
) -> None:
    """A Stop sent while the stream runs ends it with the stop's update and `finish` `other`."""
    hang = Hang()
    harness = await serve(start_server, hang)
    async with (
        client(harness) as http,
        http.stream("POST", URL, json=body(user("go"))) as response,
    ):
        stream = lines(response)
        first = [await anext(stream) for _ in range(3)]
        conversation, run = started(first)
        await hang.started.wait()
        await http.post(f"/api/conversations/{conversation}/stop", json={})
        rest = [part async for part in stream]
    assert named(first + rest, C=conversation, R=run) == [
        START,
        AGENT_START,
        {"type": "start-step"},
        {
            "type": "data-loopwire-update",
            "data": {"update_type": "agent_stopped", "step": 1, "mode": "immediate"},
        },
        {"type": "finish-step"},
        finish("other", steps=1, reason="stopped", usage=usage(0, 0, 0)),
        DONE,
    ]


def frames(*payloads: dict[str, Any]) -> list[Any]:
    """Frames of run `R` in conversation `C`, numbered from 1."""
    envelope = {"session_id": "C", "run_id": "R", "ts": 0.0}
    return [
        server_message_adapter.validate_python({**envelope, "seq": seq, **payload})
        for seq, payload in enumerate(payloads, 1)
    ]


def test_every_other_frame_of_a_run_has_its_part() -> None:
    """Plans, thinking, streamed tokens, tool failures, errors, sources and the loop's other news each map to their parts."""
    update = {"type": "agent_update"}
    run = frames(
        {
            **update,
            "update_type": "agent_plan",
            "step": 0,
            "steps": ["Add.", "Say."],
            "revision": 1,
            "content": "A plan.",
        },
        {**update, "update_type": "agent_turn_start", "step": 1, "max_steps": 1},
        {"type": "thinking", "step": 1, "phase": "act", "content": "Hmm."},
        {
            "type": "tool_start",
            "tool_call_id": "c1",
            "tool_name": "fail",
            "arguments": "{oops",
            "step": 1,
        },
        {
            "type": "tool_error",
            "tool_call_id": "c1",
            "tool_name": "fail",
            "error": "bad",
            "status": "failed",
            "duration_ms": 1.0,
            "step": 1,
        },
        {**update, "update_type": "agent_max_steps_reached", "steps": 1},
        {"type": "token_stream", "token": "Five", "is_first": True, "is_last": False},
        {"type": "token_stream", "token": ".", "is_first": False, "is_last": False},
        {"type": "thinking", "step": 1, "phase": "final", "content": "Sure."},
        {"type": "token_stream", "token": "", "is_first": False, "is_last": True},
        {"type": "error", "message": "the model failed", "error_type": "llm_error"},
        {
            "type": "chat_response",
            "message": "Five.",
            "sources": [{"source": "docs", "path": "a.md", "location": "page 2"}],
        },
        {"type": "response_complete"},
        {"type": "token_stream", "token": "late", "is_first": True, "is_last": True},
    )
    parts = Parts("C", "R")
    other = server_message_adapter.validate_python(
        {
            "type": "token_stream",
            "token": "x",
            "is_first": True,
            "is_last": True,
            "seq": 99,
            "session_id": "C",
            "run_id": "another",
            "ts": 0.0,
        }
    )
    seen = [chunk for frame in [other, *run] for chunk in parts.see(frame)]
    assert seen == [
        {"type": "start-step"},
        *reasoning("R-reasoning-1", "A plan.\n\n1. Add.\n2. Say."),
        {"type": "finish-step"},
        {"type": "start-step"},
        *reasoning("R-reasoning-3", "Hmm."),
        *tool_call("c1", "fail", "{oops"),
        {
            "type": "tool-output-error",
            "toolCallId": "c1",
            "errorText": "bad",
            "dynamic": True,
        },
        {
            "type": "data-loopwire-update",
            "data": {"update_type": "agent_max_steps_reached", "steps": 1},
        },
        {"type": "text-start", "id": "R-text-7"},
        {"type": "text-delta", "id": "R-text-7", "delta": "Five"},
        {"type": "text-delta", "id": "R-text-7", "delta": "."},
        {"type": "text-end", "id": "R-text-7"},
        *reasoning("R-reasoning-9", "Sure."),
        {"type": "error", "errorText": "the model failed"},
        {
            "type": "source-document",
            "sourceId": "docs:a.md#page 2",
            "mediaType": "text/plain",
            "title": "a.md (page 2)",
            "filename": "a.md",
        },
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]
    assert parts.ended


async def test_another_users_conversation_is_out_of_reach(
    start_server: StartServer, tmp_path: Any
) -> None:
    """Another user naming someone's conversation gets a new one by chat id, a 404 by metadata, a 204 on resume."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {TOKEN}\nbob: bob-token-0123456789abc\n")
    tokens.chmod(0o600)
    hang = Hang()
    harness = await start_server(
        ScriptedLLM(hang, reason("b", finish=True, final="hi bob")),
        approval_registry(),
        auth_tokens_file=tokens,
    )
    bob = {"Authorization": "Bearer bob-token-0123456789abc"}
    async with client(harness) as http:
        payload = body(user("go"), detach=True)
        async with http.stream("POST", URL, json=payload) as response:
            conversation, _ = started([await anext(lines(response))])
        await hang.started.wait()
        by_id = await http.post(
            URL, json=body(user("hi"), id=conversation), headers=bob
        )
        named_in = {
            "id": "a",
            "role": "assistant",
            "metadata": {"conversationId": conversation},
            "parts": [],
        }
        by_metadata = await http.post(URL, json=body(named_in, user("hi")), headers=bob)
        resumed = await http.get(f"{URL}/{conversation}/stream", headers=bob)
        assert not hang.cancelled.is_set()
        await http.post(f"/api/conversations/{conversation}/stop", json={})
    await hang.cancelled.wait()
    assert by_id.status_code == 200
    assert by_id.headers["x-loopwire-conversation-id"] != conversation
    assert (by_metadata.status_code, by_metadata.json()["error_type"]) == (
        404,
        "not_found",
    )
    assert resumed.status_code == 204


def sse_parts(response: httpx.Response) -> list[Any]:
    """The parts of a whole UI message stream body, `[DONE]` last."""
    datas = [
        line.removeprefix("data: ")
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    return [d if d == DONE else json.loads(d) for d in datas]


def kinds(parts: list[Any]) -> list[str]:
    return [p if p == DONE else p["type"] for p in parts]


async def test_an_approval_and_a_question_through_another_instance(
    offline_cluster: ClusterHarness,
) -> None:
    """Behind nginx, a decision and an answer sent through another instance reach the run where its owner keeps it."""
    cluster = offline_cluster
    first = await cluster.request("POST", URL, json=body(user(APPROVAL[0])))
    owner = first.headers[HEADER]
    asked = sse_parts(first)
    conversation, run = started(asked)
    assert kinds(asked)[-5:] == [
        "tool-approval-request",
        "data-loopwire-approval",
        "finish-step",
        "finish",
        DONE,
    ]
    await cluster.after(owner)
    decided = approval_response(asked, approved=True)
    decided["parts"][1]["toolName"] = "save_note"
    second = await cluster.request(
        "POST", URL, json=body(user(APPROVAL[0]), decided, id=conversation)
    )
    assert second.headers[HEADER] != owner
    saved = sse_parts(second)
    assert started(saved) == (conversation, run)
    assert kinds(saved)[:2] == ["start", "tool-output-available"]
    assert saved[-2]["finishReason"] == "stop" and saved[-1] == DONE

    third = await cluster.request(
        "POST", URL, json=body(user(QUESTION[0], "u2"), id=conversation)
    )
    question = sse_parts(third)
    assert kinds(question)[-4:] == [
        "data-loopwire-question",
        "finish-step",
        "finish",
        DONE,
    ]
    await cluster.after(owner)
    waiting = {
        "id": question[0]["messageId"],
        "role": "assistant",
        "metadata": question[0]["messageMetadata"],
        "parts": [question[-4]],
    }
    answered = await cluster.request(
        "POST", URL, json=body(waiting, user("km", "u3"), id=conversation)
    )
    assert answered.headers[HEADER] != owner
    rest = sse_parts(answered)
    assert rest[0]["messageId"] == f"{started(question)[1]}:{question[-4]['id']}"
    assert rest[-2]["finishReason"] == "stop" and rest[-1] == DONE


async def test_an_abort_through_another_instance_stops_the_run(
    pg_database_url: str, redis_url: str, fake_openai: FakeOpenAIServer
) -> None:
    """Behind nginx, a stream aborted on one instance stops the run its owner runs."""
    dropped = await dropped_elsewhere(
        pg_database_url,
        redis_url,
        fake_openai,
        URL,
        lambda conversation: {"json": body(user("think hard"), id=conversation)},
    )
    first = json.loads(dropped.first.removeprefix("data: "))
    assert started([first])[0] == dropped.conversation


async def test_an_edit_through_another_instance_replaces_the_owners_runs(
    offline_cluster: ClusterHarness,
) -> None:
    """Behind nginx, an edit and a `regenerate()` sent through another instance replace the runs the owner saved."""
    cluster = offline_cluster
    first = await cluster.request("POST", URL, json=body(user("hi")))
    owner = first.headers[HEADER]
    said = sse_parts(first)
    conversation, run_1 = started(said)
    await cluster.after(owner)
    sent = [user("hi"), answer_of(said), user("and then?", "u2")]
    second = await cluster.request("POST", URL, json=body(*sent))
    assert second.headers[HEADER] != owner
    await cluster.after(owner)
    again = await cluster.request(
        "POST", URL, json=body(*sent, trigger="regenerate-message")
    )
    assert again.headers[HEADER] != owner
    _, run_3 = started(sse_parts(again))
    await cluster.after(owner)
    edited = await cluster.request(
        "POST", URL, json=body(user("hello", "u1"), messageId="u1", id=conversation)
    )
    assert edited.headers[HEADER] != owner
    parts = sse_parts(edited)
    _, run_4 = started(parts)
    assert kinds(parts)[-3:] == ["finish-step", "finish", DONE]
    stored = (await cluster.request("GET", f"/api/conversations/{conversation}")).json()
    assert [run["id"] for run in stored["runs"]] == [run_4]
    assert [m["content"] for m in stored["messages"] if m["role"] == "user"] == [
        "hello"
    ]
    assert len({run_1, started(sse_parts(second))[1], run_3, run_4}) == 4
