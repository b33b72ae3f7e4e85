"""The report: the generated section of docs/benchmarks.md.

Only the text between `BEGIN` and `END` is the bench's; everything around it
(the hand-written prose) is kept as it is. A file without the markers gets
them before its first `## ` heading (after the title and its intro).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import BUSY_MACHINE
from benchmarks.results import PacedStream, Results, RunScale
from benchmarks.stats import Summary

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
FLAT_LIMIT = 1.25
"""“Flat”: CPU per LLM call at the higher concurrency ≤ this x the lower's."""
VALIDATED = "Every run of every round was validated"


@dataclass(frozen=True)
class Row:
    """One target: the figure, its p99, the target and whether it is met."""

    name: str
    value: str
    p99: str
    target: str
    met: bool | None

    @property
    def verdict(self) -> str:
        return {True: "met", False: "**not met**", None: "—"}[self.met]


def _ms(value: float) -> str:
    return f"{value:.3f} ms" if value < 1 else f"{value:.2f} ms"


def _x(value: float) -> str:
    return f"{value:.2f}x"


def _pct(value: float) -> str:
    return f"{value:.0f} %"


def _kib(value: float) -> str:
    return f"{value:.1f} KiB"


def _us(value: float) -> str:
    return f"{value:.1f} µs"


def _rate(value: float) -> str:
    return f"{value:,.0f}/s"


def _s(value: float) -> str:
    return f"{value:.2f} s"


def _count(value: float) -> str:
    """A count that may be a median between two (`12.5`)."""
    return f"{value:,.0f}" if value == round(value) else f"{value:,.1f}"


def _n(value: int) -> str:
    return f"{value:,}"


def _row(
    name: str,
    summary: Summary | None,
    form: Callable[[float], str],
    target: str,
    limit: float,
    *,
    on_p99: bool = False,
) -> Row:
    if summary is None:
        return Row(name, "not measured", "—", target, None)
    judged = summary.p99 if on_p99 else summary.median
    return Row(name, form(summary.median), form(summary.p99), target, judged <= limit)


def _tracing_row(results: Results) -> Row:
    """Traces on (OTLP to a collector that is down) against off."""
    traced = results.tracing
    return _row(
        "server CPU per act-shaped turn, traces on ÷ off (rounds in turn)",
        traced.ratio if traced else None,
        lambda x: f"{x:.2f} times",
        "≤ 1.10 times",
        1.10,
    )


def target_rows(results: Results) -> list[Row]:
    """The issue's table: figure, target, met or not."""
    rows: list[Row] = []
    turn = results.turn_cost
    label = f", {_n(turn.sessions)} sessions" if turn else ""
    rows.append(
        _row(
            f"server CPU per act-shaped turn{label}",
            turn.cpu_ms if turn else None,
            _ms,
            "≤ 3 ms",
            3.0,
        )
    )
    rows.append(_tracing_row(results))
    rows += _run_rows(results)
    rows += _frame_rows(results)
    rows.append(_pace_row(results))
    memory = results.memory
    echo = (
        f" (echo: {_kib(memory.echo_kib_per_socket.median)} per bare socket)"
        if memory
        else ""
    )
    rows.append(
        _row(
            f"RSS per session paused on a question{echo}",
            memory.kib_per_session if memory else None,
            _kib,
            "≤ 70 KiB",
            70.0,
        )
    )
    for phase in ("LLM call", "mid-stream", "tool call", "question"):
        summary = results.stop.phases.get(phase) if results.stop else None
        rows.append(
            _row(
                f"Stop → `response_complete`, {phase}",
                summary,
                _ms,
                "p99 ≤ 5 ms",
                5.0,
                on_p99=True,
            )
        )
    return rows


