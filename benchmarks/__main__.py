"""`python -m benchmarks` (`make bench`): measure loopwire against the issue's targets.

    python -m benchmarks                      # the full run (~5 minutes on 2 cores)
    python -m benchmarks --tiny --out /tmp/b.md   # seconds: checks the harness
    python -m benchmarks --only stop,memory   # a subset

Starts the fake LLM, the bare echo and loopwire servers as processes on
loopback (`benchmarks/harness.py`), runs the measurements (each module's
docstring says what it measures and how), validates every run, and writes
the generated section of the report (`--out`, default docs/benchmarks.md;
the rest of the file is kept) and the plot (`--plot`, default the report's
name with `.png`): issue #32's targets, each with its verdict, and for each
one not met what bounds it, from a py-spy profile of one round of the
act-shaped turns and of the agent runs at the highest concurrency
(`benchmarks/profile.py`; without py-spy, or with `--no-profile`, the
report says why there is none). Progress goes to stderr. Every process it
started is stopped when it ends, fails or is interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import resource
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from benchmarks import (
    agent_loop,
    agent_runs,
    frame_rate,
    idle_memory,
    session_memory,
    sources,
    stop_latency,
    token_pace,
    turn_cost,
)
from benchmarks.checks import BenchError
from benchmarks.harness import Harness, Sizes, progress
from benchmarks.machine import Machine, source_revision
from benchmarks.plot import PlotUnavailable, draw
from benchmarks.processes import ROOT
from benchmarks.report import render, write
from benchmarks.results import Results

SECTIONS = ("loop", "sources", "turns", "runs", "frames", "memory", "idle", "stop")
PART_OF = {"pace": "frames", "tracing": "turns"}
"""Measurements run under another's name: `--only frames` also runs the
streamed tokens at a model's pace."""
DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tiny", action="store_true", help="a few sessions, one round")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the report")
    parser.add_argument("--plot", type=Path, help="the PNG (default: --out with .png)")
    parser.add_argument(
        "--keep-logs",
        type=Path,
        metavar="DIR",
        help="copy the servers' logs (and the profiles' stacks) here",
    )
    parser.add_argument(
        "--no-profile",
        action="store_true",
        help="no py-spy profile of the turns and the agent runs",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME[,NAME]",
        help=f"run only these measurements: {', '.join(SECTIONS)} (frames: "
        "also the streamed tokens at a model's pace)",
    )
    _size_options(parser.add_argument_group("sizes (defaults: the issue's)"))
    return parser


def _size_options(sizes: argparse._ArgumentGroup) -> None:
    sizes.add_argument("--rounds", type=int, help="measured rounds (3)")
    sizes.add_argument(
        "--sessions",
        help="agent-run concurrencies, comma-separated (10,100,1000); the "
        "targets are judged at the last two",
    )
    sizes.add_argument("--steps", type=int, dest="run_steps", help="steps per run (3)")
    sizes.add_argument(
        "--latency-ms", type=float, dest="llm_latency_ms", help="LLM latency (200)"
    )
    sizes.add_argument(
        "--turn-sessions", type=int, help="act-shaped turns: sessions (100)"
    )
    sizes.add_argument(
        "--turns", type=int, dest="turns_per_session", help="turns each (3)"
    )
    sizes.add_argument("--frame-sessions", type=int, help="streaming clients (100)")
    sizes.add_argument("--frame-tokens", type=int, help="tokens streamed to each (200)")
    sizes.add_argument(
        "--token-delay-ms",
        type=float,
        help="ms between tokens streamed at a model's pace (5)",
    )
    sizes.add_argument(
        "--memory-sessions", type=int, help="paused sessions per batch (300)"
    )
    sizes.add_argument(
        "--idle-starts",
        type=int,
        help="pairs of fresh-server starts for idle memory (3)",
    )
    sizes.add_argument("--stop-samples", type=int, help="stops per phase (100)")
    sizes.add_argument(
        "--budget-s",
        type=float,
        help="time budget: rounds past the second are skipped past it (300)",
    )


def _sections(only: Sequence[str] | None) -> tuple[str, ...]:
    if not only:
        return SECTIONS
    wanted = {name.strip() for item in only for name in item.split(",") if name.strip()}
    unknown = wanted - set(SECTIONS)
    if unknown:
        raise SystemExit(
            f"unknown measurement(s): {', '.join(sorted(unknown))}; "
            f"choose from {', '.join(SECTIONS)}"
        )
    return tuple(name for name in SECTIONS if name in wanted)


