"""The benchmark harness runs (`python -m benchmarks --tiny`): every
measurement, every target row, validated runs, the hand-written prose of the
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
from benchmarks.fake_llm import Options, answer_text, decide
from benchmarks.report import BEGIN, END, VALIDATED, splice
from benchmarks.token_pace import DEFAULT_BATCH_MS

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = [
    "### Targets",
    "### Agent runs and concurrency",
    "### Act-shaped turns",
    "### Streamed frames",
    "### Streamed tokens at a model's pace",
    "### Memory",
    "### Stop latency",
    "### The agent loop in-process",
    "### Data sources: indexing and search",
]
TARGET_ROWS = [
    "| server CPU per act-shaped turn, 3 sessions |",
    "| 3-step agent runs, 2 sessions: wall / ideal",
    "| 3-step agent runs, 4 sessions: wall / ideal |",
    "| server CPU per LLM call, 2 sessions |",
    "| server CPU per LLM call, 4 sessions |",
    "| CPU per LLM call, 4 ÷ 2 sessions (flat) |",
    "| frames/s to 3 clients, as % of the echo's |",
    "| CPU per frame: the echo's as % of loopwire's |",
    "| RSS per session paused on a question",
    "| Stop → `response_complete`, LLM call |",
    "| Stop → `response_complete`, mid-stream |",
    "| Stop → `response_complete`, tool call |",
    "| Stop → `response_complete`, question |",
]
CONTEXT_ROWS = [
    "| CPU per streamed token at a model's pace, batching on vs off |",
]
"""Rows of the targets table with no target of the issue's."""
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
        timeout=55,
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
    assert len(rows) == len(TARGET_ROWS), rows
    for row in rows:
        assert row.endswith(("| met |", "| **not met** |")), row
    context = [
        line for line in block.splitlines() if line.startswith(tuple(CONTEXT_ROWS))
    ]
    assert len(context) == len(CONTEXT_ROWS), context
    for row in context:
        assert row.endswith("| — | — | — |"), row
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
    }
    for _, pid in started:
        assert not Path(f"/proc/{pid}").exists(), f"process {pid} left running"


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
