"""`POST /api/ag-ui`: loopwire runs as AG-UI 1.0 event streams, read back
with the `ag-ui-protocol` package's own models, and driven by the real
`@ag-ui/client` `HttpAgent` in Node."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
from ag_ui.core import (
    BaseEvent,
    Event,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
)
from pydantic import TypeAdapter

from backend.app import create_app
from tests.cluster_harness import HEADER as INSTANCE
from tests.cluster_harness import ClusterHarness
from tests.conftest import Harness, StartServer, make_settings
from tests.fake_openai import FakeOpenAIServer
from tests.fakes import (
    Hang,
    Saver,
    ScriptedLLM,
    SlowTool,
    approval_registry,
    asks_which_unit,
    calls,
    observe,
    reason,
    test_registry,
)
from tests.js_clients import needs_node, run_node
from tests.live_server import serving
from tests.test_cluster import QUESTION, dropped_elsewhere

TOKEN = "ag-ui-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
REASONING = [
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_END",
]
TOOL_CALL = ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
TEXT = ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]


def run_input(
    thread: str,
    text: str | None = "What is 2+3?",
    *,
    resume: list[dict[str, Any]] | None = None,
    **props: Any,
) -> dict[str, Any]:
    """A `RunAgentInput` as a client sends it (camelCase)."""
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": uuid.uuid4().hex,
        "messages": [],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": props,
    }
    if text is not None:
        body["messages"] = [{"id": "m1", "role": "user", "content": text}]
    if resume is not None:
        body["resume"] = resume
    return body


def parsed(lines: list[str]) -> list[BaseEvent]:
    """The SSE `data:` lines as `ag_ui.core` events."""
    return [
        EVENTS.validate_json(line.removeprefix("data: "))
        for line in lines
        if line.startswith("data: ")
    ]


async def ag_ui(http: httpx.AsyncClient, body: dict[str, Any]) -> list[BaseEvent]:
    """One AG-UI request, its whole event stream."""
    async with http.stream("POST", "/api/ag-ui", json=body) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        return parsed([line async for line in response.aiter_lines()])


def kinds(events: list[BaseEvent]) -> list[str]:
    """Event types, a `CUSTOM` one with its name."""
    return [
        f"CUSTOM:{e.name}" if e.type == "CUSTOM" else str(e.type.value)  # type: ignore[attr-defined]
        for e in events
    ]


def plain(types: list[str]) -> list[str]:
    """Event types as `@ag-ui/client` reports them (a `CUSTOM` one unnamed)."""
    return [t.partition(":")[0] for t in types]


def conversation(events: list[BaseEvent]) -> str:
    started = events[0]
    assert isinstance(started, RunStartedEvent) and started.metadata is not None
    found: str = started.metadata["loopwire"]["conversation_id"]
    return found


def interrupt_of(events: list[BaseEvent]) -> dict[str, Any]:
    last = events[-1]
    assert isinstance(last, RunFinishedEvent) and last.outcome is not None
    dumped: dict[str, Any] = last.outcome.model_dump(by_alias=True)
    assert dumped["type"] == "interrupt"
    (interrupt,) = dumped["interrupts"]
    return dict(interrupt)


def client(harness: Harness) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=harness.server.url(""), timeout=30, headers=AUTH)


async def serve(
    start_server: StartServer, *script: Any, registry: Any = None, **settings: Any
) -> Harness:
    return await start_server(
        ScriptedLLM(*script),
        registry or test_registry(),
        auth_token=TOKEN,
        **settings,
    )


def one_step() -> list[Any]:
    return [
        reason("Add them.", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe("It is 5.", should_continue=False, final="2 + 3 = 5"),
    ]


START = ["RUN_STARTED", "CUSTOM:loopwire.agent_start", "STEP_STARTED", *REASONING]
END = ["CUSTOM:loopwire.agent_completion", "STEP_FINISHED", "RUN_FINISHED"]
RESUMED_QUESTION = [
    "RUN_STARTED",
    "STEP_STARTED",
    *REASONING,  # observe
    "STEP_FINISHED",
    "STEP_STARTED",
    *REASONING,  # reason, with the final answer
    *TEXT,
    *END,
]


async def test_a_run_with_a_tool_call_is_an_ag_ui_event_stream(
    start_server: StartServer,
) -> None:
    """A step with a tool call streams as AG-UI events, in order, to RUN_FINISHED."""
    harness = await serve(start_server, *one_step())
    thread = str(uuid.uuid4())
    async with client(harness) as http:
        events = await ag_ui(http, run_input(thread))
    assert kinds(events) == [
        *START,
        *TOOL_CALL,
        "TOOL_CALL_RESULT",
        *REASONING,
        *TEXT,
        *END,
    ]
    started, finished = events[0], events[-1]
    assert isinstance(started, RunStartedEvent) and started.thread_id == thread
    assert isinstance(finished, RunFinishedEvent) and finished.outcome is None
    assert finished.result is not None and finished.result["answer"] == "2 + 3 = 5"
    args = [e for e in events if e.type == "TOOL_CALL_ARGS"]
    assert json.loads(args[0].delta) == {"expression": "2+3"}  # type: ignore[attr-defined]
    text = [e for e in events if e.type == "TEXT_MESSAGE_CONTENT"]
    assert [t.delta for t in text] == ["2 + 3 = 5"]  # type: ignore[attr-defined]


async def test_a_question_ends_the_run_and_its_answer_resumes_it(
    start_server: StartServer,
) -> None:
    """A question is the interrupt outcome; a resume entry answers it and the run goes on."""
    harness = await serve(
        start_server,
        *asks_which_unit(),
    )
    thread = str(uuid.uuid4())
    async with client(harness) as http:
        first = await ag_ui(http, run_input(thread, "convert 10 miles"))
        interrupt = interrupt_of(first)
        same = conversation(first)
        second = await ag_ui(
            http,
            run_input(
                same,
                resume=[
                    {
                        "interruptId": interrupt["id"],
                        "status": "resolved",
                        "payload": "km",
                    }
                ],
            ),
        )
    assert kinds(first) == [*START, "STEP_FINISHED", "RUN_FINISHED"]
    assert (interrupt["reason"], interrupt["message"]) == (
        "input_required",
        "Which unit?",
    )
    assert interrupt["id"].startswith("question:")
    assert kinds(second) == RESUMED_QUESTION
    assert conversation(second) == same
    history = harness.service.sessions[same].history
    assert [m.content for m in history if m.role == "user"] == ["convert 10 miles"]


async def test_a_form_question_asks_for_its_schema_and_takes_a_value(
    start_server: StartServer,
) -> None:
    """A question with an answer schema is the interrupt's `responseSchema`;
    a resume whose payload is a value (not text) answers it."""
    ok = {"type": "boolean"}
    harness = await serve(
        start_server,
        reason("ask"),
        calls(("request_input", {"question": "Metric?", "answer_schema": ok})),
        observe("yes", should_continue=False, final="16.09 km"),
    )
    async with client(harness) as http:
        first = await ag_ui(http, run_input(str(uuid.uuid4()), "convert 10 miles"))
        interrupt = interrupt_of(first)
        resume = {"interruptId": interrupt["id"], "status": "resolved", "payload": True}
        second = await ag_ui(http, run_input(conversation(first), resume=[resume]))
    assert interrupt["responseSchema"] == ok
    assert kinds(second)[-1] == "RUN_FINISHED"
    history = harness.service.sessions[conversation(first)].history
    assert [m.content for m in history if m.role == "tool"] == ["true"]


async def test_an_approval_ends_the_run_and_the_decision_resumes_it(
    start_server: StartServer,
) -> None:
    """An approval is the interrupt outcome; approving in `resume` runs the tool once."""
    saver = Saver()
    harness = await serve(
        start_server,
        reason("save it", tools=["save"]),
        calls(("save", {"text": "milk"})),
        observe("saved", should_continue=False, final="Saved."),
        registry=approval_registry(saver),
    )
    async with client(harness) as http:
        first = await ag_ui(http, run_input(str(uuid.uuid4()), "remember milk"))
        interrupt = interrupt_of(first)
        decision = {"interruptId": interrupt["id"], "status": "resolved"}
        second = await ag_ui(
            http,
            run_input(
                conversation(first),
                resume=[{**decision, "payload": {"approved": True}}],
            ),
        )
    assert kinds(first) == [*START, *TOOL_CALL, "STEP_FINISHED", "RUN_FINISHED"]
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["toolCallId"] == interrupt["id"].removeprefix("approval:")
    assert kinds(second) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TOOL_CALL_RESULT",
        *REASONING,
        *TEXT,
        *END,
    ]
    assert saver.saved == ["milk"]


async def test_a_client_that_aborts_stops_its_run(start_server: StartServer) -> None:
    """Closing the AG-UI stream stops the loopwire run, which still ends properly."""
    hang = Hang()
    harness = await serve(start_server, hang)
    seen: list[str] = []
    async with (
        client(harness) as http,
        http.stream(
            "POST", "/api/ag-ui", json=run_input(str(uuid.uuid4()), "go")
        ) as response,
    ):
        async for line in response.aiter_lines():
            seen += [str(e.type.value) for e in parsed([line])]
            if seen[-1:] == ["STEP_STARTED"]:
                break
        await hang.started.wait()
    await hang.cancelled.wait()  # the run was stopped when the stream closed
    (session,) = harness.service.sessions.values()
    while session.run is not None:
        await session.run.task
    assert seen == ["RUN_STARTED", "CUSTOM", "STEP_STARTED"]
    assert session.history[-1].role == "assistant"


async def test_another_users_thread_is_a_404(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A thread that is another user's conversation is a 404; a bad input a 400."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {TOKEN}\nbob: bob-token-0123456789abc\n")
    tokens.chmod(0o600)
    harness = await start_server(
        ScriptedLLM(*one_step()), test_registry(), auth_tokens_file=tokens
    )
    bob = {"Authorization": "Bearer bob-token-0123456789abc"}
    async with client(harness) as http:
        events = await ag_ui(http, run_input(str(uuid.uuid4())))
        alice = conversation(events)
        taken = await http.post("/api/ag-ui", json=run_input(alice), headers=bob)
        bad = await http.post("/api/ag-ui", json={"threadId": 1, "runId": "r"})
        nothing = await http.post("/api/ag-ui", json=run_input(alice, None))
        anonymous = await http.post(
            "/api/ag-ui", json=run_input(alice), headers={"Authorization": ""}
        )
        resume = [{"interruptId": "question:call_9", "status": "resolved"}]
        unknown = await http.post(
            "/api/ag-ui", json=run_input(str(uuid.uuid4()), resume=resume)
        )
    assert (taken.status_code, taken.json()["error_type"]) == (404, "not_found")
    assert bad.status_code == 400
    assert [f["field"] for f in bad.json()["fields"]] == ["threadId", "messages"]
    assert (nothing.status_code, nothing.json()["message"]) == (
        400,
        "the last message must be the user's, or the results of the frontend "
        "tool calls the run waits for",
    )
    assert anonymous.status_code == 401
    assert (unknown.status_code, unknown.json()["error_type"]) == (404, "not_found")


async def test_a_new_thread_id_names_its_conversation(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A thread id that spells a conversation id (a UUID) becomes the new
    conversation's; its next input continues it; another user's thread is a
    404; a thread id of another form gets a conversation of its own id."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {TOKEN}\nbob: bob-token-0123456789abc\n")
    tokens.chmod(0o600)
    harness = await start_server(
        ScriptedLLM(*one_step(), *one_step(), *one_step()),
        test_registry(),
        auth_tokens_file=tokens,
    )
    thread = str(uuid.uuid4())
    bob = {"Authorization": "Bearer bob-token-0123456789abc"}
    async with client(harness) as http:
        first = await ag_ui(http, run_input(thread))
        again = await ag_ui(http, run_input(thread, "And 2+3 again?"))
        taken = await http.post("/api/ag-ui", json=run_input(thread), headers=bob)
        other = await ag_ui(http, run_input("thread-from-my-app"))
    same = uuid.UUID(thread).hex
    assert conversation(first) == conversation(again) == same
    history = harness.service.sessions[same].history
    assert [m.content for m in history if m.role == "user"] == [
        "What is 2+3?",
        "And 2+3 again?",
    ]
    assert (taken.status_code, taken.json()["error_type"]) == (404, "not_found")
    assert re.fullmatch(r"[0-9a-f]{32}", conversation(other))
    assert conversation(other) != same


async def test_a_question_survives_a_restart_and_resumes(tmp_path: Path) -> None:
    """An AG-UI interrupt outlives its server; the next input resumes the same run."""
    url = f"sqlite:///{tmp_path / 'loopwire.db'}"
    first_llm = ScriptedLLM(
        reason("ask"), calls(("request_input", {"question": "Which unit?"}))
    )
    settings = make_settings(database_url=url, auth_token=TOKEN)
    app = create_app(settings, llm=first_llm, registry=test_registry())
    async with (
        serving(app, settings=settings) as server,
        httpx.AsyncClient(base_url=server.url(""), timeout=30, headers=AUTH) as http,
    ):
        first = await ag_ui(http, run_input(str(uuid.uuid4()), "convert 10 miles"))
    interrupt = interrupt_of(first)

    again = ScriptedLLM(observe("km it is"), reason("done", finish=True, final="16 km"))
    app = create_app(settings, llm=again, registry=test_registry())
    async with (
        serving(app, settings=settings) as server,
        httpx.AsyncClient(base_url=server.url(""), timeout=30, headers=AUTH) as http,
    ):
        resume = {"interruptId": interrupt["id"], "status": "resolved"}
        second = await ag_ui(
            http, run_input(conversation(first), "km", resume=[resume])
        )
    assert kinds(second) == RESUMED_QUESTION
    finished = second[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.result is not None
    assert finished.result["answer"] == "16 km"
    answered = [(m.role, m.content) for m in again.requests[0].messages[1:4]]
    assert answered == [
        ("user", "convert 10 miles"),
        ("assistant", None),
        ("tool", "km"),
    ]


AGENT_SCRIPT = """
import { HttpAgent } from "@ag-ui/client";

