"""`LoopConfig`: what every strategy shares, and the one home of its defaults
(`Settings` takes its defaults from here and builds it: `Settings.loop_config`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from backend.llm.context_windows import ContextWindows

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
    parallel_tool_calls: int = 4
    """Read-only calls of one reply run at once, at most this many
    (`agent/tool_batch.py`); 1, one call at a time."""
    token_batch_s: float = 0.0
    """Streamed text: at most one `token_stream` frame per this many seconds
    (`TokenBatcher`); 0, a frame per piece the model sends."""
    context_tokens: int | None = None
    """Every model's context window in tokens (the setting); None: what its
    server reported (`windows`), else unknown."""
    reply_tokens: int = 1024
    """Of a known context window, the tokens kept for the model's reply."""
    windows: ContextWindows = field(default_factory=ContextWindows)
    """The windows the models' servers reported (filled at start-up)."""

    def context_window(self, model: str) -> int | None:
        """`model`'s context window in tokens; None when unknown (requests
        are then bounded by `history_window_tokens` alone)."""
        if self.context_tokens is not None:
            return self.context_tokens
        return self.windows.tokens(model)
