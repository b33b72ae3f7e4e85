"""Traces of runs, on OpenTelemetry's GenAI conventions, read from an
in-memory exporter: the span tree of a react run with a tool call, a
question and a Stop; what a model call and a tool call record; no message
content unless the setting asks for it; a run continued from its
checkpoint stays one trace."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from backend.app import make_service
from backend.prompts import PromptProvider
from backend.store.sql import SqlStore
from backend.telemetry.metrics import PrometheusMetrics
from backend.telemetry.otel import OtelTracing
from backend.telemetry.signals import Telemetry, traces_exporter
from tests.conftest import StartServer, make_settings
from tests.fakes import (
    ScriptedLLM,
    SlowTool,
    approval_registry,
    calls,
    observe,
    reason,
    test_registry,
)
from tests.service_harness import ServiceClient, serving
from tests.ws_client import labels

RUN = "invoke_agent loopwire"
ROOT = Path(__file__).resolve().parent.parent


def traced(capture: bool = False) -> tuple[Telemetry, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing = OtelTracing(exporter=exporter, capture_content=capture)
    return Telemetry(tracing, PrometheusMetrics()), exporter


def tree(spans: Sequence[ReadableSpan], root: ReadableSpan) -> list[Any]:
    """`root`'s children in start order, each as its name or (name, children)."""
    assert root.context is not None
    children = sorted(
        (s for s in spans if s.parent and s.parent.span_id == root.context.span_id),
        key=lambda s: s.start_time or 0,
    )
    return [
        (child.name, tree(spans, child)) if tree(spans, child) else child.name
        for child in children
    ]


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def react_with_tool_question_and_stop() -> ScriptedLLM:
    """Step 1 adds with a tool, step 2 asks "Which unit?", step 3 waits in
    the slow tool, where the user stops it."""
    return ScriptedLLM(
        reason("add", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe("5"),
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("km"),
        reason("wait", tools=["slow"]),
        calls(("slow", {"label": "a"})),
    )


async def test_a_react_run_is_one_trace_of_phases_calls_a_wait_and_a_stop() -> None:
    """The run's span holds its phases in order, each model call under its
    phase, the tool call under the tools phase, the wait for the answer,
    and ends `stopped`; the stop is a span linked to the run's. A phase
    that makes no call has no span."""
    telemetry, exporter = traced()
    slow = SlowTool()
    llm = react_with_tool_question_and_stop()
    async with serving(llm, test_registry(slow), telemetry=telemetry) as client:
        await client.send(type="chat", content="2+3 in which unit?", agent_mode=True)
        asked = (await client.until_label("agent_request_input"))[-1]
        await client.send(
            type="agent_user_input", content="km", question_id=asked["question_id"]
        )
        await slow.started.wait()
        await client.send(type="agent_control", action="stop")
        frames = await client.run()
        session_id, instance = client.session.id, client.service.bus.instance_id
    assert labels(frames)[-3:] == [
        "agent_stopped",
        "agent_completion",
        "response_complete",
    ]

    spans = exporter.get_finished_spans()
    run = one(spans, RUN)
    assert run.parent is None and run.kind is SpanKind.INTERNAL
    chat = "chat scripted-model"
    # a phase that only keeps the books (a step's turn, a call announced
    # or settled) makes no span: each phase span holds a call
    assert tree(spans, run) == [
        ("phase reason", [chat]),
        ("phase act", [chat]),
        ("phase tools", ["execute_tool add"]),
        ("phase observe", [chat]),
        ("phase reason", [chat]),
        ("phase act", [chat]),
        "wait question",
        ("phase observe", [chat]),
        ("phase reason", [chat]),
        ("phase act", [chat]),
        ("phase tools", ["execute_tool slow"]),
    ]
    first_reason = min(
        (s for s in spans if s.name == "phase reason"), key=lambda s: s.start_time or 0
    )
    assert attributes(first_reason) == {"loopwire.phase": "reason", "loopwire.step": 1}
    assert first_reason.start_time is not None and run.start_time is not None
    assert first_reason.start_time >= run.start_time
    run_attributes = attributes(run)
    run_id = run_attributes["loopwire.run.id"]
    assert run_attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "react",
        "gen_ai.conversation.id": session_id,
        "loopwire.run.id": run_id,
        "loopwire.strategy": "react",
        "loopwire.instance": instance,
        "enduser.id": "local",
        "loopwire.resumed": False,
        "loopwire.end_reason": "stopped",
        "loopwire.steps": 3,
        "gen_ai.usage.input_tokens": 80,
        "gen_ai.usage.output_tokens": sum(
            attributes(s)["gen_ai.usage.output_tokens"] for s in spans if s.name == chat
        ),
    }
    in_run = [s for s in spans if s.name not in ("stop", "answer")]
    assert {s.context.trace_id for s in in_run} == {run.context.trace_id}
    answer = one(spans, "answer")
    assert [link.context.span_id for link in answer.links] == [run.context.span_id]

    wait = one(spans, "wait question")
    assert attributes(wait) == {"loopwire.step": 2, "loopwire.wait.outcome": "answered"}
    slow_call = one(spans, "execute_tool slow")
    assert attributes(slow_call)["loopwire.cancelled"] is True
    stopped_phase = max(
        (s for s in spans if s.name == "phase tools"), key=lambda s: s.start_time or 0
    )
    assert attributes(stopped_phase)["loopwire.cancelled"] is True

    stop = one(spans, "stop")
    assert stop.parent is None  # the client sent it with no trace of its own
    assert [link.context.span_id for link in stop.links] == [run.context.span_id]
    assert attributes(stop) == {"gen_ai.conversation.id": session_id}


