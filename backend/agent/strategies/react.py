"""`react`: the strict reason → act → observe loop (the default strategy).

Every step runs all three phases, in order:

- **reason** — a plain call: the reason prompt names the tools; the reply is
  prose plus `{"plan", "tools_to_consider", "finish", "final_answer"}`;
- **act** — a call with the tools and `request_input`, `tool_choice:
  "auto"`; the calls it returns run one per phase, read-only ones
  together (`tools`);
- **observe** — a plain call with this step's results; the reply is prose
  plus `{"observation", "should_continue", "final_answer"}`.
"""

from __future__ import annotations

from backend.agent.control import parse_control
from backend.agent.kit import LoopKit, tool_lines
from backend.agent.loop import AgentContext, Continue, Decision, Final
from backend.agent.phases import PhasedStrategy, act, observe
from backend.prompts import file_lines
from backend.protocol import AgentReason, ReasonControl


class ReasonActObserve(PhasedStrategy):
    name = "react"
    description = (
        "Strict reason → act → observe: every step plans, calls tools, then "
        "judges the results."
    )
    first = "turn"

    def __init__(self, kit: LoopKit) -> None:
        super().__init__(kit)
        self.phases = {
            "turn": self._turn,
            "reason": self._reason,
            "act": self._act,
            "tools": self._tools,
            "observe": self._observe,
        }

    async def _turn(self, ctx: AgentContext) -> Decision:
        return self.kit.next_turn(ctx, "reason")

    async def _reason(self, ctx: AgentContext) -> Decision:
        kit, state = self.kit, ctx.state
        listed = kit.tools.offered(ctx)
        prompt = kit.prompts.agent_reason_prompt(
            question=state.request.content,
            step=state.step,
            max_steps=state.max_steps,
            tools=tool_lines(listed),
            observations=state.observations,
            ask="tool" if state.request.agent else "none",
            files=file_lines(ctx.files),
        )
        request = kit.calls.request(ctx, "reason", prompt, listed=listed)
        reply = await kit.calls.complete(ctx, request)
        parsed = parse_control(reply.content, ReasonControl)
        ctx.emit(
            AgentReason(step=state.step, content=parsed.prose, control=parsed.control)
        )
        state.phase = "act"
        record = state.record
        if parsed.control is None:
            record.plan = parsed.prose or "Work out the next action."
            return kit.parse_failed(state)
        state.parse_failures = 0
        control = parsed.control
        record.plan = control.plan or parsed.prose
        record.tools_to_consider = list(control.tools_to_consider)
        if control.final_answer.strip():
            return Final(control.final_answer.strip(), "finished")
        if control.finish:
            return Final(None, "finished", "The reason phase decided it could finish.")
        return Continue()

    async def _act(self, ctx: AgentContext) -> Decision:
        return await act(self.kit, ctx, then="observe")

    async def _tools(self, ctx: AgentContext) -> Decision:
        return await self.kit.queue_or_observe(ctx, "observe")

    async def _observe(self, ctx: AgentContext) -> Decision:
        ctx.state.phase = "turn"
        decision, _ = await observe(self.kit, ctx, self.kit.tools.offered(ctx))
        return decision
