"""What a run's answer rests on: the passages its citing tools found.

A tool with `cites=True` (such as `search_documents`) returns `passages`,
each with a source, a path, a location, a score and its text. After each of
its calls the run keeps them in `RunState.sources` — in the order found,
each passage once, at most `MAX_SOURCES` — and the answer's `chat_response`
carries them, for the UI to show as citations.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from backend.agent.state import RunState
from backend.protocol import SourceRef
from backend.sources.links import document_url
from backend.tools.base import AnyTool

MAX_SOURCES = 20
EXCERPT_CHARS = 240


def collect(state: RunState, tool: AnyTool | None, result: Any) -> None:
    """Keep what a finished call of `tool` found, if it cites."""
    if tool is None or not tool.cites or not isinstance(result, dict):
        return
    passages = result.get("passages")
    if not isinstance(passages, list):
        return
    known = {(s.source, s.path, s.location) for s in state.sources}
    for passage in passages:
        if len(state.sources) >= MAX_SOURCES:
            return
        ref = _ref(passage)
        if ref is not None and (ref.source, ref.path, ref.location) not in known:
            known.add((ref.source, ref.path, ref.location))
            state.sources.append(ref)


def _ref(passage: Any) -> SourceRef | None:
    if not isinstance(passage, dict):
        return None
    text = passage.get("text")
    excerpt = " ".join(text.split())[:EXCERPT_CHARS] if isinstance(text, str) else ""
    try:
        ref = SourceRef(
            source=passage.get("source"),
            path=passage.get("path"),
            location=passage.get("location", ""),
            score=passage.get("score"),
            excerpt=excerpt,
        )
    except ValidationError:
        return None  # a passage without the fields a citation needs
    url = document_url(ref.source, ref.path, ref.location)
    return ref.model_copy(update={"url": url})
