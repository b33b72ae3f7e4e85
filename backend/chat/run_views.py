"""How a stored run is shown by the conversations API: read from its
checkpoint here, in the chat layer, so the transport needs no agent types."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from backend.agent.state import RunState
from backend.chat.data_sources import RETRIEVE
from backend.chat.run_requests import PLAIN
from backend.store.records import RunRecord


def run_view(record: RunRecord) -> dict[str, Any]:
    """A stored run as the conversations API shows it: the record, how it
    was asked for (`mode`) and its trace, read from its checkpoint (None
    for both when the checkpoint cannot be read)."""
    body = record.model_dump(mode="json", exclude={"state", "conversation_id"})
    try:
        state = RunState.from_json(record.state)
        trace = state.trace
        body["mode"] = _mode(state)
        body["trace"] = [
            {
                "step": t.step,
                "phase": t.phase,
                "started_at": t.started_at,
                "duration_ms": t.duration_ms,
                "llm_calls": t.llm_calls,
                "tool_calls": t.tool_calls,
            }
            for t in trace
        ]
    except ValidationError:
        body["trace"] = None
        body["mode"] = None
    return body


def _mode(state: RunState) -> str:
    """How the run was asked for, as the page shows it: `agent`, `tools`
    (a chat with tools), `retrieve` (a search of the data sources) or `plain`."""
    if state.request.agent:
        return "agent"
    if state.strategy == RETRIEVE:
        return "retrieve"
    return "plain" if state.strategy == PLAIN else "tools"
