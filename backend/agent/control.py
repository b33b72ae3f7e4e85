"""Tolerant parsing of the JSON control block in reason / observe replies.

Models write prose and a JSON object, in many shapes: in a ```json fence,
a fence with another language tag (or none), no fence at all; with
trailing commas, single quotes or Python's `True` / `False` / `None`
(`backend.llm.replies.lenient` forgives those); sometimes twice. Every
fenced block and every top-level balanced `{…}` outside a fence is a
candidate; the last one (by position) that is *usable* — an object that
names at least one of the control's fields and passes its schema — wins,
and is removed from the prose shown to the user. No usable candidate means
"no control": the whole text is prose, and the loop carries on.

`cut_off` tells a reply cut off at its length limit before its control
block (or its tool call) was complete, for `RetryCutOff` to ask again.

Thinking is never looked in: `backend/llm/replies` moves it to
`Completion.reasoning` before a reply reaches a strategy, so a control
block a model wrote while thinking is no control block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from backend.bounded_json import nesting
from backend.llm.base import Completion, LLMRequest
from backend.llm.replies import lenient
from backend.llm.replies.cutoff import cut_call
from backend.protocol import ObserveControl, PlanControl, ReasonControl

C = TypeVar("C", bound=BaseModel)

_FENCE = re.compile(r"```[A-Za-z0-9_+.-]*[ \t]*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Parsed(Generic[C]):
    prose: str
    control: C | None


def parse_control(text: str, model: type[C]) -> Parsed[C]:
    """Split `text` into prose and a validated control block (or None)."""
    for start, end, body in _candidates(text):
        data = _loads_object(body)
        if data is None or not set(data) & set(model.model_fields):
            continue
        try:
            control = model.model_validate(_normalise(data))
        except ValidationError:
            continue
        prose = (text[:start] + text[end:]).strip()
        return Parsed(prose, control)
    return Parsed(text.strip(), None)


def _candidates(text: str) -> list[tuple[int, int, str]]:
    """Fenced blocks and the balanced objects outside them, as `(start, end,
    JSON text)`, the last first."""
    fences = [(m.start(), m.end(), m.group(1)) for m in _FENCE.finditer(text)]
    found = list(fences)
    for start, end in _balanced_spans(text):
        if not any(f_start <= start < f_end for f_start, f_end, _ in fences):
            found.append((start, end, text[start:end]))
    return sorted(found, key=lambda span: span[0], reverse=True)


def _loads_object(candidate: str) -> dict[str, Any] | None:
    try:
        value = lenient.loads(candidate.strip())
    except (ValueError, RecursionError):  # malformed, too deep, huge numbers
        return None
    return value if isinstance(value, dict) else None


def _balanced_spans(text: str) -> list[tuple[int, int]]:
    """Top-level balanced `{…}` spans (strings are respected; quotes in the
    prose around them are not strings)."""
    spans: list[tuple[int, int]] = []
    start = -1
    for index, depth in nesting(text, brackets="{}", strings_at_top=False):
        if depth == 1 and text[index] == "{":
            start = index
        elif depth == 0:
            spans.append((start, index + 1))
    return spans


_FLAGS = frozenset({"finish", "should_continue", "replan"})


def _normalise(data: dict[str, Any]) -> dict[str, Any]:
    """Forgive the usual slips: "true"/"false" strings for flags, nulls."""
    fixed: dict[str, Any] = {}
    for key, value in data.items():
        if key in _FLAGS and isinstance(value, str):
            value = {"true": True, "false": False}.get(value.strip().lower(), value)
        if value is not None:
            fixed[key] = value
    return fixed


_CONTROLS: dict[str, type[BaseModel]] = {
    "reason": ReasonControl,
    "observe": ObserveControl,
    "plan": PlanControl,
}


def cut_off(request: LLMRequest, reply: Completion) -> bool:
    """`reply` ended at its length limit before what its phase needs: the
    tool call it had begun (tools offered), or the control block of a
    reason, observe or plan call."""
    if reply.finish_reason != "length":
        return False
    if request.tools and request.tool_choice != "none" and cut_call(reply):
        return True
    model = _CONTROLS.get(request.purpose)
    return model is not None and parse_control(reply.content, model).control is None
