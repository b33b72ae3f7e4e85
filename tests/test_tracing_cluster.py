"""One trace across two instances, from real processes exporting real OTLP.

Two loopwire processes on PostgreSQL and Redis behind nginx send their
spans to an OTLP/HTTP receiver in the test (`tests/otlp_receiver.py`). A
run works on instance A; a person stops it (or answers its question)
through instance B. B records a `stop` (`answer`) span where it received
it; A records one where it acted on it, a child of B's (the bus command
carries B's `traceparent`) and linked to the run's `invoke_agent` span.
The run's span names its instance (`loopwire.instance`); the two control
spans are told apart by their parents: B's starts the trace (or continues
the HTTP caller's), A's continues B's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import pytest

from tests.cluster_harness import HEADER, LEASE_S, ClusterHarness, running_cluster
from tests.fake_openai import FakeOpenAIServer
from tests.otlp_receiver import (
    OtlpReceiver,
    ReceivedSpan,
    described,
    running_otlp_receiver,
)
from tests.test_cluster import QUESTION, elsewhere, hanging, hung_run, paused
from tests.ws_client import Frame, labels

pytestmark = pytest.mark.timeout(180)

RUN = "invoke_agent loopwire"
EXPORTED_S = 30.0
"""How long the spans may take to reach the receiver (a bound, not a pause)."""
CALLER_TRACE, CALLER_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


@asynccontextmanager
async def traced_cluster(
    monkeypatch: pytest.MonkeyPatch,
    pg_database_url: str,
    redis_url: str,
    settings: dict[str, object],
) -> AsyncIterator[tuple[ClusterHarness, OtlpReceiver]]:
    """Two instances with `settings`, exporting their spans to a receiver."""
    async with running_otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "loopwire")
        for unwanted in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"):
            monkeypatch.delenv(unwanted, raising=False)
        async with running_cluster(
            pg_database_url, redis_url, size=2, **settings
        ) as cluster:
            yield cluster, receiver


def named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


def arrived(control: str) -> Callable[[list[ReceivedSpan]], bool]:
    """The run's span has ended (it is exported then) and `control` is in
    from both instances."""
    return lambda spans: bool(named(spans, RUN)) and len(named(spans, control)) == 2


def the_pair(
    spans: list[ReceivedSpan], control: str
) -> tuple[ReceivedSpan, ReceivedSpan]:
    """The `control` span where it was received (B) and the one where it
    was acted on (A): A's is the child of B's."""
    first, second = named(spans, control)
    received, acted = (
        (first, second) if second.parent_span_id == first.span_id else (second, first)
    )
    assert acted.parent_span_id == received.span_id, described(spans)
    return received, acted


def assert_stopped(a_frames: list[Frame]) -> None:
    """What the run's first client saw end: the run stopped."""
    assert labels(a_frames)[-3:] == [
        "agent_stopped",
        "agent_completion",
        "response_complete",
    ]
    assert a_frames[-2]["reason"] == "stopped"


def the_run(
    spans: list[ReceivedSpan], control: str, owner: str, session: str, ending: str
) -> tuple[ReceivedSpan, list[ReceivedSpan]]:
    """The run's span, exported by `owner` and ended with `ending`, and the
    spans in its trace: all of them but the `control`s."""
    (run,) = named(spans, RUN)
    assert run.parent_span_id is None
    assert run.attributes["loopwire.instance"] == owner
    assert run.attributes["loopwire.end_reason"] == ending
    assert run.attributes["gen_ai.conversation.id"] == session
    assert {s.service for s in spans} == {"loopwire"}
    in_run = [s for s in spans if s.name != control]
    assert {s.trace_id for s in in_run} == {run.trace_id}, described(spans)
    return run, in_run


def under(spans: list[ReceivedSpan]) -> list[tuple[str, str | None, str]]:
    """Each span as (name, its parent's name, kind), sorted."""
    names = {s.span_id: s.name for s in spans}
    return sorted(
        (
            s.name,
            names.get(s.parent_span_id) if s.parent_span_id else None,
            s.kind,
        )
        for s in spans
    )


def hung_and_stopped(model: str) -> list[tuple[str, str | None, str]]:
    """The spans of a run stopped in its first model call, as `under` shows them."""
    return [
        (f"chat {model}", "phase reason", "client"),
        (RUN, None, "internal"),
        ("phase reason", RUN, "internal"),
    ]


