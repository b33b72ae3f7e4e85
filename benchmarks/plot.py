"""The plot: time and CPU against concurrency, loopwire vs the echo.

Left: wall time / ideal of the agent-run rounds (loopwire: S-step `react`
runs; echo: as many delayed round trips) against the number of sessions,
with the targets marked. Right: server CPU per LLM call (loopwire) and per
round trip (echo). Median markers, the p99 as the bar's top. A PNG drawn
with matplotlib (the `bench` extra: `pip install -e '.[bench]'`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.results import Results
from benchmarks.targets import CALL_CPU_MS, RUNS_HIGH_X, RUNS_LOW_X


class PlotUnavailable(Exception):
    """matplotlib is not installed."""


def draw(results: Results, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable(str(exc)) from exc
    runs = sorted(results.runs, key=lambda r: r.sessions)
    sessions = [r.sessions for r in runs]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    _series(left, sessions, [r.wall_ratio for r in runs], "loopwire", "o-")
    _series(left, sessions, [r.echo_wall_ratio for r in runs], "bare echo", "s--")
    _mark_targets(left, results, sessions)
    left.axhline(1.0, color="grey", linewidth=0.8)
    left.set_ylabel("wall time / ideal")
    steps = runs[0].steps if runs else 0
    left.set_title(f"{steps}-step agent runs ({3 * steps} LLM calls each)")
    _series(
        right,
        sessions,
        [r.cpu_ms_per_call for r in runs],
        "loopwire, per LLM call",
        "o-",
    )
    _series(
        right,
        sessions,
        [r.echo_cpu_ms_per_trip for r in runs],
        "bare echo, per round trip",
        "s--",
    )
    right.axhline(
        CALL_CPU_MS, color="red", linewidth=0.8, linestyle=":", label="target"
    )
    right.set_ylabel("server CPU (ms)")
    right.set_title("server CPU per unit of work")
    for axes in (left, right):
        axes.set_xscale("log")
        axes.minorticks_off()
        axes.set_xlabel("concurrent sessions")
        axes.set_xticks(sessions, [f"{n:,}" for n in sessions])
        axes.set_ylim(bottom=0)
        axes.grid(True, alpha=0.3)
        axes.legend()
    figure.suptitle(
        f"loopwire vs the bare echo - {results.machine.cpu}, "
        f"{results.machine.cores} cores, {results.date}",
        fontsize=9,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _mark_targets(axes: Any, results: Results, sessions: list[int]) -> None:
    """The wall / ideal targets, at the concurrencies they are judged at."""
    low, high = results.target_sessions
    targets = {low: RUNS_LOW_X, high: RUNS_HIGH_X}
    marked = [(n, t) for n, t in targets.items() if n in sessions and not results.tiny]
    if marked:
        axes.scatter(
            [n for n, _ in marked],
            [t for _, t in marked],
            marker="x",
            color="red",
            label="target",
            zorder=3,
        )


def _series(
    axes: Any, xs: list[int], summaries: list[Any], label: str, style: str
) -> None:
    medians = [s.median for s in summaries]
    above = [s.p99 - s.median for s in summaries]
    axes.errorbar(
        xs, medians, yerr=[[0] * len(medians), above], fmt=style, capsize=3, label=label
    )
