"""The Python examples in docs/clients.md run, and print what the page says."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import StartServer

PAGE = Path(__file__).resolve().parent.parent / "docs" / "clients.md"
EXAMPLE = re.compile(r"```python\n(.*?)```\n\n```\n(.*?)```", re.DOTALL)
URL = "ws://127.0.0.1:8000/ws"
RUFF = Path(sys.executable).parent / "ruff"


def examples() -> list[tuple[str, str]]:
    """Each Python block of the page, with the output block after it."""
    return EXAMPLE.findall(PAGE.read_text(encoding="utf-8"))


async def test_every_python_example_prints_what_the_page_shows(
    start_server: StartServer,
) -> None:
    """Each Python example in `docs/clients.md` prints exactly the output shown."""
    harness = await start_server(llm_provider="offline")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWIRE_")}
    found = examples()
    assert len(found) == 4
    for code, shown in found:
        assert URL in code
        script = code.replace(URL, harness.server.url("/ws", "ws"))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            script,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(30):
            out, err = await process.communicate()
        assert (process.returncode, err.decode()) == (0, "")
        assert out.decode() == shown


def test_the_examples_are_formatted_and_lint_clean() -> None:
    """The Python examples in `docs/clients.md` are ruff-formatted and lint clean."""
    for code, _ in examples():
        for command in (
            [str(RUFF), "format", "--check", "--stdin-filename", "example.py", "-"],
            [str(RUFF), "check", "--stdin-filename", "example.py", "-"],
        ):
            done = subprocess.run(
                command, input=code, capture_output=True, text=True, check=False
            )
            assert done.returncode == 0, done.stdout + done.stderr
