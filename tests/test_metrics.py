"""`GET /metrics`: what a live server counts, read back from its Prometheus
exposition: runs by strategy and reason, model calls and tokens, tool calls,
phases, a stop's latency, sessions by state, frames, refusals by a rate
limit; protected like the API unless `LOOPWIRE_METRICS_PUBLIC=1`."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Harness, StartServer
from tests.fakes import (
    ScriptedLLM,
    SlowTool,
    calls,
    observe,
    reason,
    test_registry,
)

TOKEN = "metrics-token-0123456789"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


async def scrape(
    harness: Harness, **headers: str
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of `/metrics`, by name and labels."""
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        response = await http.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float],
    name: str,
    **labels: str,
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_a_run_with_a_tool_and_a_stopped_run_are_counted(
    start_server: StartServer,
) -> None:
    """One react run that finishes after a tool call and one that is stopped
    in its tool: each run, model call, token and tool call is counted once,
    the phases are timed, the stop's latency observed."""
    slow = SlowTool()
    said = [
        reason("add", tools=["add"]),
        observe(should_continue=False, final="It is 5."),
        reason("wait", tools=["slow"]),
    ]
    llm = ScriptedLLM(
        said[0],
        calls(("add", {"expression": "2+3"})),
        said[1],
        said[2],
        calls(("slow", {"label": "a"})),
    )
    harness = await start_server(llm, test_registry(slow))
    client, _ = await harness.ready_client()
    await client.chat("2+3?", agent_mode=True)
    await client.send(type="chat", content="wait", agent_mode=True)
    await slow.started.wait()
    await client.send(type="agent_control", action="stop")
    stopped = await client.run()
    assert stopped[-2]["reason"] == "stopped"

    samples = await scrape(harness)
    assert (
        value(samples, "loopwire_runs_total", strategy="react", reason="finished") == 1
    )
    assert (
        value(samples, "loopwire_runs_total", strategy="react", reason="stopped") == 1
    )
    assert value(samples, "loopwire_run_duration_seconds_count", strategy="react") == 2
    model = "scripted-model"
    assert value(samples, "loopwire_llm_calls_total", model=model, outcome="ok") == 5
    assert value(samples, "loopwire_llm_call_duration_seconds_count", model=model) == 5
    assert value(samples, "loopwire_llm_tokens_total", model=model, kind="input") == 50
    output = sum(len(text.split()) for text in said)  # the fake counts words
    assert (
        value(samples, "loopwire_llm_tokens_total", model=model, kind="output")
        == output
    )
    assert value(samples, "loopwire_tool_calls_total", tool="add", status="ok") == 1
    assert (
        value(samples, "loopwire_tool_calls_total", tool="slow", status="cancelled")
        == 1
    )
    assert value(samples, "loopwire_phase_duration_seconds_count", phase="reason") == 2
    assert value(samples, "loopwire_phase_duration_seconds_count", phase="act") == 2
    assert value(samples, "loopwire_phase_duration_seconds_count", phase="observe") == 1
    assert value(samples, "loopwire_stop_latency_seconds_count") == 1
    assert 0 < value(samples, "loopwire_stop_latency_seconds_sum") < 10
    assert value(samples, "loopwire_sessions", state="connected") == 1
    assert value(samples, "loopwire_sessions", state="in_memory") == 1
    assert value(samples, "loopwire_sessions", state="paused") == 0
    assert value(samples, "loopwire_conversations_owned") == 1
    assert value(samples, "loopwire_bus_queue_depth") == 0
    assert value(samples, "loopwire_frames_sent_total") == len(client.seen)
    assert value(samples, "loopwire_store_flush_seconds_count") >= 2


async def test_a_refusal_by_a_rate_limit_is_counted_by_its_limit(
    start_server: StartServer,
) -> None:
    """A run past the runs-per-minute limit is refused and counted as `runs`."""
    harness = await start_server(
        ScriptedLLM("One."),
        test_registry(),
        runs_per_minute=1,
        run_burst=1,
        auth_token=TOKEN,
    )
    client, _ = await harness.ready_client(**BEARER)
    await client.chat("first")
    await client.send(type="chat", content="second")
    refused = await client.until_label("error:rate_limited")
    assert "too many runs" in refused[-1]["message"]
    samples = await scrape(harness, **BEARER)
    assert value(samples, "loopwire_rate_limited_total", limit="runs") == 1


async def test_metrics_need_credentials_unless_made_public(
    start_server: StartServer,
) -> None:
    """With a token set, `/metrics` is a 401 without it and served with it;
    `LOOPWIRE_METRICS_PUBLIC=1` opens it, and only it."""
    guarded = await start_server(ScriptedLLM(), test_registry(), auth_token=TOKEN)
    async with httpx.AsyncClient(base_url=guarded.server.url("")) as http:
        assert (await http.get("/metrics")).status_code == 401
    assert await scrape(guarded, **BEARER)
    public = await start_server(
        ScriptedLLM(), test_registry(), auth_token=TOKEN, metrics_public=True
    )
    assert await scrape(public)
    async with httpx.AsyncClient(base_url=public.server.url("")) as http:
        assert (await http.get("/api/info")).status_code == 401
