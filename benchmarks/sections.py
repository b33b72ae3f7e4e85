"""The report's tables, one section per measurement (`report.render` puts
them together under the targets table)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from benchmarks import formats as f
from benchmarks.idle_memory import QUIET_S
from benchmarks.profile import BUCKETS
from benchmarks.results import PacedStream, Profile, Results, RunScale
from benchmarks.stats import Summary


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def summary_cells(summary: Summary, form: Callable[[float], str]) -> list[str]:
    return [form(summary.median), form(summary.p99)]


def runs_section(results: Results, plot: str | None, note: str) -> list[str]:
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
    out += table(
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
                f.n(r.sessions),
                str(r.wall_ratio.count),
                *summary_cells(r.wall_ratio, f.times),
                *summary_cells(r.run_ratio, f.times),
                *summary_cells(r.cpu_ms_per_call, f.ms),
                f.times(r.echo_wall_ratio.median),
                f.ms(r.echo_cpu_ms_per_trip.median),
                f.ms(r.others.fake_cpu.median),
                f.ms(r.others.client_cpu.median),
            ]
            for r in results.runs
        ],
    )
    if plot:
        out += ["", f"![wall / ideal and CPU per call against concurrency]({plot})"]
    if note:
        out += ["", note]
    return out


def turn_section(results: Results) -> list[str]:
    out = ["", "### Act-shaped turns", ""]
    turn = results.turn_cost
    if turn is None:
        return [*out, "Not measured in this run."]
    out += [
        f"{f.n(turn.sessions)} sessions at once, each {turn.turns_per_session} turn(s) "
        "in a row per round; a turn is a `chat` in tool mode: an LLM call with the "
        f"tools → `calculator` → a streamed answer of {turn.tokens} tokens (2 LLM "
        f"calls, 0 ms latency); {turn.cpu_ms.count} round(s).",
        "",
    ]
    out += table(
        [
            "server CPU per turn",
            "p99",
            "turns/s",
            "fake LLM CPU per turn",
            "bench client CPU per turn",
        ],
        [
            [
                *summary_cells(turn.cpu_ms, f.ms),
                f.rate(turn.turns_per_s.median),
                f.ms(turn.others.fake_cpu.median),
                f.ms(turn.others.client_cpu.median),
            ]
        ],
    )
    return out


def frames_section(results: Results) -> list[str]:
    out = ["", "### Streamed frames", ""]
    frames = results.frames
    if frames is None:
        return [*out, "Not measured in this run."]
    out += [
        f"{f.n(frames.sessions)} clients at once, each receiving {frames.tokens + 1} "
        f"`token_stream` frames (~{frames.frame_bytes} bytes each) of a plain chat "
        "whose answer the fake LLM streams at once, from a loopwire with token "
        "batching off (`LOOPWIRE_TOKEN_BATCH_MS=0`: a frame per token, so the "
        "comparison is frame for frame); the echo sends each socket as "
        "many frames of the same size. Throughput: median and the worst round; "
        f"{frames.fps.count} round(s).",
        "",
    ]
    out += table(
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
                f.rate(frames.fps.median),
                f.rate(frames.fps.low),
                *summary_cells(frames.cpu_us, f.us),
                f.us(frames.others.client_cpu.median),
            ],
            [
                "echo",
                f.rate(frames.echo_fps.median),
                f.rate(frames.echo_fps.low),
                *summary_cells(frames.echo_cpu_us, f.us),
                f.us(frames.echo_client_us.median),
            ],
        ],
    )
    out += [
        "",
        f"The fake LLM spent {f.us(frames.others.fake_cpu.median)} of CPU per "
        "loopwire frame. The bench's client shares the cores with the servers "
        "and decodes every frame: when its CPU per frame comes near the "
        "server's, frames/s measures the client as much as the server, and the "
        "CPU per frame is the fairer comparison.",
    ]
    return out


def pace_section(results: Results) -> list[str]:
    out = ["", "### Streamed tokens at a model's pace", ""]
    pace = results.token_pace
    if pace is None:
        return [*out, "Not measured in this run."]
    stream_s = pace.tokens * pace.token_delay_ms / 1000
    out += [
        "What a real model's stream costs the server, and what token batching "
        f"saves: {f.n(pace.sessions)} clients at once each send a plain chat whose "
        f"answer of {f.n(pace.tokens)} tokens the fake LLM streams "
        f"{pace.token_delay_ms:g} ms apart (a fast model's pace; ≥ {stream_s:g} s "
        "an answer), to a loopwire with token batching at its default "
        "(`LOOPWIRE_TOKEN_BATCH_MS` unset: the first token at once, then at most "
        "one `token_stream` frame per tick with what came meanwhile) and to one "
        "with it off (`0`: a frame per token). Frames per answer include the "
        "closing one; CPU per token is the server's CPU over a round / the tokens "
        f"streamed in it; {pace.batched.cpu_us_per_token.count} round(s).",
        "",
    ]
    out += table(
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
        f.count(stream.frames_per_answer.median),
        *summary_cells(stream.cpu_us_per_token, f.us),
        f.secs(stream.wall_s.median),
    ]


def memory_section(results: Results) -> list[str]:
    out = ["", "### Memory", ""]
    memory = results.memory
    if memory is None:
        return [*out, "Not measured in this run."]
    out += [
        f"VmRSS growth of the server over a batch of {f.n(memory.sessions_per_batch)} "
        "new sessions, each paused on a question (`request_input`), / the batch; "
        f"one sample per batch ({memory.batches}), the batches added one after "
        "another after a warm-up. The echo: the same batches of bare sockets (one "
        "round trip each)"
        + (", on an echo process of its own." if not results.tiny else "."),
        "",
    ]
    out += table(
        ["per", "median", "p99"],
        [
            ["paused loopwire session", *summary_cells(memory.kib_per_session, f.kib)],
            ["bare echo socket", *summary_cells(memory.echo_kib_per_socket, f.kib)],
        ],
    )
    return out


def idle_section(results: Results) -> list[str]:
    out = ["", "### Idle memory", ""]
    idle = results.idle
    if idle is None:
        return [*out, "Not measured in this run."]
    out += [
        "VmRSS of `python -m backend serve` with the product's default settings, "
        "only pointed at the fake LLM (the OpenAI provider) and at a SQLite file "
        "of its own, once healthy (`/healthz`, `/api/info`) and then quiet (no "
        f"CPU for {QUIET_S:g} s), no client connected. Each sample is a pair of "
        "starts: on a new database (the migrations run), then again on the same "
        "file, migrated, as at an operator's every restart: the target is judged "
        f"on that one. {idle.starts} pair(s); MB are 10⁶ bytes.",
        "",
    ]
    out += table(
        ["start", "median", "p99", "lowest"],
        [
            [
                "on a new database",
                *summary_cells(idle.fresh_mb, f.mb),
                f.mb(idle.fresh_mb.low),
            ],
            [
                "restarted on it (migrated)",
                *summary_cells(idle.migrated_mb, f.mb),
                f.mb(idle.migrated_mb.low),
            ],
        ],
    )
    return out


def profile_section(results: Results) -> list[str]:
    out = ["", "### Where the server's CPU goes", ""]
    profiles = list(results.profiles.values())
    if not profiles:
        note = results.profile_note or "no profiled measurement ran"
        return [*out, f"No profile: {note}."]
    rate = profiles[0].rate
    out += [
        f"py-spy sampled the server {rate} times a second, without pausing it, "
        "for the first measured round of the act-shaped turns, of the agent "
        "runs at the highest concurrency, of the streamed frames and of the "
        "tokens at a model's pace with batching on (that round's figures are in "
        "the tables). Samples of idle threads are left out (py-spy's default): the "
        "shares are of the CPU the server's threads spent. A sample counts in "
        "the bucket of its innermost frame that a bucket names; frames of other "
        "libraries and the standard library count as their caller's, and a "
        "sample with no Python frame below the event loop's run is the loop's "
        "own I/O (`benchmarks/profile.py`).",
        "",
    ]
    rows = [
        [bucket, *(_share(p, bucket) for p in profiles)]
        for bucket in BUCKETS
        if any(_share(p, bucket) != "—" for p in profiles)
    ]
    rows.append(
        ["the event loop's thread", *(f.pct(100 * p.main_thread) for p in profiles)]
    )
    rows.append(
        ["samples (errors)", *(f"{f.n(p.samples)} ({p.errors})" for p in profiles)]
    )
    out += table(["share of the samples", *(p.what for p in profiles)], rows)
    out.append("")
    for profile in profiles:
        top = "; ".join(
            f"{label} {100 * share:.1f} %" for label, share in profile.own_top
        )
        out.append(f"- {profile.what}, loopwire's own functions: {top or 'none'}")
    if results.profile_note:
        out += ["", f"Missing profiles: {results.profile_note}."]
    return out


def _share(profile: Profile, bucket: str) -> str:
    share = dict(profile.buckets).get(bucket)
    return f"{100 * share:.1f} %" if share else "—"


def stop_section(results: Results) -> list[str]:
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
    out += table(
        ["phase", "median", "p99", "max"],
        [
            [name, *summary_cells(s, f.ms), f.ms(s.high)]
            for name, s in stop.phases.items()
        ],
    )
    return out


def loop_section(results: Results) -> list[str]:
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
    out += table(
        ["ms per step", "p99", "min"],
        [[*summary_cells(loop.ms_per_step, f.ms), f.ms(loop.ms_per_step.low)]],
    )
    return out


def sources_section(results: Results) -> list[str]:
    out = ["", "### Data sources: indexing and search", ""]
    sources = results.sources
    if sources is None:
        return [*out, "Not measured in this run."]
    out += [
        f"{f.n(sources.documents)} small Markdown documents "
        f"({sources.megabytes:.1f} MB, {f.n(sources.passages)} passages) indexed "
        "into SQLite FTS5 in the bench's own process by one refresh, then "
        "refreshed with nothing changed; then "
        f"{f.n(sources.queries)} queries of two to four words (BM25, 5 passages "
        "each), one sample per query.",
        "",
    ]
    out += table(
        ["index all", "refresh, unchanged", "query", "p99", "max"],
        [
            [
                f.secs(sources.index_s),
                f.ms(sources.unchanged_refresh_s * 1000),
                *summary_cells(sources.query_ms, f.ms),
                f.ms(sources.query_ms.high),
            ]
        ],
    )
    return out
