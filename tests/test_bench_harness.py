"""The benchmark harness runs (`python -m benchmarks --tiny`): every
measurement, every target row, validated runs, what bounds the targets not
met (a py-spy profile, or why there is none), the hand-written prose of the
report kept, and no process left behind. No timing is asserted: benchmarks
are not timed tests."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.checks import BenchError, Frame, check_stream
from benchmarks.cluster import Stops, render, stop_table
from benchmarks.fake_llm import Options, answer_text, decide
from benchmarks.machine import Machine
from benchmarks.profile import find_py_spy, summarise
from benchmarks.report import BEGIN, END, VALIDATED, splice, write
from benchmarks.results import Profile, Results
from benchmarks.stats import Summary
from benchmarks.targets import Row, bounded_by
from benchmarks.token_pace import DEFAULT_BATCH_MS

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = [
    "### Targets",
    "### Agent runs and concurrency",
    "### Act-shaped turns",
    "### Where the server's CPU goes",
    "### Streamed frames",
    "### Streamed tokens at a model's pace",
    "### Memory",
    "### Idle memory",
    "### Stop latency",
    "### The agent loop in-process",
    "### Data sources: indexing and search",
]
TARGET_ROWS = [
    "| server CPU per act-shaped turn, 3 sessions | ",
    "| server CPU per act-shaped turn, traces on ÷ off (rounds in turn) | ",
    "| 3-step agent runs, 2 sessions: wall / ideal (ideal 0.18 s) | ",
    "| 3-step agent runs, 4 sessions: wall / ideal | ",
    "| server CPU per LLM call, 2 sessions | ",
    "| server CPU per LLM call, 4 sessions | ",
    "| CPU per LLM call, 4 ÷ 2 sessions (flat) | ",
    "| frames/s to 3 clients, token batching off, as % of the echo's | ",
    "| CPU per frame, token batching off: the echo's as % of loopwire's | ",
    "| server CPU per token at a model's pace, token batching on (vs off) | ",
    "| RSS per session paused on a question (echo: ",
    "| idle RSS of a fresh server, restarted on its migrated database (on a new ",
    "| Stop → `response_complete`, LLM call | ",
    "| Stop → `response_complete`, mid-stream | ",
    "| Stop → `response_complete`, tool call | ",
    "| Stop → `response_complete`, question | ",
]
TARGETS = [
    "| ≤ 6 ms |",
    "| ≤ 1.10 times |",
    "| ≤ 1.3x |",
    "| ≤ 8x |",
    "| ≤ 2 ms |",
    "| ≤ 2 ms |",
    "| ≤ 1.25x |",
    "| ≥ 40 % |",
    "| ≥ 40 % |",
    "| ≤ 60 µs |",
    "| ≤ 70 KiB |",
    "| ≤ 80 MB |",
    "| p99 ≤ 5 ms |",
    "| p99 ≤ 5 ms |",
    "| p99 ≤ 5 ms |",
    "| p99 ≤ 5 ms |",
]
"""Issue #32's targets, row by row."""
PROSE = (
    "# Benchmarks\n\nWhat we measure, by hand.\n\n## Soak\n\nSoak figures, by hand.\n"
)


