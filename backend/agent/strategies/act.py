"""`act`: the model calls tools until it answers in text (tool mode).

Each step is one call with the tools (`tool_choice: "auto"`), streamed; the
tool calls it returns run one per phase (read-only ones together), and the
next step shows the model their results. A reply without tool calls is the
answer. In agent runs the model may also call `request_input`.
"""

from __future__ import annotations

from backend.agent.kit import LoopKit
from backend.agent.loop import AgentContext, Continue, Decision, Final
from backend.agent.phases import PhasedStrategy


class ActUntilAnswer(PhasedStrategy):
    name = "act"
    description = "Tool use: the model calls tools until it can answer."
    first = "turn"

    def __init__(self, kit: LoopKit) -> None:
        super().__init__(kit)
        self.phases = {"turn": self._turn, "call": self._call, "tools": self._tools}

    async def _turn(self, ctx: AgentContext) -> Decision:
        return self.kit.next_turn(ctx, "call")

    async def _call(self, ctx: AgentContext) -> Decision:
        kit = self.kit
        specs = kit.tools.with_request_input(ctx)
        request = kit.calls.request(
            ctx,
            "chat",
            None,
            listed=kit.tools.offered(ctx),
            tools=specs,
            tool_choice="auto" if specs else None,
        )
        reply = await kit.calls.stream(ctx, request)
        if kit.tools.take(ctx, reply):
            ctx.state.phase = "tools"
            return Continue()
        text = reply.content.strip()
        return Final(text or None, "finished", "" if text else "The reply was empty.")

    async def _tools(self, ctx: AgentContext) -> Decision:
        return await self.kit.queue_or_observe(ctx, "turn")
