"""Once a server is ready (`server.tune_collector`): start-up's objects
frozen out of the collector's sight, and the youngest generation collected
every `YOUNG_COLLECTION` allocations, the older ones as CPython has them.
In a fresh process: the collector is the whole process's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = """
import gc
from backend.server import YOUNG_COLLECTION, tune_collector
default = gc.get_threshold()
tune_collector()
print(default, gc.get_threshold(), YOUNG_COLLECTION, gc.get_freeze_count() > 10_000)
"""


def test_the_collector_is_tuned_once_the_server_is_ready() -> None:
    """The youngest generation's threshold goes from CPython's 700 to
    10,000; the older generations' stay; what start-up made is frozen."""
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split("\n")[0] == "(700, 10, 10) (10000, 10, 10) 10000 True"