def test_a_tiny_run_measures_everything_and_keeps_the_prose(tmp_path: Path) -> None:
    """A tiny run fills every section and target row, keeps prose, leaves no process."""
    report = tmp_path / "benchmarks.md"
    report.write_text(PROSE, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--tiny", "--out", str(report)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]

    text = report.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n\nWhat we measure, by hand.\n\n" + BEGIN)
    assert text.endswith(END + "\n\n## Soak\n\nSoak figures, by hand.\n")
    block = text[text.index(BEGIN) : text.index(END)]
    for heading in SECTIONS:
        assert heading in block
    rows = [line for line in block.splitlines() if line.startswith(tuple(TARGET_ROWS))]
    assert [r[: len(p)] for r, p in zip(rows, TARGET_ROWS, strict=True)] == TARGET_ROWS
    for row, target in zip(rows, TARGETS, strict=True):
        assert row.endswith((f"{target} met |", f"{target} **not met** |")), row
    _assert_bounded(block, rows)
    assert f"| on ({DEFAULT_BATCH_MS:g} ms, the default) |" in block
    assert "| off |" in block
    assert "not measured" not in block
    assert VALIDATED in block
    assert "Other processes on the machine took at most" in block
    assert "Tiny run" in block

    plot = report.with_suffix(".png")
    if importlib.util.find_spec("matplotlib") is not None:
        assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        assert "](benchmarks.png)" in block
    else:  # said in the report, not skipped silently
        assert not plot.exists()
        assert "No plot: matplotlib is not installed" in block

    started = re.findall(r"started (\S+) pid (\d+)", done.stderr)
    assert {name for name, _ in started} == {
        "fake-llm",
        "echo",
        "loopwire",
        "loopwire-wait-tool",
        "loopwire-token-batch-ms-0",
        "loopwire-otel-exporter-otlp-endpoint-http_127.0.0.1_9",
        "idle-1-new-db",
        "idle-1-migrated",
    }
    for _, pid in started:
        assert not Path(f"/proc/{pid}").exists(), f"process {pid} left running"


NOT_PROFILED = (
    ": not profiled (the bench samples the act-shaped turns, the agent runs at "
    "the highest concurrency, the streamed frames and the tokens at a model's "
    "pace; for the others see the prose below the generated section)"
)
BOUNDED = re.compile(
    r": bounded by: (\S.* \d+ % of the CPU sampled in|no samples in) "
    r"(act-shaped turns, 3 sessions|agent runs, 4 sessions|streamed frames"
    r"|pace, batching on \(20 ms\))"
)


def _assert_bounded(block: str, rows: list[str]) -> None:
    """Each target not met is named once under the table: with the buckets of
    its round's profile, or why there is no profile, or as not profiled."""
    unmet = [
        row.removeprefix("| ").split(" | ")[0].split(" (")[0]
        for row in rows
        if row.endswith("| **not met** |")
    ]
    lines = [line for line in block.splitlines() if line.startswith("- ")]
    bounded = [line for line in lines if ": bounded by: " in line]
    unprofiled = [line for line in lines if line.endswith(NOT_PROFILED)]
    named = [line[2:].split(": bounded by: ")[0] for line in bounded]
    named += [line[2:].removesuffix(NOT_PROFILED) for line in unprofiled]
    assert sorted(n for names in named for n in names.split("; ")) == sorted(unmet)
    if "| samples (errors) |" in block:
        assert "| the event loop's thread |" in block
        for line in bounded:
            assert BOUNDED.search(line), line
        return
    note = re.search(r"^No profile: (.+)\.$", block, re.MULTILINE)
    assert note is not None
    if find_py_spy() is None:
        assert note[1].startswith("py-spy is not installed")
    for line in bounded:
        assert line.endswith(f": bounded by: no profile: {note[1]}"), line


def test_only_the_generated_section_is_replaced() -> None:
    """Splicing swaps the text between the markers and keeps the prose around it."""
    document = f"# T\n\nIntro.\n\n{BEGIN}\nold\n{END}\n\n## Soak\n\nProse.\n"
    updated = splice(document, f"{BEGIN}\nnew\n{END}\n")
    assert updated == f"# T\n\nIntro.\n\n{BEGIN}\nnew\n{END}\n\n## Soak\n\nProse.\n"


def test_the_fake_llm_ends_a_run_after_the_steps_asked_for() -> None:
    """The fake model keeps a run going until the step count the user message names."""

    def observe(step: int) -> dict[str, object]:
        body = {
            "messages": [
                {"role": "system", "content": "You are loopwire's assistant."},
                {"role": "user", "content": "Add. steps=2"},
                {"role": "system", "content": f"# Agent step {step} of 5: OBSERVE\n"},
            ]
        }
        reply, _ = decide(body, Options())
        control = reply.content.split("```json\n")[1].split("\n```")[0]
        return dict(json.loads(control))

    assert observe(1)["should_continue"] is True
    assert observe(2) == {
        "observation": "Step 2 done.",
        "should_continue": False,
        "final_answer": "Done after 2 steps.",
    }


def _streamed(*tokens: str) -> list[Frame]:
    """A plain chat's frames, its answer streamed as `tokens`."""
    frames: list[Frame] = [
        {"type": "token_stream", "token": t, "is_first": i == 0, "is_last": False}
        for i, t in enumerate(tokens)
    ]
    closing = {"type": "token_stream", "token": "", "is_first": False, "is_last": True}
    answer = "".join(tokens).strip()
    return [
        *frames,
        closing,
        {"type": "chat_response", "message": answer},
        {"type": "response_complete"},
    ]


def test_a_streamed_answer_is_checked_frame_by_frame_or_joined() -> None:
    """Exact checks need a frame per token; loose ones the joined text and one end."""
    assert answer_text(3) == "w0 w1 w2"
    assert check_stream(_streamed("w0 ", "w1 ", "w2 "), 3) == 4
    assert check_stream(_streamed("w0 ", "w1 ", "w2 "), 3, exact=False) == 4
    assert check_stream(_streamed("w0 ", "w1 w2 "), 3, exact=False) == 3
    with pytest.raises(BenchError, match="3 token_stream frames, expected 4"):
        check_stream(_streamed("w0 ", "w1 w2 "), 3)
    with pytest.raises(BenchError, match="tokens joined"):
        check_stream(_streamed("w0 ", "w2 "), 3, exact=False)
    early_end = _streamed("w0 ", "w1 w2 ")
    early_end[1]["is_last"] = True
    with pytest.raises(BenchError, match="is_last on"):
        check_stream(early_end, 3, exact=False)


SITE = "/v/lib/python3.11/site-packages"
STDLIB = "/usr/lib/python3.11"
LOOP_RUN = (
    f"thread (1): MainThread;<module> ({ROOT}/backend/__main__.py:343);"
    f"Server.run ({SITE}/uvicorn/server.py:86);"
    f"Runner.run ({STDLIB}/asyncio/runners.py:118)"
)
DRIVER = f"RunDriver._phase ({ROOT}/backend/agent/driver.py)"
STACKS = f"""\
{LOOP_RUN};{DRIVER};AsyncAPIClient.request ({SITE}/openai/_base_client.py);\
dumps ({STDLIB}/json/__init__.py:231) 1
{LOOP_RUN};{DRIVER};AsyncAPIClient.request ({SITE}/openai/_base_client.py);\
uuid4 ({STDLIB}/uuid.py) 4
{LOOP_RUN} 5
{LOOP_RUN};shield.<locals>._inner_done_callback ({STDLIB}/asyncio/tasks.py) 1
{LOOP_RUN};WebSocketProtocol.send ({ROOT}/backend/server.py);\
WebSocketsSansIOProtocol.send ({SITE}/uvicorn/protocols/websockets/sansio.py) 2
{LOOP_RUN};RunState.to_json ({ROOT}/backend/agent/state.py);\
BaseModel.model_dump_json ({SITE}/pydantic/main.py) 2
{LOOP_RUN};{DRIVER};BaseModel.__init__ ({SITE}/pydantic/main.py) 7
{LOOP_RUN};Database.transact ({ROOT}/backend/store/engine.py);\
deepcopy ({STDLIB}/copy.py) 2
thread (2): loopwire-sqlite-writer_0;Thread._bootstrap ({STDLIB}/threading.py);\
_worker ({STDLIB}/concurrent/futures/thread.py) 3
thread (3): Thread-5;Thread._bootstrap ({STDLIB}/threading.py);\
run ({SITE}/somelib/work.py) 1
"""
"""py-spy's raw output (`--threads --full-filenames`), lines with and without
line numbers: one sample kind a line."""


def test_each_sample_counts_in_the_bucket_its_innermost_named_frame_says() -> None:
    """Frames outside the loop's run are left out; a library's frames decide
    before their callers, the standard library's and pydantic's validation
    defer to them; no frame below the loop's run is the loop's I/O."""
    profile = summarise("agent runs, 4 sessions", STACKS, errors=2)

    assert profile == Profile(
        what="agent runs, 4 sessions",
        rate=200,
        samples=28,
        errors=2,
        buckets=(
            ("loopwire's own code", 7 / 28),
            ("event loop / I/O", 6 / 28),
            ("the store", 5 / 28),
            ("the LLM client", 4 / 28),
            ("JSON encoding and decoding", 3 / 28),
            ("the WebSocket path", 2 / 28),
            ("other", 1 / 28),
        ),
        own_top=(("`RunDriver._phase` (backend/agent/driver.py)", 7 / 28),),
        main_thread=24 / 28,
    )


def _results(**profiles: Profile) -> Results:
    machine = Machine(cpu="cpu", cores=2, python="3.11", system="Linux", packages=())
    return Results(
        machine=machine,
        command="python -m benchmarks",
        date="today",
        tiny=False,
        rounds=3,
        profiles=dict(profiles),
    )


def test_what_bounds_each_target_not_met_comes_from_its_rounds_profile() -> None:
    """Targets not met are grouped by the profile of their round; one without
    a profile says why; one whose measurement is not sampled says so."""
    runs = summarise("agent runs, 1,000 sessions", STACKS)
    rows = [
        Row("server CPU per LLM call, 100 sessions", "3 ms", "—", "", False, "runs"),
        Row("wall / ideal (ideal 1.8 s)", "2x", "—", "", False, "runs"),
        Row("flat", "1x", "—", "", True, "runs"),
        Row("server CPU per act-shaped turn", "9 ms", "—", "", False, "turns"),
        Row("Stop, question", "6 ms", "—", "", False),
    ]

    assert bounded_by(_results(runs=runs), rows) == [
        "- server CPU per LLM call, 100 sessions; wall / ideal: bounded by: "
        "loopwire's own code 25 %, event loop / I/O 21 %, the store 18 % of the "
        "CPU sampled in agent runs, 1,000 sessions (loopwire's top functions: "
        "`RunDriver._phase` (backend/agent/driver.py) 25.0 %)",
        "- server CPU per act-shaped turn: bounded by: no profile: its round "
        "was not sampled",
        "- Stop, question" + NOT_PROFILED,
    ]


def test_stop_through_a_mirror_is_judged_and_the_same_instance_is_context() -> None:
    """The cluster's Stop table: p99 ≤ 15 ms across instances is the verdict;
    the same instance's p99 beside the SQLite target is context only."""
    stops = Stops(
        same=Summary.of([4.0, 6.0]),
        across=Summary.of([9.0, 14.0]),
        publishes_per_frame=1.2,
    )

    assert stop_table(stops)[:5] == [
        "",
        "| Stop sent by a client on | median | p99 | samples | target | verdict |",
        "|---|---|---|---|---|---|",
        "| the run's own instance | 5.0 ms | 6.0 ms | 2 "
        "| context²: p99 ≤ 5 ms | over (context) |",
        "| another instance, through the mirror | 11.5 ms | 14.0 ms | 2 "
        "| p99 ≤ 15 ms | met |",
    ]


def test_the_cluster_bench_rewrites_its_own_section_of_the_scaling_page(
    tmp_path: Path,
) -> None:
    """`benchmarks.cluster` writes its figures between the markers: a second
    run replaces the first's, and the page around them is kept as it is."""
    stops = Stops(Summary.of([4.0]), Summary.of([9.0]), publishes_per_frame=1.2)
    machine = Machine.this()
    page = tmp_path / "scaling.md"
    page.write_text("# Several instances\n\nProse.\n\n## Figures\n\nMore prose.\n")
    write(page, render([], stops, machine, "python -m benchmarks.cluster"))
    first = page.read_text()
    write(page, render([], stops, machine, "python -m benchmarks.cluster --rounds 2"))
    second = page.read_text()
    assert first.count(BEGIN) == second.count(BEGIN) == 1
    assert first.count("Measured ") == second.count("Measured ") == 1
    assert "`python -m benchmarks.cluster --rounds 2`" in second
    assert second.startswith("# Several instances\n\nProse.\n\n")
    assert second.endswith(f"{END}\n\n## Figures\n\nMore prose.\n")
