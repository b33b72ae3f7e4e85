"""`RunDriver`: runs one strategy over one `RunState` to its end.

It is the only code that waits. Each turn of its loop either waits for the
user (a pending question or approval, racing the graceful stop and the
deadline) or runs one phase; after every phase it records the phase in the
trace, applies the decision to the state and checkpoints it. An immediate
stop cancels whatever the run has in flight (`RunControl.stop_now`); every
ending then goes through `_end`, which closes the calls the ending cut off
and keeps any text already streamed.

A run starts from a new state (phase `start`: `agent_start` is announced) or
continues from a checkpoint: a run that was waiting waits again without
asking twice, and a run whose ending was decided only finishes.

Each phase and each wait for a person is a span of the run's trace (`phase
reason`, `wait question`, …; `ctx.telemetry`), and each phase's time is
counted in the metrics.

Each phase runs within what is left of the run's time limit
(`agent/time_limit.py`); when it is spent, the phase in flight is cancelled,
nothing more is asked of the user, and the run ends `timeout` with a final
answer the model gets a bounded time to write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from backend.agent.budget_meter import BudgetMeter
from backend.agent.cutoffs import close_queue
from backend.agent.loop import (
    AgentContext,
    AgentLoop,
    AgentResult,
    AwaitApproval,
    AwaitInput,
    Continue,
    Decision,
    Final,
    Stopped,
)
from backend.agent.run_control import RunControl, Suspended
from backend.agent.run_spans import phase_span, run_span, told
from backend.agent.state import (
    ENDING,
    START,
    Ending,
    PendingQuestion,
    RunState,
    StopRequested,
    TimedOut,
    TraceEntry,
    WaitOutcome,
)
from backend.agent.summary import summarize_outcomes
from backend.agent.time_limit import DEFAULT_TIME_LIMIT, ActiveTime, TimeLimit
from backend.aio import race
from backend.errors import LLMError, RunSuspended
from backend.llm.base import Message
from backend.pauses import within
from backend.protocol import (
    AgentInterjection,
    AgentRequestInput,
    AgentRequestInputTimeout,
    AgentStart,
    ClientToolCall,
    TokenStream,
    ToolApprovalRequest,
)

log = logging.getLogger(__name__)

Checkpoint = Callable[[AgentContext], Awaitable[None]]
"""Saves the run (its state, with the history it goes with); called after
every phase and before every wait."""


class RunDriver:
    def __init__(
        self,
        loop: AgentLoop,
        ctx: AgentContext,
        control: RunControl,
        *,
        checkpoint: Checkpoint | None = None,
        time_limit: TimeLimit = DEFAULT_TIME_LIMIT,
        budget: BudgetMeter | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.perf_counter,
    ) -> None:
        """`time_limit` bounds the run's active time; `budget` meters its
        spending (default: its state's bounds, no prices); `clock` gives
        epoch time (deadlines of waits, timestamps); `monotonic` times the
        phases."""
        self.loop = loop
        self.ctx = ctx
        self.control = control
        self._checkpoint = checkpoint
        self._clock = clock
        self._time = ActiveTime(ctx.state, time_limit, monotonic, ctx.pauses)
        self.budget = budget or BudgetMeter(ctx.state)
        self._asking = asyncio.Lock()
        self._withheld = False
        """The pending question was not shown: a stop came before it."""
        ctx.ask_in_phase = self._ask_in_phase
        self._stoppable = True
        ctx.resumed = ctx.state.phase != START
        approval = ctx.state.pending_approval
        if ctx.resumed and approval is not None and ctx.state.resolution is None:
            control.expect_approval(approval.tool_call_id)  # answerable at once

    async def run(self) -> AgentResult:
        """Drive the run to its end; an immediate stop cuts it short."""
        with self.control.stop_now as stop:
            result = await self._drive()
        if not stop.interrupted:
            return result
        return self._end(Ending(answer=None, reason="stopped", stop_mode="immediate"))

    # ------------------------------------------------------------ the loop

    async def _drive(self) -> AgentResult:
        state = self.ctx.state
        if state.phase == START:
            if self.budget.unpriced():
                log.warning(
                    "run %s: model %r has no price in LOOPWIRE_PRICES, so its "
                    "cost budget cannot end it",
                    state.run_id,
                    state.model,
                )
            limits = self.budget.limits() if self.budget.bounded else None
            self.ctx.emit(
                AgentStart(
                    max_steps=state.max_steps, strategy=state.strategy, budget=limits
                )
            )
            state.phase = self.loop.first_phase(state)
        try:
            while state.phase != ENDING:
                decision = await self._next_decision()
                await self._apply(decision)
            return await self._finish()
        except LLMError as exc:
            return self._failed(str(exc))

    async def _next_decision(self) -> Decision:
        state, control = self.ctx.state, self.control
        if control.interjections and not state.queue and not state.waiting:
            self._interject()
        if state.waiting and self._time.spent:
            return self._out_of_time()  # asked as the time ran out: not shown
        if state.waiting:
            outcome = await self._wait()
            if isinstance(outcome, Suspended):
                raise RunSuspended(state.run_id)
            if isinstance(outcome, StopRequested):
                return Stopped("after_step")
            state.resolution = outcome
        elif control.stop_after_step and self._stoppable:
            return Stopped("after_step")
        elif control.suspend and self._stoppable:
            raise RunSuspended(state.run_id)
        return await self._phase()

    async def _phase(self) -> Decision:
        """The phase the state names, cut off when the run's time runs out."""
        state = self.ctx.state
        if self._time.spent:
            return self._out_of_time()
        spent = self.budget.check(self.ctx)
        if spent is not None:
            return spent
        phase, used, tools = state.phase, state.usage, len(state.outcomes)
        started, stop = self._clock(), self._time.start()
        with phase_span(self.ctx, phase, state.step):
            advance = self.loop.advance(self.ctx)
            won = await within(advance, self._time.remaining_s, self.ctx.pauses)
            elapsed_ms = stop()
        self.ctx.telemetry.metrics.phase_ended(phase, elapsed_ms / 1000)
        self.ctx.resumed = False
        state.trace.append(
            TraceEntry(
                step=state.step,
                phase=phase,
                started_at=started,
                duration_ms=round(elapsed_ms, 3),
                llm_calls=state.usage.llm_calls - used.llm_calls,
                tool_calls=len(state.outcomes) - tools,
                input_tokens=state.usage.prompt_tokens - used.prompt_tokens,
                output_tokens=state.usage.completion_tokens - used.completion_tokens,
                cached_tokens=state.usage.cached_tokens - used.cached_tokens,
            )
        )
        if won is None:
            return self._out_of_time()
        return won[0]

    def _out_of_time(self) -> Decision:
        """The time limit is reached: close what it cut off (the call in
        flight, the rest of the queue, a question not yet shown, a stream);
        the model then writes the final answer."""
        close_queue(self.ctx, stopped=False, timed_out=True, clock=self._clock)
        self._close_stream()
        return Final(None, "timeout", self._time.limit.why())

    async def _apply(self, decision: Decision) -> None:
        state = self.ctx.state
        self._stoppable = not isinstance(decision, Continue) or decision.stoppable
        match decision:
            case Continue():
                await self._save()
            case AwaitInput(question=question):
                state.pending_question = question
                with self.ctx.held():  # stored with the checkpoint, then shown
                    self._announce_question()
                    await self._save()
            case AwaitApproval(approval=approval):
                state.pending_approval = approval
                self.control.expect_approval(approval.tool_call_id)
                with self.ctx.held():
                    self._announce_approval()
                    await self._save()
            case Final(answer=answer, reason=reason, why=why):
                state.ending = Ending(answer=answer, reason=reason, why=why)
                state.phase = ENDING
                await self._save()
            case Stopped(mode=mode):
                state.ending = Ending(answer=None, reason="stopped", stop_mode=mode)
                state.phase = ENDING
                await self._save()

    def _interject(self) -> None:
        """The user's messages sent meanwhile, told to the model as theirs
        (at a boundary where no tool call of the step is open: a tool's
        result must follow its call)."""
        ctx, state = self.ctx, self.ctx.state
        taken, self.control.interjections = self.control.interjections, []
        for said in taken:
            if said.input_id in state.interjected:
                continue  # told before a restart
            ctx.history.append(Message.interjection(said.content))
            state.interjected.append(said.input_id)
            ctx.emit(
                AgentInterjection(
                    step=state.step, content=said.content, input_id=said.input_id
                )
            )

    def _announce_question(self) -> None:
        question = self.ctx.state.pending_question
        self._withheld = question is not None and self._ending_anyway()
        if question is None or self._withheld:
            return  # do not ask only to withdraw it
        if question.client_tool is not None:
            self.ctx.emit(
                ClientToolCall(
                    tool_call_id=question.question_id,
                    tool_name=question.client_tool,
                    arguments=question.arguments or {},
                    step=question.step,
                    timeout_s=question.timeout_s,
                )
            )
            return
        self.ctx.emit(
            AgentRequestInput(
                step=question.step,
                question=question.question,
                question_id=question.question_id,
                timeout_s=question.timeout_s,
                answer_schema=question.answer_schema,
                asked_by=question.asked_by,
                url=question.url,
            )
        )

    def _announce_approval(self) -> None:
        approval = self.ctx.state.pending_approval
        if approval is None or self._time.spent:
            return  # the run ends: it would be withdrawn at once
        self.ctx.emit(
            ToolApprovalRequest(
                tool_call_id=approval.tool_call_id,
                tool_name=approval.tool_name,
                arguments=approval.arguments,
                description=approval.description,
                step=approval.step,
                in_doubt=approval.in_doubt,
                untrusted_sources=list(approval.untrusted_sources),
                also=[
                    upcoming
                    for upcoming in approval.also
                    if upcoming.tool_call_id not in self.ctx.state.decided_ahead
                ],
            )
        )

    def _ending_anyway(self) -> bool:
        """A stop is on its way, or the time is up."""
        return self.control.stop_after_step or self._time.spent

    async def _wait(self) -> WaitOutcome | Suspended:
        state, control = self.ctx.state, self.control
        question, approval = state.pending_question, state.pending_approval
        if question is not None and self._withheld:
            return StopRequested()  # not asked: the stop came first
        if question is not None:
            kind = "client_tool" if question.client_tool else "question"
            with run_span(self.ctx, f"wait {kind}", step=state.step) as span:
                limit = question.deadline - self._clock()
                return told(span, await control.wait_for_answer(limit))
        assert approval is not None
        limit, began = approval.deadline - self._clock(), time.perf_counter()
        with run_span(
            self.ctx, "wait approval", step=state.step, tool=approval.tool_name
        ) as span:
            outcome = told(
                span, await control.wait_for_approval(approval.tool_call_id, limit)
            )
        self.ctx.waited_s[approval.tool_call_id] = time.perf_counter() - began
        return outcome

    async def _ask_in_phase(
        self, question: PendingQuestion, announce: bool
    ) -> WaitOutcome:
        """A question a tool asks mid-call (`AgentContext.ask_in_phase`):
        stored with a checkpoint, shown, and waited on with the run's clocks
        stopped. One at a time (calls running at once take turns)."""
        state, control = self.ctx.state, self.control
        async with self._asking:
            state.pending_question = question
            kind = "client_tool" if question.client_tool else "question"
            span = run_span(self.ctx, f"wait {kind}", step=question.step)
            with self.ctx.pauses.paused(), span as waiting:
                if announce:
                    with self.ctx.held():
                        self._announce_question()
                        await self._save()
                limit = question.deadline - self._clock()
                outcome = told(
                    waiting,
                    StopRequested()
                    if announce and self._withheld
                    else await control.wait_for_answer(limit),
                )
            if isinstance(outcome, Suspended):
                raise RunSuspended(state.run_id)  # parked with the question
            state.pending_question = None
            if isinstance(outcome, TimedOut):
                self.ctx.emit(
                    AgentRequestInputTimeout(
                        step=question.step, question_id=question.question_id
                    )
                )
            return outcome

    async def _save(self) -> None:
        if self._checkpoint is not None:
            await self._checkpoint(self.ctx)

    # ------------------------------------------------------------ endings

    def interrupted(self) -> AgentResult:
        """End a run whose process died mid-phase (its state is the last
        checkpoint): the call that was running may have run and is reported
        so, the rest were not run; nothing is run again."""
        close_queue(self.ctx, stopped=True, interrupted=True, clock=self._clock)
        return self._end(Ending(answer=None, reason="interrupted"))

    async def _finish(self) -> AgentResult:
        """The decided ending; the model writes the answer if there is none."""
        state = self.ctx.state
        ending = state.ending
        assert ending is not None
        close_queue(self.ctx, stopped=ending.reason == "stopped", clock=self._clock)
        if ending.answer is not None or ending.reason == "stopped":
            return self._end(ending)
        text = await self._final_answer(ending.why, ending.reason)
        answer = text or _without_answer(state, ending.reason)
        return self._end(ending.model_copy(update={"answer": answer}))

    async def _final_answer(self, why: str, reason: str) -> str:
        """The model's final answer, within what is left of the time limit
        (at least `TimeLimit.final_answer_s`); past it, what it had streamed.
        After a budget's bound, its output is held to the reserved allowance."""
        limit = self._time.final_answer_s
        if reason == "budget":
            self.ctx.final_tokens = self.budget.final_tokens
        won = await race(self.loop.final_answer(self.ctx, why), limit_s=limit)
        if won is None:
            log.warning(
                "run %s: no final answer within %gs; answering without it",
                self.ctx.state.run_id,
                limit,
            )
            return self._close_stream()
        text: str = won[1]
        return text

    def _failed(self, message: str) -> AgentResult:
        state = self.ctx.state
        self._close_stream()
        answer = (
            summarize_outcomes(state.outcomes, state.step) if state.outcomes else None
        )
        return self._end(Ending(answer=answer, reason="error", error=message))

    def _end(self, ending: Ending) -> AgentResult:
        """Every ending passes here: cut-off calls closed, streamed text kept."""
        state = self.ctx.state
        close_queue(self.ctx, stopped=ending.reason == "stopped", clock=self._clock)
        partial = self._close_stream()
        cut = ending.reason in ("stopped", "interrupted")
        if ending.answer is None and cut and partial:
            ending = ending.model_copy(update={"answer": partial})
        state.ending, state.phase = ending, ENDING
        return AgentResult(
            answer=ending.answer,
            reason=ending.reason,
            steps=state.step,
            usage=state.usage,
            stop_mode=ending.stop_mode,
            error=ending.error,
        )

    def _close_stream(self) -> str:
        """End a stream a stop or an error cut off; return the text it had."""
        state = self.ctx.state
        text = state.take_streamed()
        if text:
            self.ctx.emit(TokenStream(token="", is_first=False, is_last=True))
        return text.strip()


def _without_answer(state: RunState, reason: str) -> str:
    """What a run answers when the model wrote no final answer."""
    done = summarize_outcomes(state.outcomes, state.step)
    if reason != "budget":
        return done
    said = "The run's budget was used up and no answer could be written within it."
    return f"{said}\n\n{done}" if state.outcomes else said