async def test_a_stop_sent_through_another_instance_is_one_trace_across_both(
    monkeypatch: pytest.MonkeyPatch,
    pg_database_url: str,
    redis_url: str,
    fake_openai: FakeOpenAIServer,
) -> None:
    """B's `stop` span starts a trace that A's `stop` continues as its child,
    linked to A's run span; the run's spans are all in the run's trace."""
    settings = hanging(fake_openai)
    async with (
        traced_cluster(monkeypatch, pg_database_url, redis_url, settings) as traced,
        AsyncExitStack() as stack,
    ):
        cluster, receiver = traced
        a, owner, session = await hung_run(cluster, stack, fake_openai)
        b, _, _ = await elsewhere(cluster, stack, session, owner)
        await b.until_label("agent_turn_start")
        await b.send(type="agent_control", action="stop")
        await b.run()
        assert_stopped(await a.run())
        spans = await receiver.until(arrived("stop"), EXPORTED_S)

    run, in_run = the_run(spans, "stop", owner, session, "stopped")
    assert under(in_run) == hung_and_stopped(fake_openai.requests[0]["model"])
    (call,) = [s for s in in_run if s.kind == "client"]
    assert call.attributes["loopwire.cancelled"] is True
    received, acted = the_pair(spans, "stop")
    assert received.parent_span_id is None  # the client sent no traceparent
    assert received.links == []
    assert acted.trace_id == received.trace_id != run.trace_id
    assert acted.links == [(run.trace_id, run.span_id)]
    for stop in (received, acted):
        assert stop.attributes == {"gen_ai.conversation.id": session}


async def test_an_http_stop_with_a_traceparent_is_traced_under_the_callers_span(
    monkeypatch: pytest.MonkeyPatch,
    pg_database_url: str,
    redis_url: str,
    fake_openai: FakeOpenAIServer,
) -> None:
    """`POST …/stop` with a `traceparent` through B: B's `stop` is a child of
    the caller's span, A's a child of B's, in the caller's trace."""
    settings = hanging(fake_openai)
    async with (
        traced_cluster(monkeypatch, pg_database_url, redis_url, settings) as traced,
        AsyncExitStack() as stack,
    ):
        cluster, receiver = traced
        a, owner, session = await hung_run(cluster, stack, fake_openai)
        await cluster.after(owner)
        response = await cluster.request(
            "POST",
            f"/api/conversations/{session}/stop",
            json={},
            headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
        )
        assert response.headers[HEADER] != owner
        assert (response.status_code, response.json()) == (
            200,
            {"status": "stopping", "mode": "immediate"},
        )
        assert_stopped(await a.run())
        spans = await receiver.until(arrived("stop"), EXPORTED_S)

    run, in_run = the_run(spans, "stop", owner, session, "stopped")
    assert under(in_run) == hung_and_stopped(fake_openai.requests[0]["model"])
    assert run.trace_id != CALLER_TRACE
    received, acted = the_pair(spans, "stop")
    assert (received.trace_id, received.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert received.links == []
    assert acted.trace_id == CALLER_TRACE
    assert acted.links == [(run.trace_id, run.span_id)]


async def test_an_answer_sent_through_another_instance_is_one_trace_across_both(
    monkeypatch: pytest.MonkeyPatch, pg_database_url: str, redis_url: str
) -> None:
    """B's `answer` span starts a trace that A's `answer` continues as its
    child, linked to the run's span; the answered run goes on in its trace."""
    offline: dict[str, object] = {"lease_ttl_s": LEASE_S}
    async with (
        traced_cluster(monkeypatch, pg_database_url, redis_url, offline) as traced,
        AsyncExitStack() as stack,
    ):
        cluster, receiver = traced
        a, owner, session, question = await paused(cluster, stack, *QUESTION)
        b, _, _ = await elsewhere(cluster, stack, session, owner)
        await b.send(
            type="agent_user_input", content="km", question_id=question["question_id"]
        )
        await b.run()
        assert labels(await a.run())[-1] == "response_complete"
        spans = await receiver.until(arrived("answer"), EXPORTED_S)

    run, in_run = the_run(spans, "answer", owner, session, "finished")
    (wait,) = named(in_run, "wait question")
    assert (wait.parent_span_id, wait.attributes["loopwire.wait.outcome"]) == (
        run.span_id,
        "answered",
    )
    tools = [s for s in in_run if s.name.startswith("execute_tool ")]
    assert [s.name for s in tools] == [
        "execute_tool calculator",
        "execute_tool convert_units",
    ]
    parents = {s.span_id: s.name for s in in_run}
    for span in in_run:
        if span.name.startswith("chat "):
            assert (span.kind, parents[span.parent_span_id or ""][:6]) == (
                "client",
                "phase ",
            )
        elif span.name.startswith("phase "):
            assert span.parent_span_id == run.span_id
    received, acted = the_pair(spans, "answer")
    assert (received.parent_span_id, received.links) == (None, [])
    assert acted.trace_id == received.trace_id != run.trace_id
    assert acted.links == [(run.trace_id, run.span_id)]