def _run_rows(results: Results) -> list[Row]:
    low_n, high_n = results.target_sessions
    low, high = results.run_at(low_n), results.run_at(high_n)
    ideal = f" (ideal {low.ideal_s:g} s)" if low else ""
    rows = [
        _row(
            f"3-step agent runs, {_n(low_n)} sessions: wall / ideal{ideal}",
            low.wall_ratio if low else None,
            _x,
            "≤ 1.2x",
            1.2,
        ),
        _row(
            f"3-step agent runs, {_n(high_n)} sessions: wall / ideal",
            high.wall_ratio if high else None,
            _x,
            "≤ 4x",
            4.0,
        ),
        _row(
            f"server CPU per LLM call, {_n(low_n)} sessions",
            low.cpu_ms_per_call if low else None,
            _ms,
            "≤ 1 ms",
            1.0,
        ),
        _row(
            f"server CPU per LLM call, {_n(high_n)} sessions",
            high.cpu_ms_per_call if high else None,
            _ms,
            "≤ 1 ms",
            1.0,
        ),
    ]
    name = f"CPU per LLM call, {_n(high_n)} ÷ {_n(low_n)} sessions (flat)"
    if low and high:
        ratio = high.cpu_ms_per_call.median / low.cpu_ms_per_call.median
        target = f"≤ {FLAT_LIMIT:g}x"
        rows.append(Row(name, _x(ratio), "—", target, ratio <= FLAT_LIMIT))
    else:
        rows.append(Row(name, "not measured", "—", f"≤ {FLAT_LIMIT:g}x", None))
    return rows


def _frame_rows(results: Results) -> list[Row]:
    frames = results.frames
    label = f"{_n(frames.sessions)} clients" if frames else "clients"
    name_rate = f"frames/s to {label}, as % of the echo's"
    name_cpu = "CPU per frame: the echo's as % of loopwire's"
    if frames is None:
        return [
            Row(name_rate, "not measured", "—", "≥ 30 %", None),
            Row(name_cpu, "not measured", "—", "≥ 30 %", None),
        ]
    rate = 100 * frames.fps.median / frames.echo_fps.median
    cost = 100 * frames.echo_cpu_us.median / frames.cpu_us.median
    rate_value = (
        f"{_pct(rate)} ({_rate(frames.fps.median)} vs {_rate(frames.echo_fps.median)})"
    )
    mine, echo = _us(frames.cpu_us.median), _us(frames.echo_cpu_us.median)
    cost_value = f"{_pct(cost)} ({mine} vs {echo})"
    return [
        Row(name_rate, rate_value, "—", "≥ 30 %", rate >= 30),
        Row(name_cpu, cost_value, "—", "≥ 30 %", cost >= 30),
    ]


