"""The Grafana dashboard of docs/grafana/loopwire.json against the metrics
the server really serves: it is dashboard-shaped JSON Grafana can import,
every metric name its queries use is in the exposition of
`PrometheusMetrics`, every metric of that exposition is on some panel, and
`promtool` parses every query. A metric renamed, added or dropped in
backend/telemetry/metrics.py breaks one of these until the dashboard
follows."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.telemetry.metrics import Levels, Metrics, PrometheusMetrics
from backend.transcript import Usage
from devcluster.prometheus_server import PROMTOOL

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "docs" / "grafana" / "loopwire.json"
GUIDE = ROOT / "docs" / "observability.md"
METRIC_NAME = re.compile(r"\bloopwire_[A-Za-z0-9_]+")
GRID_WIDTH = 24
NOT_ON_DASHBOARD: dict[str, str] = {}
"""Metric families served but deliberately left off the dashboard, each
with the reason (none today)."""

OBSERVATIONS: dict[str, Callable[[PrometheusMetrics], None]] = {
    "run_ended": lambda m: m.run_ended("react", "final", 1.5),
    "phase_ended": lambda m: m.phase_ended("reason", 0.2),
    "llm_call": lambda m: m.llm_call("gpt-test", "ok", 0.4, Usage(prompt_tokens=7)),
    "tool_call": lambda m: m.tool_call("add", "ok"),
    "stop_latency": lambda m: m.stop_latency(0.01),
    "frames_sent": lambda m: m.frames_sent(3),
    "rate_limited": lambda m: m.rate_limited("runs"),
    "store_flush": lambda m: m.store_flush(0.002),
}
"""One observation per method of `Metrics` that records something."""


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])


def expressions(board: dict[str, Any]) -> list[str]:
    """The PromQL of every panel's targets and of the query variables."""
    found = [t["expr"] for p in panels(board) for t in p.get("targets", [])]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            found.append(variable["definition"])
    return found


def names_by_panel(board: dict[str, Any]) -> dict[str, set[str]]:
    """The metric names each panel's queries use, by panel title."""
    return {
        p["title"]: {n for t in p["targets"] for n in METRIC_NAME.findall(t["expr"])}
        for p in panels(board)
        if p["type"] != "row"
    }


def exposition() -> str:
    """What `GET /metrics` serves after one observation of each kind."""
    metrics = PrometheusMetrics()
    for observe in OBSERVATIONS.values():
        observe(metrics)
    metrics.read_levels(
        lambda: Levels(
            sessions={"connected": 1, "in_memory": 2, "paused": 1},
            bus_queue_depth=4,
            conversations_owned=2,
        )
    )
    return metrics.exposition().decode()


def families(text: str) -> dict[str, str]:
    """Each metric family of an exposition, with its type."""
    found = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE)
    return dict(found)


def sample_names(text: str) -> set[str]:
    """The name of every sample line (`_total`, `_bucket`, `_sum`, ...)."""
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in lines}


def family_of(sample: str, known: dict[str, str]) -> str | None:
    """The family a sample name belongs to (a counter's family is named
    without `_total`, as the exposition's TYPE line names it); None: none."""
    for suffix in ("_bucket", "_sum", "_count", "_total", ""):
        stem = sample.removesuffix(suffix) if suffix else sample
        if stem in known:
            return stem
    return None


def overlaps(a: dict[str, int], b: dict[str, int]) -> bool:
    return (
        a["x"] < b["x"] + b["w"]
        and b["x"] < a["x"] + a["w"]
        and a["y"] < b["y"] + b["h"]
        and b["y"] < a["y"] + a["h"]
    )


def test_the_observations_cover_every_method_of_metrics() -> None:
    """The exposition the dashboard is checked against holds every metric:
    each recording method of the `Metrics` protocol is observed once."""
    methods = {name for name in vars(Metrics) if not name.startswith("_")}
    assert methods - {"read_levels", "exposition"} == set(OBSERVATIONS)


