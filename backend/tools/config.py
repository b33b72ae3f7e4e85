"""`ExecutorConfig`: how tools are run, and the one home of its defaults
(`Settings` takes its defaults from here and builds it:
`Settings.executor_config`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_PROCESSES = min(4, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class ExecutorConfig:
    default_timeout_s: float = 60.0
    max_attempts: int = 3
    retry_backoff_s: float = 0.2
    rate_limit_calls: int = 10
    rate_limit_window_s: float = 60.0
    threads: int = 8
    """Plain tool functions running at once (abandoned ones included)."""
    processes: int = DEFAULT_PROCESSES
    """`cpu_bound` tool calls running at once, each in a worker process."""