def _pace_row(results: Results) -> Row:
    """Batching's saving at a model's pace: context, no target of the issue's."""
    name = "CPU per streamed token at a model's pace, batching on vs off"
    pace = results.token_pace
    if pace is None:
        return Row(name, "not measured", "—", "—", None)
    on, off = pace.batched.cpu_us_per_token, pace.unbatched.cpu_us_per_token
    share = 100 * on.median / off.median
    value = f"{_us(on.median)} vs {_us(off.median)} ({_pct(share)})"
    return Row(name, value, "—", "—", None)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def render(results: Results, plot: str | None, plot_note: str = "") -> str:
    """The generated section, markers included."""
    machine = results.machine
    packages = ", ".join(f"{name} {version}" for name, version in machine.packages)
    out = [
        BEGIN,
        "<!-- Generated by `python -m benchmarks` (`make bench`): edit outside the"
        " markers only; the next run rewrites what is between them. -->",
        "",
        "## Latest results",
        "",
        f"Measured {results.date} by `{results.command}` in "
        f"{_duration(results.duration_s)}, at {results.revision}, on {machine.cpu}, "
        f"{machine.cores} cores, {machine.system}, Python {machine.python}; "
        f"{packages}. Loopback only.",
        "",
    ]
    if results.other_load:
        worst = max(results.other_load)
        busy = sum(share > BUSY_MACHINE for share in results.other_load)
        out += [
            "Other processes on the machine took at most "
            f"{100 * worst:.0f} % of its CPU during a measured round"
            + (
                f": **{busy} of {len(results.other_load)} rounds were distorted** "
                f"(over {100 * BUSY_MACHINE:.0f} %); measure again on a quiet machine."
                if busy
                else "."
            ),
            "",
        ]
    if results.tiny:
        out += [
            "**Tiny run** (`--tiny`): a few sessions and one round, to check the "
            "harness; the sizes are not the targets', so the verdicts mean nothing.",
            "",
        ]
    out += [
        f"Median and p99 over up to {results.rounds} round(s), one sample per "
        "round, unless a table says otherwise (a round past the second is "
        "skipped when the time budget has no room for it; the tables give the "
        "count); targets are judged on the median "
        "(Stop: on the p99). CPU is user + system time of the server process and "
        "its children, from `/proc/<pid>/stat`, read before and after each round "
        "(after the server went quiet). "
        f"{VALIDATED}: the frame sequence, tool results, answer text, steps and "
        "LLM calls reported, and the fake LLM's request count; a run that went "
        "wrong fails the bench instead of giving a figure.",
        "",
        "### Targets",
        "",
    ]
    rows = target_rows(results)
    out += _table(
        ["measurement", "median", "p99", "target", "verdict"],
        [[r.name, r.value, r.p99, r.target, r.verdict] for r in rows],
    )
    out += _runs_section(results, plot, plot_note)
    out += _turn_section(results)
    out += _frames_section(results)
    out += _pace_section(results)
    out += _memory_section(results)
    out += _stop_section(results)
    out += _loop_section(results)
    out += _sources_section(results)
    out += ["", END]
    return "\n".join(out) + "\n"


def _summary_cells(summary: Summary, form: Callable[[float], str]) -> list[str]:
    return [form(summary.median), form(summary.p99)]


def _runs_section(results: Results, plot: str | None, note: str) -> list[str]:
    out = ["", "### Agent runs and concurrency", ""]
    if not results.runs:
        return [*out, "Not measured in this run."]
    first: RunScale = results.runs[0]
    out += [
        f"Each session runs one `react` run of {first.steps} steps ({first.calls} LLM "
        f"calls, the fake LLM taking {first.latency_ms:g} ms before each reply; ideal "
        f"{first.ideal_s:g} s), all sessions at once. The echo makes {first.calls} "
        f"round trips per socket, waiting {first.latency_ms:g} ms before each answer. "
        "“each run” is every run's own time / ideal over all rounds.",
        "",
    ]
    out += _table(
        [
            "sessions",
            "rounds",
            "wall / ideal",
            "p99",
            "each run / ideal",
            "p99",
            "server CPU per LLM call",
            "p99",
            "echo wall / ideal",
            "echo CPU per round trip",
            "fake LLM CPU per call",
            "bench client CPU per call",
        ],
        [
            [
                _n(r.sessions),
                str(r.wall_ratio.count),
                *_summary_cells(r.wall_ratio, _x),
                *_summary_cells(r.run_ratio, _x),
                *_summary_cells(r.cpu_ms_per_call, _ms),
                _x(r.echo_wall_ratio.median),
                _ms(r.echo_cpu_ms_per_trip.median),
                _ms(r.others.fake_cpu.median),
                _ms(r.others.client_cpu.median),
            ]
            for r in results.runs
        ],
    )
    if plot:
        out += ["", f"![wall / ideal and CPU per call against concurrency]({plot})"]
    if note:
        out += ["", note]
    return out


