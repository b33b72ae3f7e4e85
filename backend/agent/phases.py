"""What strategies share: `PhasedStrategy` (dispatch on `state.phase`), and
the act and observe phases."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from backend.agent.control import parse_control
from backend.agent.kit import LoopKit
from backend.agent.loop import AgentContext, Continue, Decision, Final
from backend.agent.state import RunState
from backend.llm.base import ToolSpec
from backend.protocol import AgentObserve, ObserveControl

Phase = Callable[[AgentContext], Awaitable[Decision]]


class PhasedStrategy:
    """A base for strategies (`AgentLoop`s): `advance` runs the phase the
    state names from `self.phases`; the final answer may name the run's tools.

    Subclasses set `name`, `description`, `first` (the first phase) and fill
    `self.phases` with their phase methods.
    """

    name: str
    description: str
    first: str
    uses_tools = True
    loop = True

    def __init__(self, kit: LoopKit) -> None:
        self.kit = kit
        self.phases: dict[str, Phase] = {}

    def first_phase(self, state: RunState) -> str:
        return self.first

    async def advance(self, ctx: AgentContext) -> Decision:
        """Run the phase the state names (a state from elsewhere may name none)."""
        state = ctx.state
        phase = self.phases.get(state.phase)
        if phase is None:
            known = ", ".join(self.phases)
            raise ValueError(
                f"strategy {state.strategy!r} has no phase {state.phase!r} "
                f"(it has: {known})"
            )
        return await phase(ctx)

    async def final_answer(self, ctx: AgentContext, why: str) -> str:
        return await self.kit.calls.final_answer(ctx, why, self.kit.tools.offered(ctx))


async def act(kit: LoopKit, ctx: AgentContext, *, then: str) -> Decision:
    """The act phase: one call with the tools (and `request_input`), carrying
    out `state.record.plan`; its tool calls are queued (next phase `tools`),
    else the reply is noted and the run moves to `then`."""
    state = ctx.state
    prompt = kit.prompts.agent_act_prompt(
        step=state.step,
        max_steps=state.max_steps,
        plan=state.record.plan,
        tools_to_consider=state.record.tools_to_consider,
    )
    request = kit.calls.request(
        ctx,
        "act",
        prompt,
        listed=kit.tools.offered(ctx),
        tools=kit.tools.with_request_input(ctx),
        tool_choice="auto",
    )
    reply = await kit.calls.complete(ctx, request)
    if kit.tools.take(ctx, reply):
        state.phase = "tools"
    else:
        state.record.act_note = reply.content.strip() or "No action."
        state.phase = then
    return Continue()


async def observe(
    kit: LoopKit,
    ctx: AgentContext,
    listed: Sequence[ToolSpec],
    *,
    can_replan: bool = False,
) -> tuple[Decision, ObserveControl | None]:
    """The observe phase: judge this step's results; go on, or end the run.

    Returns the decision and the parsed control block (None if unusable); the
    caller sets the next phase.
    """
    state = ctx.state
    record = state.record
    prompt = kit.prompts.agent_observe_prompt(
        question=state.request.content,
        step=state.step,
        max_steps=state.max_steps,
        plan=record.plan,
        results=record.results,
        act_note=record.act_note,
        can_replan=can_replan,
    )
    request = kit.calls.request(ctx, "observe", prompt, listed=listed)
    reply = await kit.calls.complete(ctx, request)
    parsed = parse_control(reply.content, ObserveControl)
    ctx.emit(
        AgentObserve(step=state.step, content=parsed.prose, control=parsed.control)
    )
    control = parsed.control
    if control is None:
        state.observations.append(first_line(parsed.prose))
        return kit.parse_failed(state), None
    state.parse_failures = 0
    state.observations.append(control.observation or first_line(parsed.prose))
    if control.final_answer.strip():
        return Final(control.final_answer.strip(), "finished"), control
    if not control.should_continue:
        why = "The observe phase decided the work is done."
        return Final(None, "finished", why), control
    return Continue(), control


def first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no observation)"
    return line[:300]
