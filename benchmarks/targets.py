"""The targets table (issue #32's targets) and what bounds those not met.

Each `Row` is one target: the figure, its p99, the target and the verdict;
it names the profile (`benchmarks/profile.py`) of the measurement it comes
from, if that measurement is profiled, so that `bounded_by` can say for a
target not met where the server's CPU went.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from benchmarks import formats as f
from benchmarks.results import Profile, Results
from benchmarks.stats import Summary

TURN_CPU_MS = 6.0
CALL_CPU_MS = 2.0
RUNS_LOW_X = 1.3
"""wall / ideal of the agent runs at the lower target concurrency (100)."""
RUNS_HIGH_X = 8.0
"""… and at the higher one (1,000)."""
FLAT_LIMIT = 1.25
"""“Flat”: CPU per LLM call at the higher concurrency ≤ this x the lower's."""
TRACING_X = 1.10
FRAME_SHARE_PCT = 40.0
"""Frames with token batching off: ≥ this % of the echo's rate and of its
CPU per frame (the echo's CPU per frame / loopwire's)."""
TOKEN_CPU_US = 60.0
"""Server CPU per token streamed at a model's pace, batching on."""
SESSION_KIB = 70.0
IDLE_MB = 80.0
STOP_P99_MS = 5.0
"""Stop → `response_complete` p99 in every phase, the SQLite file store."""
STOP_ACROSS_P99_MS = 15.0
"""… through a mirror on another instance (`benchmarks/cluster.py`)."""
TOP_BUCKETS = 3


@dataclass(frozen=True)
class Row:
    """One target: the figure, its p99, the target and whether it is met."""

    name: str
    value: str
    p99: str
    target: str
    met: bool | None
    profile: str | None = None
    """The key of the profile of the round it comes from, if profiled."""

    @property
    def verdict(self) -> str:
        return {True: "met", False: "**not met**", None: "—"}[self.met]


def _row(
    name: str,
    summary: Summary | None,
    form: Callable[[float], str],
    target: str,
    limit: float,
    *,
    on_p99: bool = False,
    profile: str | None = None,
) -> Row:
    if summary is None:
        return Row(name, "not measured", "—", target, None, profile)
    judged = summary.p99 if on_p99 else summary.median
    met = judged <= limit
    return Row(name, form(summary.median), form(summary.p99), target, met, profile)


def target_rows(results: Results) -> list[Row]:
    """The issue's table: figure, target, met or not."""
    turn = results.turn_cost
    label = f", {f.n(turn.sessions)} sessions" if turn else ""
    rows = [
        _row(
            f"server CPU per act-shaped turn{label}",
            turn.cpu_ms if turn else None,
            f.ms,
            f"≤ {TURN_CPU_MS:g} ms",
            TURN_CPU_MS,
            profile="turns",
        ),
        _tracing_row(results),
        *_run_rows(results),
        *_frame_rows(results),
        _pace_row(results),
        _memory_row(results),
        _idle_row(results),
    ]
    for phase in ("LLM call", "mid-stream", "tool call", "question"):
        summary = results.stop.phases.get(phase) if results.stop else None
        rows.append(
            _row(
                f"Stop → `response_complete`, {phase}",
                summary,
                f.ms,
                f"p99 ≤ {STOP_P99_MS:g} ms",
                STOP_P99_MS,
                on_p99=True,
            )
        )
    return rows


def _tracing_row(results: Results) -> Row:
    """Traces on (OTLP to a collector that is down) against off."""
    traced = results.tracing
    return _row(
        "server CPU per act-shaped turn, traces on ÷ off (rounds in turn)",
        traced.ratio if traced else None,
        lambda x: f"{x:.2f} times",
        f"≤ {TRACING_X:.2f} times",
        TRACING_X,
    )


def _run_rows(results: Results) -> list[Row]:
    low_n, high_n = results.target_sessions
    low, high = results.run_at(low_n), results.run_at(high_n)
    ideal = f" (ideal {low.ideal_s:g} s)" if low else ""
    rows = [
        _row(
            f"3-step agent runs, {f.n(low_n)} sessions: wall / ideal{ideal}",
            low.wall_ratio if low else None,
            f.times,
            f"≤ {RUNS_LOW_X:g}x",
            RUNS_LOW_X,
            profile="runs",
        ),
        _row(
            f"3-step agent runs, {f.n(high_n)} sessions: wall / ideal",
            high.wall_ratio if high else None,
            f.times,
            f"≤ {RUNS_HIGH_X:g}x",
            RUNS_HIGH_X,
            profile="runs",
        ),
    ]
    for count, scale in ((low_n, low), (high_n, high)):
        rows.append(
            _row(
                f"server CPU per LLM call, {f.n(count)} sessions",
                scale.cpu_ms_per_call if scale else None,
                f.ms,
                f"≤ {CALL_CPU_MS:g} ms",
                CALL_CPU_MS,
                profile="runs",
            )
        )
    name = f"CPU per LLM call, {f.n(high_n)} ÷ {f.n(low_n)} sessions (flat)"
    target = f"≤ {FLAT_LIMIT:g}x"
    if low and high:
        ratio = high.cpu_ms_per_call.median / low.cpu_ms_per_call.median
        rows.append(Row(name, f.times(ratio), "—", target, ratio <= FLAT_LIMIT, "runs"))
    else:
        rows.append(Row(name, "not measured", "—", target, None, "runs"))
    return rows


