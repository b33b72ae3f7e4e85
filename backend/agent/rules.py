"""Run-level rules for tool calls: what each outcome means for the run.

The executor decides what happens to one call; these rules look across the
run, keeping their counters in the `RunState`: the same call is never run
twice (canonical arguments), too many failures in a row end the run, a
`finalize` tool's summary is the answer, and a rejected approval stops the
run or is passed on to the model (`on_reject`).
"""

from __future__ import annotations

import json

from backend.agent.config import OnReject
from backend.agent.loop import Continue, Decision, Final
from backend.agent.state import RunState
from backend.llm.base import ToolCall
from backend.tools.base import ToolRegistry
from backend.tools.outcome import ToolOutcome, parse_arguments


def call_key(call: ToolCall) -> str:
    """Tool name + canonical arguments: equal keys are the same call."""
    arguments = parse_arguments(call.arguments)
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    return f"{call.name}:{canonical}"


class ToolCallRules:
    def __init__(
        self,
        registry: ToolRegistry,
        *,
        max_consecutive_failures: int,
        max_duplicate_calls: int,
        on_reject: OnReject,
    ) -> None:
        self.registry = registry
        self.max_consecutive_failures = max_consecutive_failures
        self.max_duplicate_calls = max_duplicate_calls
        self.on_reject = on_reject

    def earlier(self, state: RunState, call: ToolCall) -> ToolOutcome | None:
        """The outcome of the same call made earlier in this run, if any."""
        index = state.seen.get(call_key(call))
        return state.outcomes[index] if index is not None else None

    def record(self, state: RunState, outcome: ToolOutcome) -> None:
        state.seen[call_key(outcome.call)] = len(state.outcomes)
        state.outcomes.append(outcome)

    def after_duplicate(self, state: RunState) -> Decision:
        state.duplicates += 1
        if state.duplicates < self.max_duplicate_calls:
            return Continue()
        why = "The same tool call was repeated; answer with the results you have."
        return Final(None, "finished", why)

    def judge(self, state: RunState, outcome: ToolOutcome) -> Decision:
        """What one tool outcome means for the run."""
        if outcome.ok:
            state.failures = 0
            return self._finalized(outcome)
        if outcome.status == "rejected":
            return self._rejected(outcome)
        if outcome.status == "cancelled":
            return Continue()
        state.failures += 1
        if state.failures < self.max_consecutive_failures:
            return Continue()
        why = (
            f"{state.failures} tool calls in a row failed "
            f"(last: {outcome.call.name}: {outcome.error}). "
            "Stop trying; tell the user honestly what failed."
        )
        return Final(None, "error", why)

    def _rejected(self, outcome: ToolOutcome) -> Decision:
        if self.on_reject == "continue":
            return Continue()
        why = (
            f"The user declined the tool call {outcome.call.name}, so the run stops "
            f"here: {outcome.error}. Explain what was not done."
        )
        return Final(None, "rejected", why)

    def _finalized(self, outcome: ToolOutcome) -> Decision:
        tool = self.registry.get(outcome.call.name)
        result = outcome.result
        if tool is None or not tool.effect.finalize or not isinstance(result, dict):
            return Continue()
        summary = result.get("summary")
        if isinstance(summary, str) and summary.strip():
            return Final(summary.strip(), "finished")
        return Continue()