async def test_a_model_call_and_a_tool_call_record_the_gen_ai_attributes() -> None:
    """A `chat` span says the provider, the model, the tokens and the finish
    reason; an `execute_tool` span the tool, its call id, its status and its
    idempotency key; nothing of the messages, arguments or results."""
    telemetry, exporter = traced()
    llm = ScriptedLLM(
        reason("add", tools=["add"]),
        calls(("add", {"expression": "40+2"})),
        observe(should_continue=False, final="It is 42."),
    )
    async with serving(llm, test_registry(), telemetry=telemetry) as client:
        await client.chat("What is 40+2? secret-word", agent_mode=True)
    spans = exporter.get_finished_spans()
    first = min(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time
    )
    assert first.kind is SpanKind.CLIENT
    assert attributes(first) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted-model",
        "loopwire.phase": "reason",
        "gen_ai.response.model": "scripted-model",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": len(reason("add", tools=["add"]).split()),
        "gen_ai.response.finish_reasons": ("unknown",),
        "loopwire.llm.attempts": 1,
    }
    tool = one(spans, "execute_tool add")
    run_id = attributes(one(spans, RUN))["loopwire.run.id"]
    call_id = attributes(tool)["gen_ai.tool.call.id"]
    assert attributes(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": call_id,
        "loopwire.step": 1,
        "loopwire.tool.idempotency_key": f"{run_id}:{call_id}",
        "loopwire.tool.status": "ok",
    }
    assert tool.status.status_code is StatusCode.UNSET
    everything = repr([attributes(s) for s in spans])
    assert "secret-word" not in everything
    assert "40+2" not in everything
    assert "messages" not in everything


async def test_message_contents_are_recorded_only_when_asked() -> None:
    """With the GenAI content setting on, a model call's span carries the
    messages it was sent and the reply."""
    telemetry, exporter = traced(capture=True)
    llm = ScriptedLLM("Paris.")
    async with serving(llm, test_registry(), telemetry=telemetry) as client:
        await client.chat("Capital of France? secret-word")
    call = one(exporter.get_finished_spans(), "chat scripted-model")
    sent = attributes(call)["gen_ai.input.messages"]
    assert '"content": "Capital of France? secret-word"' in sent
    assert attributes(call)["gen_ai.output.messages"] == (
        '[{"role": "assistant", "content": "Paris."}]'
    )


async def test_an_approval_wait_is_a_span_and_its_length_is_on_the_tool_call() -> None:
    """A tool that asks first: the wait for the approval is a span, and the
    tool call's span says how long the person took."""
    telemetry, exporter = traced()
    llm = ScriptedLLM(
        reason("save", tools=["save"]),
        calls(("save", {"text": "milk"})),
        observe(should_continue=False, final="Saved."),
    )
    async with serving(llm, approval_registry(), telemetry=telemetry) as client:
        await client.send(type="chat", content="note milk", agent_mode=True)
        asked = (await client.until_label("tool_approval_request:save"))[-1]
        await client.send(
            type="tool_approval_response",
            tool_call_id=asked["tool_call_id"],
            approved=True,
        )
        await client.run()
    spans = exporter.get_finished_spans()
    wait = one(spans, "wait approval")
    assert attributes(wait) == {
        "loopwire.step": 1,
        "gen_ai.tool.name": "save",
        "loopwire.wait.outcome": "approved",
    }
    waited = attributes(one(spans, "execute_tool save"))
    assert 0 < waited["loopwire.tool.approval_wait_s"] < 60
    assert one(spans, "approval").links[0].context.trace_id == wait.context.trace_id


