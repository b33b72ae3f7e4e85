"""`LoopConfig`: what every strategy shares, and the one home of its defaults
(`Settings` takes its defaults from here and builds it: `Settings.loop_config`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OnReject = Literal["stop", "continue"]
"""What a run does when the user declines a tool: end, or go on without it."""


@dataclass(frozen=True, slots=True)
class LoopConfig:
    tool_result_max_chars: int = 4000
    history_window_tokens: int = 8000
    history_tool_output_chars: int = 2000
    max_parse_failures: int = 3
    request_input_timeout_s: float = 300.0
    approval_timeout_s: float = 300.0
    max_consecutive_failures: int = 3
    max_duplicate_calls: int = 2
    on_reject: OnReject = "stop"
    max_replans: int = 2
    max_tool_calls_per_step: int = 10
    token_batch_s: float = 0.0
    """Streamed text: at most one `token_stream` frame per this many seconds
    (`TokenBatcher`); 0, a frame per piece the model sends."""
