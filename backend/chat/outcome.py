"""What an HTTP client is told of a run at its end (`POST /api/agent`):
where its messages sit in the conversation, its trace and usage. Computed
where the session lives (the owning instance, in a cluster)."""

from __future__ import annotations

import dataclasses
from typing import Any

from backend.agent.state import RunState
from backend.history import History


def run_outcome(
    state: RunState, history: History, answer: str | None
) -> dict[str, Any]:
    """What an HTTP client is told of a run at its end: where its
    messages sit in the history it worked on (their ids, when saved), its
    trace and usage."""
    saved = state.request.save_chat
    assistant = None
    if saved and answer is not None:
        for position in range(len(history) - 1, -1, -1):
            message = history[position]
            if message.role == "assistant" and message.content == answer:
                assistant = position
                break
    return {
        "user_message_id": state.request_at if saved else None,
        "assistant_message_id": assistant,
        "request": state.request.content,
        "trace": [dataclasses.asdict(step) for step in state.trace],
        "usage": state.usage.model_dump(mode="json"),
    }
