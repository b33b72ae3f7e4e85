"""A real Prometheus from Debian's packages (devcluster/prometheus_server.py)
scraping a live loopwire process whose model is the fake OpenAI-compatible
server: Prometheus's HTTP API finds exactly the runs, model calls, tokens
and tool calls the test made, with `/metrics` public or behind a bearer
token; and `promtool check metrics` finds nothing wrong in an exposition.

Waiting for Prometheus to have the new figures is driven by the scrapes
themselves, read from loopwire's access log, never by sleeping or polling:
Prometheus scrapes a target in one loop (request, store, commit, then wait
for the next tick), so once a third `GET /metrics` is logged after the last
run's answer, the second one was made after the runs ended (the first may
have been answered while they did) and is committed.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from devcluster.prometheus_server import (
    PrometheusServer,
    check_metrics,
    unavailable_reason,
)
from tests.conftest import StartServer
from tests.fake_openai import FakeOpenAIServer, FakeUsage, Reply
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry
from tests.server_process import ServerProcess, server_process

TOKEN = "scrape-token"
MODEL = "fake-gpt"
RUNS = 2
SCRAPE_LIMIT_S = 30.0
LAST_ANSWER = '"POST /api/agent HTTP/1.1" 200'
SCRAPE = '"GET /metrics HTTP/1.1" 200'


@pytest.fixture(autouse=True)
def _prometheus_installed() -> None:
    """Skipped, with the reason, where Prometheus cannot run; under CI
    (`make test` installs it) it must."""
    reason = unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI installs Prometheus, yet: {reason}")
    pytest.skip(reason)


async def test_promtool_finds_nothing_wrong_in_the_exposition(
    start_server: StartServer,
) -> None:
    """After a react run with a tool call, `promtool check metrics` passes
    on `/metrics` as served."""
    llm = ScriptedLLM(
        reason("add", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe(should_continue=False, final="It is 5."),
    )
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()
    await client.chat("2+3?", agent_mode=True)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        exposition = (await http.get("/metrics")).text
    assert 'loopwire_tool_calls_total{status="ok",tool="add"} 1.0' in exposition
    assert await asyncio.to_thread(check_metrics, exposition) == (0, "")


def scripted_runs(runs: int) -> list[Reply]:
    """What the fake model answers `runs` react runs with: reason, one
    calculator call, observe; each reply reporting its own usage."""
    replies: list[Reply] = []
    for n in range(runs):
        replies += [
            Reply(
                content=reason(f"Add {n} and 2.", tools=["calculator"]),
                usage=FakeUsage(100 + n, 11),
            ),
            Reply(
                tool_calls=[("calculator", {"expression": f"{n}+2"})],
                usage=FakeUsage(200 + n, 7),
            ),
            Reply(
                content=observe(should_continue=False, final=f"It is {n + 2}."),
                usage=FakeUsage(300 + n, 13),
            ),
        ]
    return replies


def scrapes_after_last_answer(lines: list[str]) -> int:
    """How many `/metrics` requests are logged after the last run's answer."""
    answers = [i for i, line in enumerate(lines) if LAST_ANSWER in line]
    after = lines[answers[-1] + 1 :] if answers else lines
    return sum(SCRAPE in line for line in after)


async def scraped_since_the_runs(server: ServerProcess) -> None:
    """Return once Prometheus has stored a scrape made after the runs ended:
    three scrapes logged after the last answer (see the module's docstring).
    Waits on the server's log lines as they come (its `logged()` finds only
    a first match, so this waits on the same condition for a count)."""
    new_line = server._new_line
    async with asyncio.timeout(SCRAPE_LIMIT_S), new_line:
        await new_line.wait_for(lambda: scrapes_after_last_answer(server.lines) >= 3)


def by_labels(
    prometheus: PrometheusServer, promql: str, *names: str
) -> dict[tuple[str, ...], float]:
    """An instant query's series, as the values of the `names` labels → value."""
    return {
        tuple(series["metric"].get(name, "") for name in names): float(
            series["value"][1]
        )
        for series in prometheus.query(promql)
    }


