"""Run-level rules for tool calls: what each outcome means for the loop.

The executor decides what happens to one call; these rules look across the
run: the same call is never run twice (canonical arguments), too many failures
in a row end the loop, a `finalize` tool's summary is the answer, and a
rejected approval stops the run or is passed on (`on_reject`).
"""

from __future__ import annotations

import json
from typing import Literal

from backend.agent.loop import Continue, Decision, Final
from backend.llm.base import ToolCall
from backend.tools.base import ToolRegistry
from backend.tools.executor import ToolOutcome, parse_arguments

OnReject = Literal["stop", "continue"]


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
        self.failures = 0
        self.duplicates = 0
        self._seen: dict[str, tuple[ToolOutcome, int]] = {}

    def earlier(self, call: ToolCall) -> tuple[ToolOutcome, int] | None:
        """The outcome and step of the same call made earlier in this run."""
        return self._seen.get(call_key(call))

    def record(self, call: ToolCall, outcome: ToolOutcome, step: int) -> None:
        self._seen[call_key(call)] = (outcome, step)

    def after_duplicate(self) -> Decision:
        self.duplicates += 1
        if self.duplicates < self.max_duplicate_calls:
            return Continue()
        why = "The same tool call was repeated; answer with the results you have."
        return Final(None, "finished", why)

    def judge(self, outcome: ToolOutcome) -> Decision:
        """What one tool outcome means for the loop."""
        if outcome.ok:
            self.failures = 0
            return self._finalized(outcome)
        if outcome.status == "rejected":
            return self._rejected(outcome)
        if outcome.status == "cancelled":
            return Continue()
        self.failures += 1
        if self.failures < self.max_consecutive_failures:
            return Continue()
        why = (
            f"{self.failures} tool calls in a row failed "
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
