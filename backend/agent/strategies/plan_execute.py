"""`plan_execute`: plan first, then carry the plan out step by step.

One planning call makes a numbered plan (`agent_plan`, with the steps); then
each plan step runs act → observe, as in `react`. When an observation says
the plan no longer fits (`"replan": true`), a new plan is made from what was
learned (at most `max_replans` times); when every step is done, the model
writes the answer.
"""

from __future__ import annotations

from backend.agent.control import parse_control
from backend.agent.kit import LoopKit, tool_lines
from backend.agent.loop import AgentContext, Continue, Decision, Final
from backend.agent.phases import PhasedStrategy, act, observe
from backend.prompts import file_lines
from backend.protocol import AgentPlan, PlanControl

MAX_PLAN_STEPS = 12


class PlanAndExecute(PhasedStrategy):
    name = "plan_execute"
    description = (
        "Plan first, then carry out each step (act → observe), re-planning when needed."
    )
    first = "plan"

    def __init__(self, kit: LoopKit) -> None:
        super().__init__(kit)
        self.phases = {
            "plan": self._plan,
            "turn": self._turn,
            "act": self._act,
            "tools": self._tools,
            "observe": self._observe,
        }

    async def _plan(self, ctx: AgentContext) -> Decision:
        kit, state = self.kit, ctx.state
        listed = kit.tools.offered(ctx)
        prompt = kit.prompts.agent_plan_prompt(
            question=state.request.content,
            tools=tool_lines(listed),
            observations=state.observations,
            previous_plan=state.plan,
            revision=state.plan_revision + 1,
            can_ask_user=state.request.agent,
            files=file_lines(ctx.files),
        )
        reply = await kit.calls.complete(
            ctx, kit.calls.request(ctx, "plan", prompt, listed=listed)
        )
        parsed = parse_control(reply.content, PlanControl)
        control = parsed.control
        if control is not None and control.final_answer.strip():
            return Final(control.final_answer.strip(), "finished")
        steps = [s.strip() for s in (control.steps if control else []) if s.strip()]
        if not steps:
            return kit.parse_failed(state)
        state.parse_failures = 0
        state.plan, state.plan_index = steps[:MAX_PLAN_STEPS], 0
        state.plan_revision += 1
        ctx.emit(
            AgentPlan(
                step=state.step,
                steps=state.plan,
                revision=state.plan_revision,
                content=parsed.prose,
            )
        )
        state.phase = "turn"
        return Continue()

    async def _turn(self, ctx: AgentContext) -> Decision:
        state = ctx.state
        if state.plan_index >= len(state.plan):
            why = "Every step of the plan is done; answer from what it found."
            return Final(None, "finished", why)
        decision = self.kit.next_turn(ctx, "act")
        state.record.plan = state.plan[state.plan_index]
        return decision

    async def _act(self, ctx: AgentContext) -> Decision:
        return await act(self.kit, ctx, then="observe")

    async def _tools(self, ctx: AgentContext) -> Decision:
        return await self.kit.queue_or_observe(ctx, "observe")

    async def _observe(self, ctx: AgentContext) -> Decision:
        state = ctx.state
        listed = self.kit.tools.offered(ctx)
        decision, control = await observe(self.kit, ctx, listed, can_replan=True)
        replans_left = state.plan_revision <= self.kit.config.max_replans
        if control is not None and control.replan and replans_left:
            state.phase = "plan"
        else:
            if control is not None:  # an unusable reply retries the same plan step
                state.plan_index += 1
            state.phase = "turn"
        return decision
