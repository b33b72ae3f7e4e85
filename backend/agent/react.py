"""`ReasonActObserveLoop`: the default strategy, strict reason → act → observe.

Every step runs all three phases in order, each its own method returning a
`Decision`; `_drive` matches on it. Reason and observe are plain LLM calls
that end in a JSON control block; act is a call with the tools (plus the
`request_input` virtual tool) whose calls are executed in order. When the
loop ends without an answer, `_write_final_answer` makes one more call with
`tool_choice: "none"`, streamed, and falls back to a summary of the tool
results, so the user always gets an answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from backend.agent.control import parse_control
from backend.agent.loop import (
    AgentContext,
    AgentResult,
    Continue,
    Decision,
    Final,
    PendingQuestion,
    Stopped,
)
from backend.agent.rules import OnReject, ToolCallRules
from backend.agent.summary import summarize_outcomes
from backend.aio import race
from backend.errors import LLMError
from backend.events import (
    AgentFailed,
    AgentStarted,
    DuplicateCall,
    InputRequested,
    InputTimedOut,
    MaxStepsReached,
    Observed,
    Reasoned,
    StopMode,
    TokenStreamed,
    ToolFailed,
    TurnStarted,
)
from backend.llm.base import (
    Completion,
    LLMClient,
    LLMRequest,
    Message,
    Purpose,
    TextDelta,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from backend.prompts import PromptProvider, ResultLine, ToolLine
from backend.protocol import CompletionReason, ObserveControl, ReasonControl
from backend.tools.base import ToolContext, ToolRegistry
from backend.tools.executor import (
    CANCELLED_NOTE,
    CallScope,
    ToolExecutor,
    ToolOutcome,
    parse_arguments,
)
from backend.tools.results import to_json_text

C = TypeVar("C", bound=BaseModel)

REQUEST_INPUT = "request_input"
REQUEST_INPUT_SPEC = ToolSpec(
    name=REQUEST_INPUT,
    description=(
        "Pause and ask the user a clarifying question. Use it only when the "
        "request lacks information you need; the user's answer comes back as "
        "this tool's result."
    ),
    parameters={
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question to ask."}
        },
        "required": ["question"],
    },
)
NOT_RUN_NOTE = "Not run: the user stopped the run before this call."


@dataclass(frozen=True, slots=True)
class LoopConfig:
    tool_result_max_chars: int = 4000
    history_window_messages: int = 40
    max_parse_failures: int = 3
    request_input_timeout_s: float = 300.0
    max_consecutive_failures: int = 3
    max_duplicate_calls: int = 2
    on_reject: OnReject = "stop"


class ReasonActObserveLoop:
    name = "react"

    def __init__(
        self,
        llm: LLMClient,
        registry: ToolRegistry,
        executor: ToolExecutor,
        prompts: PromptProvider,
        config: LoopConfig = LoopConfig(),
    ) -> None:
        self.llm = llm
        self.registry = registry
        self.executor = executor
        self.prompts = prompts
        self.config = config

    async def run(self, ctx: AgentContext) -> AgentResult:
        return await _Run(self, ctx).drive()


@dataclass
class _StepRecord:
    plan: str = ""
    tools_to_consider: Sequence[str] = ()
    results: list[ResultLine] | None = None
    act_note: str = ""


class _Run:
    """One run of the loop: its phases and the state between them."""

    def __init__(self, loop: ReasonActObserveLoop, ctx: AgentContext) -> None:
        self.loop = loop
        self.ctx = ctx
        self.config = loop.config
        self.state = ctx.state
        self.parse_failures = 0
        self.rules = ToolCallRules(
            loop.registry,
            max_consecutive_failures=loop.config.max_consecutive_failures,
            max_duplicate_calls=loop.config.max_duplicate_calls,
            on_reject=loop.config.on_reject,
        )
        self.record = _StepRecord()

    # ------------------------------------------------------------ driver

    async def drive(self) -> AgentResult:
        control = self.ctx.control
        self.ctx.emit(AgentStarted(control.max_steps, self.loop.name))
        try:
            decision = await self._steps()
        except LLMError as exc:
            return self._failed(str(exc))
        match decision:
            case Final(answer=answer, reason=reason, why=why):
                return await self._finish(answer, reason, why)
            case Stopped(mode=mode):
                return self._result(None, "stopped", stop_mode=mode)
            case Continue():
                raise AssertionError("the step loop never ends on Continue")

    async def _steps(self) -> Decision:
        control = self.ctx.control
        while self.state.step < control.max_steps:
            self.state.step += 1
            self.record = _StepRecord()
            self.ctx.emit(TurnStarted(self.state.step, control.max_steps))
            for phase in (self._reason, self._act, self._observe):
                if control.stop_after_step.is_set():
                    return Stopped("after_step")
                decision = await phase()
                if not isinstance(decision, Continue):
                    return decision
        self.ctx.emit(MaxStepsReached(self.state.step))
        why = f"The step budget ({control.max_steps}) ran out before the loop finished."
        return Final(None, "max_steps", why)

    # ------------------------------------------------------------ reason

    async def _reason(self) -> Decision:
        ctx, step = self.ctx, self.state.step
        prompt = self.loop.prompts.agent_reason_prompt(
            question=ctx.question,
            step=step,
            max_steps=ctx.control.max_steps,
            tools=[ToolLine(s.name, s.description) for s in self._tool_specs()],
            observations=self.state.observations,
            can_ask_user=True,
        )
        reply = await self._call("reason", prompt)
        parsed = parse_control(reply.content, ReasonControl)
        ctx.emit(Reasoned(step, parsed.prose, parsed.control))
        if parsed.control is None:
            self.record.plan = parsed.prose or "Work out the next action."
            return self._parse_failed()
        self.parse_failures = 0
        control = parsed.control
        self.record.plan = control.plan or parsed.prose
        self.record.tools_to_consider = control.tools_to_consider
        if control.final_answer.strip():
            return Final(control.final_answer.strip(), "finished")
        if control.finish:
            return Final(None, "finished", "The reason phase decided it could finish.")
        return Continue()

    # ------------------------------------------------------------ act

    async def _act(self) -> Decision:
        ctx, step = self.ctx, self.state.step
        prompt = self.loop.prompts.agent_act_prompt(
            step=step,
            max_steps=ctx.control.max_steps,
            plan=self.record.plan,
            tools_to_consider=self.record.tools_to_consider,
        )
        specs = [*self._tool_specs(), REQUEST_INPUT_SPEC]
        reply = await self._call("act", prompt, tools=specs, tool_choice="auto")
        self.record.results = []
        if not reply.tool_calls:
            self.record.act_note = reply.content.strip() or "No action."
            return Continue()
        ctx.history.append(Message.assistant(reply.content or None, reply.tool_calls))
        return await self._run_calls(reply.tool_calls)

    async def _run_calls(self, calls: Sequence[ToolCall]) -> Decision:
        for index, call in enumerate(calls):
            if call.name == REQUEST_INPUT:
                decision = await self._ask_user(call)
            else:
                decision = await self._run_tool(call)
            stop_pending = self.ctx.control.stop_after_step.is_set()
            if isinstance(decision, Continue) and stop_pending:
                decision = Stopped("after_step")
            if not isinstance(decision, Continue):
                self._skip(calls[index + 1 :])
                return decision
        return Continue()

    async def _run_tool(self, call: ToolCall) -> Decision:
        earlier = self.rules.earlier(call)
        if earlier is not None:
            return self._duplicate(call, *earlier)
        ctx = self.ctx
        scope = CallScope(
            ctx=ToolContext(ctx.session_id, ctx.run_id, self.state.step),
            emit=ctx.emit,
            allowed=[spec.name for spec in self._tool_specs()],
            read_only=ctx.read_only,
            approver=ctx.control,
        )
        outcome = await self.loop.executor.run(call, scope)
        self.rules.record(call, outcome, self.state.step)
        self.state.outcomes.append(outcome)
        content = outcome.for_model(self.config.tool_result_max_chars)
        if outcome.status == "rejected" and self.config.on_reject == "continue":
            content += "\nDo not call it again; continue without it."
        ctx.history.append(Message.tool(call.id, call.name, content))
        for note in outcome.notes:
            ctx.history.append(Message.system(note))
        status = "ok" if outcome.ok else f"error: {outcome.status}"
        arguments = to_json_text(outcome.arguments)
        self._add_result(ResultLine(call.name, status, arguments, content))
        return self.rules.judge(outcome)

    def _duplicate(self, call: ToolCall, earlier: ToolOutcome, step: int) -> Decision:
        """Never run the same call twice in a run: tell the model instead."""
        self.ctx.emit(DuplicateCall(self.state.step, call.name))
        content = (
            f"Duplicate call: {call.name} was already called with the same arguments "
            f"in step {step}, so it was not run again. Use that result:\n"
            f"{earlier.for_model(self.config.tool_result_max_chars)}"
        )
        self.ctx.history.append(Message.tool(call.id, call.name, content))
        arguments = to_json_text(parse_arguments(call.arguments))
        self._add_result(ResultLine(call.name, "duplicate", arguments, content))
        return self.rules.after_duplicate()

    def _skip(self, calls: Sequence[ToolCall]) -> None:
        """Report calls cut off by a stop or an early end, and close them."""
        for call in calls:
            self.ctx.emit(
                ToolFailed(
                    call.id, call.name, NOT_RUN_NOTE, "cancelled", 0.0, self.state.step
                )
            )
            self.ctx.history.append(Message.tool(call.id, call.name, NOT_RUN_NOTE))

    # ------------------------------------------------------------ request_input

    async def _ask_user(self, call: ToolCall) -> Decision:
        ctx, step, control = self.ctx, self.state.step, self.ctx.control
        question = _question_of(call)
        question_id = call.id or uuid.uuid4().hex
        timeout = self.config.request_input_timeout_s
        control.pending_question = PendingQuestion(question_id, question, step)
        ctx.emit(InputRequested(step, question, question_id, timeout))
        try:
            won = await race(
                control.answers.get(), control.stop_after_step.wait(), limit_s=timeout
            )
        finally:
            control.pending_question = None
        if won is None:
            return self._input_timed_out(call, question_id)
        if won[0] == 1:
            ctx.history.append(Message.tool(call.id, REQUEST_INPUT, CANCELLED_NOTE))
            return Stopped("after_step")
        answer = won[1].content
        ctx.history.append(Message.tool(call.id, REQUEST_INPUT, answer))
        self._add_result(ResultLine(REQUEST_INPUT, "answered", question, answer))
        return Continue()

    def _input_timed_out(self, call: ToolCall, question_id: str) -> Decision:
        timeout = self.config.request_input_timeout_s
        self.ctx.emit(InputTimedOut(self.state.step, question_id))
        note = f"No answer: the user did not reply within {timeout:g} seconds."
        self.ctx.history.append(Message.tool(call.id, REQUEST_INPUT, note))
        why = (
            f"You asked the user: {_question_of(call)!r}, but no answer came within "
            f"{timeout:g} seconds. Say so, and answer as far as possible without it."
        )
        return Final(None, "timeout", why)

    # ------------------------------------------------------------ observe

    async def _observe(self) -> Decision:
        ctx, step = self.ctx, self.state.step
        prompt = self.loop.prompts.agent_observe_prompt(
            question=ctx.question,
            step=step,
            max_steps=ctx.control.max_steps,
            plan=self.record.plan,
            results=self.record.results or [],
            act_note=self.record.act_note,
        )
        reply = await self._call("observe", prompt)
        parsed = parse_control(reply.content, ObserveControl)
        ctx.emit(Observed(step, parsed.prose, parsed.control))
        if parsed.control is None:
            self.state.observations.append(_first_line(parsed.prose))
            return self._parse_failed()
        self.parse_failures = 0
        control = parsed.control
        self.state.observations.append(control.observation or _first_line(parsed.prose))
        if control.final_answer.strip():
            return Final(control.final_answer.strip(), "finished")
        if not control.should_continue:
            return Final(
                None, "finished", "The observe phase decided the work is done."
            )
        return Continue()

    # ------------------------------------------------------------ ending

    def _parse_failed(self) -> Decision:
        self.parse_failures += 1
        if self.parse_failures < self.config.max_parse_failures:
            return Continue()
        why = (
            f"The last {self.parse_failures} replies had no usable control block, "
            "so the loop ended early."
        )
        return Final(None, "error", why)

    async def _finish(
        self, answer: str | None, reason: CompletionReason, why: str
    ) -> AgentResult:
        try:
            text = answer or await self._write_final_answer(why)
        except LLMError as exc:
            return self._failed(str(exc))
        return self._result(text, reason)

    async def _write_final_answer(self, why: str) -> str:
        """One more call, tools off, streamed; else a summary of the results."""
        prompt = self.loop.prompts.final_answer_prompt(
            question=self.ctx.question, why=why, observations=self.state.observations
        )
        specs = self._tool_specs()
        request = self._request("final", prompt, specs, "none" if specs else None)
        text = await self._stream(request)
        return text.strip() or summarize_outcomes(self.state.outcomes, self.state.step)

    async def _stream(self, request: LLMRequest) -> str:
        emit, parts = self.ctx.emit, list[str]()
        async for event in self.loop.llm.stream(request):
            if isinstance(event, TextDelta):
                if event.text:
                    emit(TokenStreamed(event.text, is_first=not parts, is_last=False))
                    parts.append(event.text)
            else:
                self.state.usage += event.usage
        if parts:
            emit(TokenStreamed("", is_first=False, is_last=True))
        return "".join(parts)

    def _failed(self, message: str) -> AgentResult:
        self.ctx.emit(AgentFailed(message))
        summary = summarize_outcomes(self.state.outcomes, self.state.step)
        return self._result(summary if self.state.outcomes else None, "error")

    def _result(
        self,
        answer: str | None,
        reason: CompletionReason,
        stop_mode: StopMode | None = None,
    ) -> AgentResult:
        return AgentResult(answer, reason, self.state.step, self.state.usage, stop_mode)

    # ------------------------------------------------------------ plumbing

    def _tool_specs(self) -> list[ToolSpec]:
        tools = self.loop.registry.available(
            self.ctx.selected_tools, read_only=self.ctx.read_only
        )
        return [tool.spec() for tool in tools]

    def _add_result(self, line: ResultLine) -> None:
        if self.record.results is None:
            self.record.results = []
        self.record.results.append(line)

    def _request(
        self,
        purpose: Purpose,
        prompt: str,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMRequest:
        ctx = self.ctx
        system = self.loop.prompts.system_prompt(
            tools=[ToolLine(s.name, s.description) for s in self._tool_specs()]
        )
        window = ctx.history.window(self.config.history_window_messages)
        messages = (Message.system(system), *window, Message.system(prompt))
        return LLMRequest(
            messages=messages,
            tools=tuple(tools),
            tool_choice=tool_choice,
            model=ctx.model,
            temperature=ctx.temperature,
            purpose=purpose,
        )

    async def _call(
        self,
        purpose: Purpose,
        prompt: str,
        *,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice | None = None,
    ) -> Completion:
        reply = await self.loop.llm.complete(
            self._request(purpose, prompt, tools, tool_choice)
        )
        self.state.usage += reply.usage
        return reply


def _question_of(call: ToolCall) -> str:
    arguments = parse_arguments(call.arguments)
    if isinstance(arguments, dict) and str(arguments.get("question", "")).strip():
        return str(arguments["question"]).strip()
    return "Could you tell me more about what you need?"


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no observation)"
    return line[:300]