def _sizes(args: argparse.Namespace) -> Sizes:
    sizes = Sizes.tiny_run() if args.tiny else Sizes()
    changes = {
        key: getattr(args, key)
        for key in (
            "rounds",
            "run_steps",
            "llm_latency_ms",
            "turn_sessions",
            "turns_per_session",
            "frame_sessions",
            "frame_tokens",
            "token_delay_ms",
            "memory_sessions",
            "idle_starts",
            "stop_samples",
            "budget_s",
        )
    }
    if args.sessions:
        counts = tuple(int(n) for n in args.sessions.split(","))
        changes["run_sessions"] = counts
        changes["target_sessions"] = (
            counts[-2] if len(counts) > 1 else counts[0],
            counts[-1],
        )
    return sizes.with_changes(**changes)


async def _measure(harness: Harness, sections: Sequence[str], results: Results) -> None:
    sizes = harness.sizes

    async def turns() -> None:
        results.turn_cost = await turn_cost.measure(harness)

    async def tracing() -> None:
        results.tracing = await turn_cost.tracing(harness)

    async def runs() -> None:
        results.runs = await agent_runs.measure(harness)

    async def frames() -> None:
        results.frames = await frame_rate.measure(harness)

    async def pace() -> None:
        results.token_pace = await token_pace.measure(harness)

    async def memory() -> None:
        results.memory = await session_memory.measure(harness)

    async def idle() -> None:
        results.idle = await idle_memory.measure(harness)

    async def stop() -> None:
        results.stop = await stop_latency.measure(harness)

    measurements = {
        "turns": turns,
        "tracing": tracing,
        "runs": runs,
        "frames": frames,
        "pace": pace,
        "memory": memory,
        "idle": idle,
        "stop": stop,
    }
    chosen = [name for name in measurements if PART_OF.get(name, name) in sections]
    try:
        if "loop" in sections:
            progress("loop: the agent loop in-process")
            results.loop = await agent_loop.measure(sizes.loop_runs, sizes.loop_steps)
        if "sources" in sections:
            progress(f"sources: {sizes.source_documents} documents indexed in-process")
            results.sources = await sources.measure(
                sizes.source_documents, sizes.source_queries
            )
        if not chosen:
            return  # in-process measurements only: no server to start
        await harness.start()
        for index, name in enumerate(chosen):
            harness.still_to_come = tuple(chosen[index + 1 :])
            await measurements[name]()
    finally:
        harness.close()


def _raise_on_sigterm() -> None:
    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)


def _raise_file_limit() -> None:
    """1,000 sessions are 1,000 sockets here and twice that in the server."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sections = _sections(args.only)
    sizes = _sizes(args)
    command = shlex.join(
        ["python", "-m", "benchmarks", *(sys.argv[1:] if argv is None else argv)]
    )
    _raise_on_sigterm()
    _raise_file_limit()
    started = time.monotonic()
    now = datetime.datetime.now(datetime.UTC)
    results = Results(
        machine=Machine.this(),
        command=command,
        date=now.strftime("%Y-%m-%d %H:%M UTC"),
        tiny=sizes.tiny,
        rounds=sizes.rounds,
        target_sessions=sizes.target_sessions,
        revision=source_revision(ROOT),
    )
    with tempfile.TemporaryDirectory(prefix="loopwire-bench-") as workdir:
        harness = Harness(sizes, Path(workdir), profile=not args.no_profile)
        try:
            asyncio.run(_measure(harness, sections, results))
        except BenchError as exc:
            print(f"bench: FAILED: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(
                "bench: interrupted; every process it started is stopped",
                file=sys.stderr,
            )
            return 130
        finally:
            harness.close()
            if args.keep_logs:
                _keep_logs(Path(workdir), args.keep_logs)
    results.duration_s = time.monotonic() - started
    results.other_load = tuple(harness.other_load)
    results.profiles = dict(harness.profiler.profiles)
    results.profile_note = harness.profiler.note
    plot_path = args.plot or args.out.with_suffix(".png")
    plot_name: str | None = None
    note = ""
    if results.runs:
        try:
            draw(results, plot_path)
            plot_name = _relative(plot_path, args.out.parent)
        except PlotUnavailable:
            note = (
                "(No plot: matplotlib is not installed; `make bench` installs it, "
                "or `pip install -e '.[bench]'`.)"
            )
    write(args.out, render(results, plot_name, note))
    progress(
        f"done in {results.duration_s:.0f}s: wrote {args.out}"
        + (f" and {plot_path}" if plot_name else "")
    )
    return 0


def _keep_logs(workdir: Path, keep: Path) -> None:
    """The servers' logs and py-spy's, and the profiles' raw stacks."""
    keep.mkdir(parents=True, exist_ok=True)
    for kept in (*workdir.glob("*.log"), *workdir.glob("*.stacks")):
        shutil.copy(kept, keep / kept.name)


def _relative(path: Path, start: Path) -> str:
    try:
        return str(path.resolve().relative_to(start.resolve()))
    except ValueError:
        return str(path.resolve())


if __name__ == "__main__":
    raise SystemExit(main())