def usage_reported(fake: FakeOpenAIServer, replies: list[Reply]) -> dict[str, float]:
    """The tokens the fake reported by kind: every reply's usage, each
    request having asked for it when streaming."""
    assert len(fake.requests) == len(replies) and fake.pending_replies == 0
    for body in fake.requests:
        assert not body.get("stream") or body["stream_options"]["include_usage"]
    usages = [reply.usage for reply in replies if reply.usage is not None]
    return {
        "input": float(sum(u.prompt_tokens for u in usages)),
        "output": float(sum(u.completion_tokens for u in usages)),
        "cached_input": float(sum(u.cached_tokens or 0 for u in usages)),
        "reasoning": float(sum(u.reasoning_tokens or 0 for u in usages)),
    }


def access(protected: bool) -> tuple[dict[str, str], dict[str, str]]:
    """The server's settings and the API's headers: `/metrics` public, or
    everything behind `TOKEN`."""
    if protected:
        return {"auth_token": TOKEN}, {"authorization": f"Bearer {TOKEN}"}
    return {"metrics_public": "1"}, {}


async def status_without_token(server: ServerProcess) -> int:
    """The status of a `GET /metrics` that carries no credentials."""
    async with httpx.AsyncClient() as http:
        response = await http.get(f"http://127.0.0.1:{server.port}/metrics")
    return response.status_code


async def run_agent(server: ServerProcess, headers: dict[str, str], n: int) -> Any:
    """One react run over `POST /api/agent`, answered when it has ended."""
    url = f"http://127.0.0.1:{server.port}"
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        response = await http.post(
            "/api/agent", json={"query": f"What is {n}+2?", "stream": False}
        )
    assert response.status_code == 200, response.text
    return response.json()["agent_metadata"]


@pytest.mark.parametrize("protected", [False, True], ids=["public", "bearer-token"])
async def test_prometheus_scrapes_the_runs_model_calls_tokens_and_tool_calls(
    fake_openai: FakeOpenAIServer, tmp_path: Path, protected: bool
) -> None:
    """Prometheus scraping a live loopwire every second (with its bearer
    token where `/metrics` needs one) finds exactly the react runs made, the
    model calls and tokens the fake server answered and reported, and the
    calculator calls, by their labels."""
    replies = scripted_runs(RUNS)
    fake_openai.script(*replies)
    settings, headers = access(protected)
    settings |= {
        "llm_base_url": fake_openai.base_url,
        "llm_api_key": "test",
        "llm_model": MODEL,
        "access_log": "1",
    }
    database = f"sqlite:///{tmp_path / 'data' / 'loopwire.db'}"
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(server_process(database, **settings))
        prometheus = PrometheusServer(
            [f"127.0.0.1:{server.port}"], bearer_token=TOKEN if protected else None
        )
        await asyncio.to_thread(prometheus.start)
        stack.callback(prometheus.stop)
        assert await status_without_token(server) == (401 if protected else 200)
        for n in range(RUNS):
            metadata = await run_agent(server, headers, n)
            assert (metadata["reason"], metadata["tools_used"]) == (
                "finished",
                ["calculator"],
            )
        await scraped_since_the_runs(server)
        tokens = usage_reported(fake_openai, replies)
        await asyncio.to_thread(
            assert_figures, prometheus, len(fake_openai.requests), tokens
        )


def assert_figures(
    prometheus: PrometheusServer, llm_calls: int, tokens: dict[str, float]
) -> None:
    """What Prometheus holds now: the target up, and the figures of the runs."""
    assert by_labels(prometheus, 'up{job="loopwire"}') == {(): 1.0}
    runs = by_labels(prometheus, "loopwire_runs_total", "strategy", "reason")
    assert runs == {("react", "finished"): RUNS}
    llm = by_labels(prometheus, "loopwire_llm_calls_total", "model", "outcome")
    assert llm == {(MODEL, "ok"): llm_calls}
    by_kind = by_labels(prometheus, "loopwire_llm_tokens_total", "model", "kind")
    assert by_kind == {(MODEL, kind): count for kind, count in tokens.items()}
    tools = by_labels(prometheus, "loopwire_tool_calls_total", "tool", "status")
    assert tools == {("calculator", "ok"): RUNS}
    durations = by_labels(prometheus, "loopwire_run_duration_seconds_count", "strategy")
    assert durations == {("react",): RUNS}