const headers = { Authorization: `Bearer ${process.env.TOKEN}` };
const agent = new HttpAgent({ url: process.env.AG_UI_URL, headers });
const runs = [];

async function run(parameters) {
  const seen = [];
  let conversation;
  let outcome;
  await agent.runAgent(parameters, {
    onEvent: ({ event }) => { seen.push(event.type); },
    onRunStartedEvent: ({ event }) => {
      conversation = event.metadata.loopwire.conversation_id;
    },
    onRunFinishedEvent: (finished) => { outcome = finished.outcome; },
  });
  runs.push({ seen, outcome, pending: agent.pendingInterrupts.map((i) => i.reason) });
  return conversation;
}

agent.addMessage({ id: "u1", role: "user", content: "What is 2+3?" });
agent.threadId = await run({});
agent.addMessage({ id: "u2", role: "user", content: "convert 10 miles" });
await run({});
const [question] = agent.pendingInterrupts;
await run({ resume: [{ interruptId: question.id, status: "resolved", payload: "km" }] });
const answer = agent.messages.filter((m) => m.role === "assistant" && m.content).map((m) => m.content);
console.log(JSON.stringify({ runs, answer }));
"""


@needs_node
async def test_the_ag_ui_client_runs_a_tool_call_a_question_and_its_answer(
    start_server: StartServer,
) -> None:
    """`@ag-ui/client`'s HttpAgent, its event verification on, drives three runs."""
    harness = await serve(
        start_server,
        *one_step(),
        *asks_which_unit(),
    )
    out = await run_node(
        AGENT_SCRIPT,
        {"AG_UI_URL": harness.server.url("/api/ag-ui"), "TOKEN": TOKEN},
    )
    seen = json.loads(out)
    first, asked, answered = seen["runs"]
    assert first == {
        "seen": plain(
            [*START, *TOOL_CALL, "TOOL_CALL_RESULT", *REASONING, *TEXT, *END]
        ),
        "outcome": "success",
        "pending": [],
    }
    assert asked == {
        "seen": plain([*START, "STEP_FINISHED", "RUN_FINISHED"]),
        "outcome": "interrupt",
        "pending": ["input_required"],
    }
    assert answered == {
        "seen": plain(RESUMED_QUESTION),
        "outcome": "success",
        "pending": [],
    }
    assert seen["answer"] == ["2 + 3 = 5", "16.09 km"]


