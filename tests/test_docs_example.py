"""The example strategy in docs/architecture.md is real code: it loads from
the page (the contract suite runs it) and is as clean as the project's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.docs_strategy import example_source, example_strategy

RUFF = Path(sys.executable).parent / "ruff"


def test_the_example_defines_one_strategy() -> None:
    """The docs' example is one tool-less `reflect` strategy that starts at a turn."""
    strategy = example_strategy()
    assert (strategy.name, strategy.first, strategy.uses_tools) == (
        "reflect",
        "turn",
        False,
    )


def test_the_example_is_formatted_and_lint_clean() -> None:
    """The docs' example strategy passes `ruff format --check` and `ruff check`."""
    source = example_source()
    for command in (
        [str(RUFF), "format", "--check", "--stdin-filename", "reflect.py", "-"],
        [str(RUFF), "check", "--stdin-filename", "reflect.py", "-"],
    ):
        done = subprocess.run(
            command, input=source, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