def _turn_section(results: Results) -> list[str]:
    out = ["", "### Act-shaped turns", ""]
    turn = results.turn_cost
    if turn is None:
        return [*out, "Not measured in this run."]
    out += [
        f"{_n(turn.sessions)} sessions at once, each {turn.turns_per_session} turn(s) "
        "in a row per round; a turn is a `chat` in tool mode: an LLM call with the "
        f"tools → `calculator` → a streamed answer of {turn.tokens} tokens (2 LLM "
        f"calls, 0 ms latency); {turn.cpu_ms.count} round(s).",
        "",
    ]
    out += _table(
        [
            "server CPU per turn",
            "p99",
            "turns/s",
            "fake LLM CPU per turn",
            "bench client CPU per turn",
        ],
        [
            [
                *_summary_cells(turn.cpu_ms, _ms),
                _rate(turn.turns_per_s.median),
                _ms(turn.others.fake_cpu.median),
                _ms(turn.others.client_cpu.median),
            ]
        ],
    )
    return out


def _frames_section(results: Results) -> list[str]:
    out = ["", "### Streamed frames", ""]
    frames = results.frames
    if frames is None:
        return [*out, "Not measured in this run."]
    out += [
        f"{_n(frames.sessions)} clients at once, each receiving {frames.tokens + 1} "
        f"`token_stream` frames (~{frames.frame_bytes} bytes each) of a plain chat "
        "whose answer the fake LLM streams at once, from a loopwire with token "
        "batching off (`LOOPWIRE_TOKEN_BATCH_MS=0`: a frame per token, so the "
        "comparison is frame for frame); the echo sends each socket as "
        "many frames of the same size. Throughput: median and the worst round; "
        f"{frames.fps.count} round(s).",
        "",
    ]
    out += _table(
        [
            "server",
            "frames/s",
            "worst round",
            "server CPU per frame",
            "p99",
            "bench client CPU per frame",
        ],
        [
            [
                "loopwire",
                _rate(frames.fps.median),
                _rate(frames.fps.low),
                *_summary_cells(frames.cpu_us, _us),
                _us(frames.others.client_cpu.median),
            ],
            [
                "echo",
                _rate(frames.echo_fps.median),
                _rate(frames.echo_fps.low),
                *_summary_cells(frames.echo_cpu_us, _us),
                _us(frames.echo_client_us.median),
            ],
        ],
    )
    out += [
        "",
        f"The fake LLM spent {_us(frames.others.fake_cpu.median)} of CPU per "
        "loopwire frame. The bench's client shares the cores with the servers "
        "and decodes every frame: when its CPU per frame comes near the "
        "server's, frames/s measures the client as much as the server, and the "
        "CPU per frame is the fairer comparison.",
    ]
    return out


def _pace_section(results: Results) -> list[str]:
    out = ["", "### Streamed tokens at a model's pace", ""]
    pace = results.token_pace
    if pace is None:
        return [*out, "Not measured in this run."]
    stream_s = pace.tokens * pace.token_delay_ms / 1000
    out += [
        "What a real model's stream costs the server, and what token batching "
        f"saves: {_n(pace.sessions)} clients at once each send a plain chat whose "
        f"answer of {_n(pace.tokens)} tokens the fake LLM streams "
        f"{pace.token_delay_ms:g} ms apart (a fast model's pace; ≥ {stream_s:g} s "
        "an answer), to a loopwire with token batching at its default "
        "(`LOOPWIRE_TOKEN_BATCH_MS` unset: the first token at once, then at most "
        "one `token_stream` frame per tick with what came meanwhile) and to one "
        "with it off (`0`: a frame per token). Frames per answer include the "
        "closing one; CPU per token is the server's CPU over a round / the tokens "
        f"streamed in it; {pace.batched.cpu_us_per_token.count} round(s).",
        "",
    ]
    out += _table(
        [
            "token batching",
            "frames per answer",
            "server CPU per token",
            "p99",
            "round wall time",
        ],
        [_pace_cells(pace.batched), _pace_cells(pace.unbatched)],
    )
    return out


