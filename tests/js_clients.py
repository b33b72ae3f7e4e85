"""Client libraries of other ecosystems, run by Node against a live server.

`make test` installs the pinned packages of `tests/js/package.json` into
`tests/js/node_modules` (Debian's Node; `make node`). A test runs a script
of its own with `run_node(script, env)`: the script is an ES module written
to a temporary file inside `tests/js/` (so its imports resolve there), its
stdout is returned, and a non-zero exit fails the test with its stderr.
Without Node or the packages, `needs_node` skips the test and says why.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parent / "js"
INSTALLED = JS / "node_modules" / ".installed"
NODE = shutil.which("node")

needs_node = pytest.mark.skipif(
    NODE is None or not INSTALLED.exists(),
    reason=(
        "Node or the client libraries are missing: `make test` installs them "
        "(tests/js/package.json; Debian's nodejs when root)"
    ),
)


async def run_node(
    script: str, env: dict[str, str] | None = None, *, timeout_s: float = 60.0
) -> str:
    """Run `script` (an ES module) with Node in `tests/js/`; its stdout."""
    assert NODE is not None
    with tempfile.NamedTemporaryFile(
        "w", suffix=".mjs", dir=JS, prefix=".run-", delete=False
    ) as file:
        file.write(script)
    try:
        process = await asyncio.create_subprocess_exec(
            NODE,
            file.name,
            cwd=JS,
            env={**os.environ, **(env or {})},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout_s)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
    finally:
        os.unlink(file.name)
    if process.returncode != 0:
        pytest.fail(f"node exited {process.returncode}:\n{err.decode()[-4000:]}")
    return out.decode()
