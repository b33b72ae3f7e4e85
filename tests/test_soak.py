"""The soak (`tests/soak.py`) run in a fresh interpreter, its figures checked.

500 WebSocket sessions opened and dropped (a third finish a run, a third
drop the socket mid-run, a third while the run waits for an answer): after
the grace period the sessions in memory, the asyncio tasks and the
executor's per-session state are back to their baseline, every conversation
is in the store, and RSS grew by under 5 % over the baseline taken after a
warm-up round of the same size.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(400)

ROOT = Path(__file__).resolve().parent.parent


async def test_five_hundred_dropped_sessions_leave_nothing_behind(
    tmp_path: Path,
) -> None:
    """After 500 dropped sessions no state is left behind and RSS grows under 5 %."""
    soak = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.soak",
        str(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    out, err = await soak.communicate()
    assert soak.returncode == 0, err.decode()[-3000:]
    figures = json.loads(out.decode().strip().splitlines()[-1])

    assert figures["sessions_in_memory"] == 0
    assert figures["tasks_after"] == figures["tasks_baseline"]
    assert figures["executor_sessions"] == 0
    assert figures["stored_conversations"] == figures["warm_up"] + figures["sessions"]
    baseline, after = figures["rss_baseline"], figures["rss_after"]
    growth = (after - baseline) / baseline
    assert growth < 0.05, f"RSS grew {growth:.1%}: {baseline >> 20} → {after >> 20} MiB"