def _pace_cells(stream: PacedStream) -> list[str]:
    batching = (
        "off" if stream.batch_ms == 0 else f"on ({stream.batch_ms:g} ms, the default)"
    )
    return [
        batching,
        _count(stream.frames_per_answer.median),
        *_summary_cells(stream.cpu_us_per_token, _us),
        _s(stream.wall_s.median),
    ]


def _memory_section(results: Results) -> list[str]:
    out = ["", "### Memory", ""]
    memory = results.memory
    if memory is None:
        return [*out, "Not measured in this run."]
    out += [
        f"VmRSS growth of the server over a batch of {_n(memory.sessions_per_batch)} "
        "new sessions, each paused on a question (`request_input`), / the batch; "
        f"one sample per batch ({memory.batches}), the batches added one after "
        "another after a warm-up. The echo: the same batches of bare sockets (one "
        "round trip each)"
        + (", on an echo process of its own." if not results.tiny else "."),
        "",
    ]
    out += _table(
        ["per", "median", "p99"],
        [
            ["paused loopwire session", *_summary_cells(memory.kib_per_session, _kib)],
            ["bare echo socket", *_summary_cells(memory.echo_kib_per_socket, _kib)],
        ],
    )
    return out


def _stop_section(results: Results) -> list[str]:
    out = ["", "### Stop latency", ""]
    stop = results.stop
    if stop is None:
        return [*out, "Not measured in this run."]
    out += [
        "From sending `agent_control: stop` to receiving `response_complete`, one "
        "run at a time and no other load, the Stop sent once the run is really in "
        "the phase (see `benchmarks/stop_latency.py`); "
        f"{stop.samples} stops per phase.",
        "",
    ]
    out += _table(
        ["phase", "median", "p99", "max"],
        [
            [name, *_summary_cells(s, _ms), _ms(s.high)]
            for name, s in stop.phases.items()
        ],
    )
    return out


def _loop_section(results: Results) -> list[str]:
    out = ["", "### The agent loop in-process", ""]
    loop = results.loop
    if loop is None:
        return [*out, "Not measured in this run."]
    out += [
        "The `react` strategy under its `RunDriver` in the bench's own process: no "
        "server, socket or store; an instant fake LLM and a no-op tool "
        f"({loop.runs} runs of {loop.steps} steps, one sample per run).",
        "",
    ]
    out += _table(
        ["ms per step", "p99", "min"],
        [[*_summary_cells(loop.ms_per_step, _ms), _ms(loop.ms_per_step.low)]],
    )
    return out


def _sources_section(results: Results) -> list[str]:
    out = ["", "### Data sources: indexing and search", ""]
    sources = results.sources
    if sources is None:
        return [*out, "Not measured in this run."]
    out += [
        f"{_n(sources.documents)} small Markdown documents "
        f"({sources.megabytes:.1f} MB, {_n(sources.passages)} passages) indexed "
        "into SQLite FTS5 in the bench's own process by one refresh, then "
        "refreshed with nothing changed; then "
        f"{_n(sources.queries)} queries of two to four words (BM25, 5 passages "
        "each), one sample per query.",
        "",
    ]
    out += _table(
        ["index all", "refresh, unchanged", "query", "p99", "max"],
        [
            [
                _s(sources.index_s),
                _ms(sources.unchanged_refresh_s * 1000),
                *_summary_cells(sources.query_ms, _ms),
                _ms(sources.query_ms.high),
            ]
        ],
    )
    return out


def splice(document: str, section: str) -> str:
    """`document` with its generated section replaced by `section`."""
    if BEGIN in document and END in document:
        head, _, rest = document.partition(BEGIN)
        _, _, tail = rest.partition(END)
        return head + section.rstrip("\n") + tail
    lines = document.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if index > 0 and line.startswith("## "):
            return "".join(lines[:index]) + section + "\n" + "".join(lines[index:])
    return document.rstrip("\n") + "\n\n" + section


def write(path: Path, section: str) -> None:
    document = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(splice(document, section), encoding="utf-8")
