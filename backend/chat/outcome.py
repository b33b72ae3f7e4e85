"""What an HTTP client is told of a run at its end (`POST /api/agent`):
where its messages sit in the conversation, its trace and usage. Computed
where the session lives (the owning instance, in a cluster)."""

from __future__ import annotations

import dataclasses
from typing import Any

from backend.chat.session import Session


def run_outcome(session: Session, run_id: str, answer: str | None) -> dict[str, Any]:
    """What an HTTP client is told of a run at its end: where its
    messages sit in the history (their ids, when saved), its trace and
    usage. Empty when the run is neither active nor the last one."""
    run = next(
        (r for r in (session.run, session.last_run) if r and r.run_id == run_id),
        None,
    )
    if run is None:
        return {}
    state = run.state
    saved = state.request.save_chat
    assistant = None
    if saved and answer is not None:
        for position in range(len(run.history) - 1, -1, -1):
            message = run.history[position]
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
