"""`llm_only`: no tools.

With no steps (plain chat) it is one streamed reply. With steps (agent
mode) each step is reason → observe; the model asks the user a clarifying
question through its reason control block (`ask_user`), and the answer joins
the conversation as the user's next message.
"""

from __future__ import annotations

from backend.agent.control import parse_control
from backend.agent.kit import LoopKit
from backend.agent.loop import AgentContext, Continue, Decision, Final
from backend.agent.phases import PhasedStrategy, observe
from backend.agent.state import RunState
from backend.prompts import file_lines
from backend.protocol import AgentReason, ReasonControl

NO_TOOLS_NOTE = "This strategy has no tools; the reasoning above is this step's work."


class LLMOnly(PhasedStrategy):
    name = "llm_only"
    description = "No tools: the model answers, reasoning step by step in agent mode."
    uses_tools = False

    def __init__(self, kit: LoopKit) -> None:
        super().__init__(kit)
        self.phases = {
            "answer": self._answer,
            "turn": self._turn,
            "reason": self._reason,
            "answered": self._answered,
            "observe": self._observe,
        }

    def first_phase(self, state: RunState) -> str:
        return "answer" if state.max_steps == 0 else "turn"

    async def final_answer(self, ctx: AgentContext, why: str) -> str:
        return await self.kit.calls.final_answer(ctx, why)

    async def _answer(self, ctx: AgentContext) -> Decision:
        """Plain chat: one streamed reply is the answer."""
        reply = await self.kit.calls.stream(
            ctx, self.kit.calls.request(ctx, "chat", None)
        )
        text = reply.content.strip()
        return Final(text or None, "finished", "" if text else "The reply was empty.")

    async def _turn(self, ctx: AgentContext) -> Decision:
        return self.kit.next_turn(ctx, "reason")

    async def _reason(self, ctx: AgentContext) -> Decision:
        kit, state = self.kit, ctx.state
        prompt = kit.prompts.agent_reason_prompt(
            question=state.request.content,
            step=state.step,
            max_steps=state.max_steps,
            tools=[],
            observations=state.observations,
            ask="control",
            files=file_lines(ctx.files),
        )
        reply = await kit.calls.complete(ctx, kit.calls.request(ctx, "reason", prompt))
        parsed = parse_control(reply.content, ReasonControl)
        ctx.emit(
            AgentReason(step=state.step, content=parsed.prose, control=parsed.control)
        )
        record = state.record
        record.prose = parsed.prose
        record.act_note = NO_TOOLS_NOTE
        state.phase = "observe"
        if parsed.control is None:
            record.plan = parsed.prose or "Work out the answer."
            return kit.parse_failed(state)
        state.parse_failures = 0
        control = parsed.control
        record.plan = control.plan or parsed.prose
        if control.final_answer.strip():
            return Final(control.final_answer.strip(), "finished")
        if control.ask_user.strip():
            return kit.ask_user(ctx, control.ask_user.strip(), then="answered")
        if control.finish:
            return Final(None, "finished", "The reason phase decided it could finish.")
        return Continue()

    async def _answered(self, ctx: AgentContext) -> Decision:
        return self.kit.user_answered(ctx, then="observe")

    async def _observe(self, ctx: AgentContext) -> Decision:
        ctx.state.phase = "turn"
        decision, _ = await observe(self.kit, ctx, [])
        return decision