async def test_a_callers_traceparent_makes_the_run_a_child_of_its_span(
    start_server: StartServer,
) -> None:
    """`POST /api/agent` with a W3C `traceparent`: the run's span is a child
    of the caller's, in the caller's trace; a malformed header starts a
    trace of the run's own."""
    telemetry, exporter = traced()
    llm = ScriptedLLM("One.", "Two.")
    harness = await start_server(llm, test_registry(), telemetry=telemetry)
    caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    async with httpx.AsyncClient(base_url=harness.server.url(""), timeout=30) as http:
        for traceparent in (f"00-{caller_trace}-{caller_span}-01", "00-nonsense"):
            response = await http.post(
                "/api/agent",
                json={"query": "hi", "loop_strategy": "llm_only", "stream": False},
                headers={"traceparent": traceparent},
            )
            assert response.status_code == 200, response.text
    first, second = sorted(
        (s for s in exporter.get_finished_spans() if s.name == RUN),
        key=lambda s: s.start_time or 0,
    )
    assert first.parent is not None
    assert (
        format(first.context.trace_id, "032x"),
        format(first.parent.span_id, "016x"),
    ) == (
        caller_trace,
        caller_span,
    )
    assert second.parent is None
    assert format(second.context.trace_id, "032x") != caller_trace


def test_traces_are_on_only_when_the_standard_variables_say_so() -> None:
    """An OTLP endpoint or a named exporter turns traces on; `none` and the
    SDK's off switch win over them."""
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert traces_exporter({}) is None
    assert traces_exporter(endpoint) == "otlp"
    assert traces_exporter({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "x"}) == "otlp"
    assert traces_exporter({"OTEL_TRACES_EXPORTER": "console"}) == "console"
    assert traces_exporter({**endpoint, "OTEL_TRACES_EXPORTER": "none"}) is None
    assert traces_exporter({**endpoint, "OTEL_SDK_DISABLED": "true"}) is None


async def test_a_run_continued_after_a_restart_stays_one_trace(tmp_path: Path) -> None:
    """A run parked by a shutdown while it waits for an answer goes on in
    the next process under a span of its own, a child of its first one."""
    exporter = InMemorySpanExporter()
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    asked = ScriptedLLM(reason("ask"), calls(("request_input", {"question": "Unit?"})))
    async with restarting(url, asked, exporter) as client:
        await client.send(type="chat", content="convert 10", agent_mode=True)
        question = (await client.until_label("agent_request_input"))[-1]
        session_id = client.session.id
    rest = ScriptedLLM(observe(should_continue=False, final="16.09 km"))
    async with restarting(url, rest, exporter, session_id) as client:
        await client.send(
            type="agent_user_input", content="km", question_id=question["question_id"]
        )
        await client.until_label("response_complete")
    first, second = sorted(
        (s for s in exporter.get_finished_spans() if s.name == RUN),
        key=lambda s: s.start_time or 0,
    )
    assert second.parent is not None
    assert second.parent.span_id == first.context.span_id
    assert second.context.trace_id == first.context.trace_id
    assert attributes(first)["loopwire.parked"] is True
    assert "loopwire.end_reason" not in attributes(first)
    assert attributes(second)["loopwire.resumed"] is True
    assert attributes(second)["loopwire.end_reason"] == "finished"


@asynccontextmanager
async def restarting(
    url: str,
    llm: ScriptedLLM,
    exporter: InMemorySpanExporter,
    session_id: str | None = None,
) -> AsyncIterator[ServiceClient]:
    """One process's service on the database at `url`, traced to `exporter`;
    leaving it shuts the service down (parking what waits)."""
    store = SqlStore(url)
    await store.open()
    telemetry = Telemetry(OtelTracing(exporter=exporter), PrometheusMetrics())
    service = make_service(
        make_settings(database_url=url),
        llm,
        test_registry(),
        PromptProvider(),
        store=store,
        telemetry=telemetry,
    )
    try:
        async with service:
            session, _ = await service.open_session(session_id)
            yield ServiceClient(service, session)
    finally:
        await store.close()


def test_an_exporter_loopwire_cannot_send_to_stops_the_start_with_its_name() -> None:
    """`OTEL_TRACES_EXPORTER=zipkin`: the server does not start, and says
    which exporters it takes (exit status 2, as for any bad setting)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environment |= {
        "OTEL_TRACES_EXPORTER": "zipkin",
        "LOOPWIRE_DATABASE_URL": "sqlite://",
        "LOOPWIRE_PORT": "0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "backend", "serve"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "loopwire: OTEL_TRACES_EXPORTER='zipkin': loopwire sends traces with "
        "otlp (OTLP over HTTP) or console, or none"
    )