async def test_a_user_message_answers_a_waiting_question(
    start_server: StartServer,
) -> None:
    """Without `resume`, a new user message on the thread answers the question."""
    harness = await serve(
        start_server,
        *asks_which_unit(),
    )
    async with client(harness) as http:
        first = await ag_ui(http, run_input(str(uuid.uuid4()), "convert 10 miles"))
        second = await ag_ui(http, run_input(conversation(first), "km"))
    assert kinds(second) == RESUMED_QUESTION
    history = harness.service.sessions[conversation(first)].history
    assert [(m.role, m.content) for m in history][1:3] == [
        ("assistant", None),
        ("tool", "km"),
    ]


APPROVE_AND_STOP = """
import { HttpAgent } from "@ag-ui/client";

const headers = { Authorization: `Bearer ${process.env.TOKEN}` };
const agent = new HttpAgent({ url: process.env.AG_UI_URL, headers });
const runs = [];

async function run(parameters, stopAt) {
  const seen = [];
  let outcome;
  await agent.runAgent(parameters, {
    onEvent: ({ event }) => {
      seen.push(event.type);
      if (event.type === stopAt) agent.abortRun();
    },
    onRunStartedEvent: ({ event }) => {
      agent.threadId = event.metadata.loopwire.conversation_id;
    },
    onRunFinishedEvent: (finished) => { outcome = finished.outcome; },
  });
  runs.push({ seen, outcome: outcome ?? null });
}

agent.addMessage({ id: "u1", role: "user", content: "remember milk" });
await run({});
const [approval] = agent.pendingInterrupts;
await run({
  resume: [{ interruptId: approval.id, status: "resolved", payload: { approved: true } }],
});
agent.addMessage({ id: "u2", role: "user", content: "now wait" });
await run({}, "TOOL_CALL_END");
console.log(JSON.stringify({ runs, reason: approval.reason }));
"""


