"""The answer of last resort: what the tools returned, plainly listed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from backend.tools.outcome import ToolOutcome
from backend.tools.results import compact

if TYPE_CHECKING:
    from backend.agent.state import RunState

_MAX_ITEM_CHARS = 600


def summarize_outcomes(outcomes: Sequence[ToolOutcome], steps: int) -> str:
    """A final answer built from tool executions, for when the model gave none."""
    if not outcomes:
        return (
            f"I could not produce an answer after {steps} step(s), and no tool "
            "was run. Please try rephrasing the request."
        )
    lines = [
        f"I could not write a full answer, but here is what {steps} step(s) found:"
    ]
    for outcome in outcomes:
        name = outcome.call.name
        if outcome.ok:
            lines.append(
                f"- `{name}` returned: {compact(outcome.result, _MAX_ITEM_CHARS)}"
            )
        else:
            lines.append(f"- `{name}` failed ({outcome.status}): {outcome.error}")
    return "\n".join(lines)


def cut_short(state: RunState, reason: str) -> str:
    """What history keeps of a run cut off (`reason`: stopped, interrupted)
    before it answered, so that a "continue" in the next message picks up
    from there."""
    how = "stopped by the user" if reason == "stopped" else "interrupted"
    done = summarize_outcomes(state.outcomes, state.step) if state.outcomes else ""
    notes = " ".join(state.observations[-3:])
    parts = [f"(This run was {how} at step {state.step} before it answered.)"]
    parts += [text for text in (notes, done) if text]
    return "\n\n".join(parts)