def _frame_rows(results: Results) -> list[Row]:
    frames = results.frames
    label = f"{f.n(frames.sessions)} clients" if frames else "clients"
    name_rate = f"frames/s to {label}, token batching off, as % of the echo's"
    name_cpu = "CPU per frame, token batching off: the echo's as % of loopwire's"
    target = f"≥ {FRAME_SHARE_PCT:g} %"
    if frames is None:
        return [
            Row(name_rate, "not measured", "—", target, None),
            Row(name_cpu, "not measured", "—", target, None),
        ]
    rate = 100 * frames.fps.median / frames.echo_fps.median
    mine, echo = f.rate(frames.fps.median), f.rate(frames.echo_fps.median)
    rate_value = f"{f.pct(rate)} ({mine} vs {echo})"
    mine, echo = f.us(frames.cpu_us.median), f.us(frames.echo_cpu_us.median)
    if frames.cpu_us.median <= 0:  # a round under the CPU clock's tick (--tiny)
        cost_row = Row(name_cpu, f"unmeasured ({mine} vs {echo})", "—", target, None)
    else:
        cost = 100 * frames.echo_cpu_us.median / frames.cpu_us.median
        cost_value = f"{f.pct(cost)} ({mine} vs {echo})"
        met = cost >= FRAME_SHARE_PCT
        cost_row = Row(name_cpu, cost_value, "—", target, met, "frames")
    return [
        Row(name_rate, rate_value, "—", target, rate >= FRAME_SHARE_PCT, "frames"),
        cost_row,
    ]


def _pace_row(results: Results) -> Row:
    """CPU per token at a model's pace, batching on; off beside it."""
    name = "server CPU per token at a model's pace, token batching on (vs off)"
    target = f"≤ {TOKEN_CPU_US:g} µs"
    pace = results.token_pace
    if pace is None:
        return Row(name, "not measured", "—", target, None)
    on, off = pace.batched.cpu_us_per_token, pace.unbatched.cpu_us_per_token
    share = 100 * on.median / off.median
    value = f"{f.us(on.median)} (off: {f.us(off.median)}; on is {f.pct(share)})"
    met = on.median <= TOKEN_CPU_US
    return Row(name, value, f.us(on.p99), target, met, "pace")


def _memory_row(results: Results) -> Row:
    memory = results.memory
    echo = (
        f" (echo: {f.kib(memory.echo_kib_per_socket.median)} per bare socket)"
        if memory
        else ""
    )
    return _row(
        f"RSS per session paused on a question{echo}",
        memory.kib_per_session if memory else None,
        f.kib,
        f"≤ {SESSION_KIB:g} KiB",
        SESSION_KIB,
    )


def _idle_row(results: Results) -> Row:
    idle = results.idle
    first = f" (on a new database: {f.mb(idle.fresh_mb.median)})" if idle else ""
    return _row(
        f"idle RSS of a fresh server, restarted on its migrated database{first}",
        idle.migrated_mb if idle else None,
        f.mb,
        f"≤ {IDLE_MB:g} MB",
        IDLE_MB,
    )


def bounded_by(results: Results, rows: list[Row]) -> list[str]:
    """What bounds the targets not met: a line per profile, naming the
    targets whose figures come from its round, with where that round's CPU
    went (or why there is no profile); then a line for those not profiled."""
    unmet: dict[str | None, list[str]] = {}
    for row in rows:
        if row.met is False:
            unmet.setdefault(row.profile, []).append(row.name.split(" (")[0])
    lines: list[str] = []
    for key, names in unmet.items():
        if key is None:
            continue
        profile = results.profiles.get(key)
        note = results.profile_note or "its round was not sampled"
        said = _where(profile) if profile else f"no profile: {note}"
        lines.append(f"- {'; '.join(names)}: bounded by: {said}")
    if None in unmet:
        lines.append(
            f"- {'; '.join(unmet[None])}: not profiled (the bench samples the "
            "act-shaped turns, the agent runs at the highest concurrency, the "
            "streamed frames and the tokens at a model's pace; for the others "
            "see the prose below the generated section)"
        )
    return lines


def _where(profile: Profile) -> str:
    """`the LLM client 41 %, event loop / I/O 32 %, …` with loopwire's top."""
    if not profile.buckets:
        return f"no samples in {profile.what} (a round too short to sample)"
    top = ", ".join(
        f"{name} {f.pct(100 * share)}" for name, share in profile.buckets[:TOP_BUCKETS]
    )
    own = "; ".join(f"{label} {100 * share:.1f} %" for label, share in profile.own_top)
    inside = f" (loopwire's top functions: {own})" if own else ""
    return f"{top} of the CPU sampled in {profile.what}{inside}"
