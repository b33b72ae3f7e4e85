"""`LoopKit`: the parts every strategy is built from, and the phases they share.

`app.py` builds one kit (model calls, tool calls, prompts, settings) and
hands it to each strategy; a new strategy needs nothing else. Its model
calls go through `RetryCutOff`: a reply cut off at its length limit in the
middle of a control block or a tool call (`control.cut_off`) is asked for
once more, shorter, and cut off again ends the run saying so.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from backend.agent.config import LoopConfig
from backend.agent.control import cut_off
from backend.agent.loop import AgentContext, AwaitInput, Continue, Decision, Final
from backend.agent.model_calls import ModelCalls
from backend.agent.state import Answered, PendingQuestion, RunState, StepRecord
from backend.agent.tool_calls import ToolCalls
from backend.llm.base import LLMClient, Message, ToolSpec
from backend.llm.replies.cutoff import RetryCutOff
from backend.prompts import PromptProvider, ResultLine, ToolLine
from backend.protocol import (
    AgentMaxStepsReached,
    AgentRequestInputTimeout,
    AgentTurnStart,
)
from backend.tools.base import ToolRegistry
from backend.tools.executor import ToolExecutor


@dataclass(frozen=True, slots=True)
class LoopKit:
    calls: ModelCalls
    tools: ToolCalls
    prompts: PromptProvider
    config: LoopConfig

    @classmethod
    def build(
        cls,
        llm: LLMClient,
        registry: ToolRegistry,
        executor: ToolExecutor,
        prompts: PromptProvider,
        config: LoopConfig | None = None,
    ) -> LoopKit:
        config = config or LoopConfig()
        return cls(
            ModelCalls(RetryCutOff(llm, cut_off), prompts, config),
            ToolCalls(registry, executor, config, model=llm.model),
            prompts,
            config,
        )

    def next_turn(self, ctx: AgentContext, phase: str) -> Decision:
        """Start the next step in `phase`, or end the run if the budget is spent.

        The budget is read here, every step, so `grant_steps` reaches a
        running loop.
        """
        state = ctx.state
        if state.step >= state.max_steps:
            ctx.emit(AgentMaxStepsReached(steps=state.step))
            why = (
                f"The step budget ({state.max_steps}) ran out before the loop finished."
            )
            return Final(None, "max_steps", why)
        state.step += 1
        state.record = StepRecord()
        ctx.emit(AgentTurnStart(step=state.step, max_steps=state.max_steps))
        state.phase = phase
        return Continue()

    def parse_failed(self, state: RunState) -> Decision:
        """A reply without a usable control block: go on, or end after too many.

        A model that just answers, without the block, is not cut short at
        once: its words stand as the step's plan or observation, and the act
        phase may still run the tools they name. After `max_parse_failures`
        such replies in a row the run ends (reason `error`), and the model
        writes the final answer from what the run found, told why.
        """
        state.parse_failures += 1
        if state.parse_failures < self.config.max_parse_failures:
            return Continue()
        why = (
            f"The last {state.parse_failures} replies had no usable control block "
            "(the JSON block each step must end with), so the loop ended early. "
            "Answer from what the conversation shows."
        )
        return Final(None, "error", why)

    def ask_user(self, ctx: AgentContext, question: str, *, then: str) -> Decision:
        """Ask in words, not through a tool (strategies without tools): the
        question joins the conversation, and `then` names the phase that
        takes the answer (`user_answered`)."""
        state = ctx.state
        ctx.history.append(Message.assistant(question))
        state.phase = then
        timeout = self.config.request_input_timeout_s
        return AwaitInput(
            PendingQuestion(
                question_id=uuid.uuid4().hex,
                question=question,
                step=state.step,
                timeout_s=timeout,
                deadline=time.time() + timeout,
            )
        )

    def user_answered(self, ctx: AgentContext, *, then: str) -> Decision:
        """The phase after `ask_user`: the answer joins the conversation as the
        user's next message and the run goes on in `then`; no answer in time
        ends the run with a final answer that says so."""
        state = ctx.state
        resolution, pending = state.take_resolution(), state.pending_question
        state.pending_question = None
        assert pending is not None, "user_answered runs only after ask_user"
        if not isinstance(resolution, Answered):
            ctx.emit(
                AgentRequestInputTimeout(
                    step=state.step, question_id=pending.question_id
                )
            )
            why = (
                f"You asked the user: {pending.question!r}, but no answer came within "
                f"{pending.timeout_s:g} seconds. Say so, and answer as far as possible "
                "without it."
            )
            return Final(None, "timeout", why)
        ctx.history.append(Message.user(resolution.said()))
        state.record.results.append(
            ResultLine(
                name="ask_user",
                status="answered" if resolution.action == "accept" else "declined",
                arguments=pending.question,
                content=resolution.said(),
            )
        )
        state.phase = then
        return Continue()

    async def queue_or_observe(self, ctx: AgentContext, after: str) -> Decision:
        """The tool-call phase: settle the next queued call, or move to `after`."""
        if not ctx.state.queue:
            ctx.state.phase = after
            return Continue()
        return await self.tools.next(ctx)


def tool_lines(specs: list[ToolSpec]) -> list[ToolLine]:
    return [ToolLine(spec.name, spec.description) for spec in specs]