def test_the_dashboard_is_importable_grafana_json() -> None:
    """The file has a title, uid, schema version, the datasource input and
    variables, and panels with unique ids, a place on the 24-column grid
    and, but for rows, Prometheus targets with an expression each."""
    board = dashboard()
    assert board["uid"] == "loopwire" and board["title"] == "loopwire"
    assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36
    assert [i["name"] for i in board["__inputs"]] == ["DS_PROMETHEUS"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    instance = variables["instance"]
    assert (instance["multi"], instance["includeAll"]) == (True, True)
    every = list(panels(board))
    ids = [p["id"] for p in every]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids)
    for panel in every:
        grid = panel["gridPos"]
        assert {k: type(grid[k]) for k in "hwxy"} == dict.fromkeys("hwxy", int)
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= GRID_WIDTH, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        assert all(t["expr"].strip() for t in panel["targets"]), panel["title"]


def test_no_two_panels_overlap() -> None:
    """Each panel has its own place on the grid: none covers another."""
    grids = [(p["title"], p["gridPos"]) for p in panels(dashboard())]
    clashes = [
        (a, b)
        for i, (a, ga) in enumerate(grids)
        for b, gb in grids[i + 1 :]
        if overlaps(ga, gb)
    ]
    assert clashes == []


def test_every_metric_the_dashboard_queries_is_served() -> None:
    """Each `loopwire_…` name in a query is a sample name of the exposition
    (`_total` counters, `_bucket` histograms): none is misspelt or stale."""
    used = {n for expr in expressions(dashboard()) for n in METRIC_NAME.findall(expr)}
    assert used and used - sample_names(exposition()) == set()


def test_every_served_metric_is_on_a_panel() -> None:
    """Each metric family of the exposition is drawn by some panel (a
    histogram by its buckets, as a quantile), or named in NOT_ON_DASHBOARD."""
    known = families(exposition())
    used = set().union(*names_by_panel(dashboard()).values())
    drawn = {family_of(name, known) for name in used}
    histograms = {name for name, kind in known.items() if kind == "histogram"}
    by_buckets = {n.removesuffix("_bucket") for n in used if n.endswith("_bucket")}
    assert set(known) - drawn == set(NOT_ON_DASHBOARD)
    assert histograms - by_buckets == histograms & set(NOT_ON_DASHBOARD)


def test_the_guide_names_only_served_metrics_and_tables_them_all() -> None:
    """docs/observability.md's PromQL uses only metrics the exposition has,
    and its table of metrics has a row for every family served."""
    guide = GUIDE.read_text(encoding="utf-8")
    text = exposition()
    queries = re.findall(r"```promql\n(.*?)```", guide, re.DOTALL)
    used = {n for query in queries for n in METRIC_NAME.findall(query)}
    assert used and used - sample_names(text) == set()
    rows = re.findall(r"^\| `(loopwire_[A-Za-z0-9_]+)` \|", guide, re.MULTILINE)
    known = families(text)
    assert sorted(family_of(row, known) or row for row in rows) == sorted(known)


def test_every_query_selects_the_chosen_instances() -> None:
    """Every metric a panel reads is filtered by the `$instance` variable,
    so choosing instances narrows every panel."""
    for panel in panels(dashboard()):
        for target in panel.get("targets", []):
            expr = target["expr"]
            selectors = re.findall(r"\bloopwire_[A-Za-z0-9_]+(\{[^}]*\})?", expr)
            assert selectors, panel["title"]
            assert all('instance=~"$instance"' in s for s in selectors), expr


def test_promtool_parses_every_query(tmp_path: Path) -> None:
    """`promtool check rules` accepts every query, Grafana's variables
    replaced by what they stand for at a query."""
    if not PROMTOOL.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs Prometheus, yet promtool is missing")
        pytest.skip("promtool is not installed (`make test` installs it)")
    rules = [
        {"record": f"loopwire_dashboard:query{i}", "expr": grafana_free(expr)}
        for i, expr in enumerate(expressions(dashboard()))
    ]
    path = tmp_path / "rules.json"  # JSON is YAML: promtool reads it as such
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run(
        [str(PROMTOOL), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def grafana_free(expr: str) -> str:
    """`expr` as Grafana sends it: the range and instance variables filled
    in, a `label_values(metric, label)` query as the series it reads."""
    if expr.startswith("label_values("):
        return expr.removeprefix("label_values(").split(",")[0]
    return expr.replace("$__rate_interval", "1m").replace("$instance", ".*")