@needs_node
async def test_the_ag_ui_client_approves_a_call_and_stops_a_run(
    start_server: StartServer, tmp_path: Path
) -> None:
    """HttpAgent answers an approval interrupt, then aborts a run, which stops."""
    saver, slow = Saver(), SlowTool()
    registry = approval_registry(saver)
    registry.add(next(t for t in test_registry(slow) if t.name == "slow"))
    harness = await serve(
        start_server,
        reason("save it", tools=["save"]),
        calls(("save", {"text": "milk"})),
        observe("saved", should_continue=False, final="Saved."),
        reason("wait", tools=["slow"]),
        calls(("slow", {"label": "x"})),
        registry=registry,
        # a file: a stop that cuts a checkpoint short loses an in-memory database
        database_url=f"sqlite:///{tmp_path / 'loopwire.db'}",
    )
    out = await run_node(
        APPROVE_AND_STOP,
        {"AG_UI_URL": harness.server.url("/api/ag-ui"), "TOKEN": TOKEN},
    )
    seen = json.loads(out)
    asked, approved, stopped = seen["runs"]
    assert seen["reason"] == "tool_approval"
    assert asked == {
        "seen": plain([*START, *TOOL_CALL, "STEP_FINISHED", "RUN_FINISHED"]),
        "outcome": "interrupt",
    }
    assert approved == {
        "seen": plain(
            ["RUN_STARTED", "STEP_STARTED", "TOOL_CALL_RESULT", *REASONING, *TEXT, *END]
        ),
        "outcome": "success",
    }
    # the client closes its own run with RUN_ERROR when it aborts
    aborted = plain([*START, *TOOL_CALL, "RUN_ERROR"])
    assert stopped == {"seen": aborted, "outcome": None}
    assert saver.saved == ["milk"]
    (session,) = harness.service.sessions.values()
    while session.run is not None:  # stopped when the client aborted
        await session.run.task
    assert not slow.release.is_set()
    cut, answer = session.history[-2:]
    assert (cut.role, cut.meta.status if cut.meta else None) == ("tool", "cancelled")
    assert answer.content == (
        "(This run was stopped by the user at step 1 before it answered.)"
    )


async def test_a_message_while_a_run_works_is_busy(start_server: StartServer) -> None:
    """A new message on a thread whose run is working (not asking) is a 409 busy."""
    hang = Hang()
    harness = await serve(start_server, hang)
    async with client(harness) as http:
        async with http.stream(
            "POST", "/api/ag-ui", json=run_input(str(uuid.uuid4()), "go", detach=True)
        ) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    first = parsed([line])
                    break
        await hang.started.wait()
        busy = await http.post(
            "/api/ag-ui", json=run_input(conversation(first), "more")
        )
        await http.post(f"/api/conversations/{conversation(first)}/stop", json={})
    await hang.cancelled.wait()
    assert (busy.status_code, busy.json()) == (
        409,
        {"error_type": "busy", "message": "a run is in progress"},
    )


async def test_a_question_is_resumed_through_another_instance(
    offline_cluster: ClusterHarness,
) -> None:
    """Behind nginx, a new thread's id names its conversation, and the
    resume that answers its question, sent in the thread's UUID form through
    an instance that does not own it, reaches the waiting run, which goes
    on where its owner keeps it and finishes."""
    cluster = offline_cluster
    assert cluster.http is not None
    http = cluster.http
    thread = str(uuid.uuid4())
    async with http.stream(
        "POST", "/api/ag-ui", json=run_input(thread, QUESTION[0])
    ) as response:
        owner = response.headers[INSTANCE]
        first = parsed([line async for line in response.aiter_lines()])
    interrupt = interrupt_of(first)
    assert interrupt["reason"] == "input_required"
    assert conversation(first) == uuid.UUID(thread).hex

    await cluster.after(owner)
    answer = {"interruptId": interrupt["id"], "status": "resolved", "payload": "km"}
    async with http.stream(
        "POST", "/api/ag-ui", json=run_input(thread, resume=[answer])
    ) as response:
        assert response.headers[INSTANCE] != owner
        second = parsed([line async for line in response.aiter_lines()])
    assert conversation(second) == uuid.UUID(thread).hex
    assert kinds(second)[-1] == "RUN_FINISHED"
    finished = second[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.outcome is None
    said = "".join(e.delta for e in second if isinstance(e, TextMessageContentEvent))
    assert "16.09" in said


async def test_an_abort_through_another_instance_stops_the_run(
    pg_database_url: str, redis_url: str, fake_openai: FakeOpenAIServer
) -> None:
    """Behind nginx, an AG-UI stream aborted on an instance that does not own
    the thread stops the run its owner runs."""
    dropped = await dropped_elsewhere(
        pg_database_url,
        redis_url,
        fake_openai,
        "/api/ag-ui",
        lambda thread: {"json": run_input(thread, "think hard")},
    )
    (started,) = parsed([dropped.first])
    assert conversation([started]) == dropped.conversation
