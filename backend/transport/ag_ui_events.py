"""loopwire frames → AG-UI 1.0 events, for one AG-UI run (`transport/ag_ui.py`).

`AgUiRun` reads the frames of the loopwire run it follows, in order, and
answers the `ag_ui.core` events each one becomes (docs/integrations.md has
the table): a loop step is a `STEP_STARTED`/`STEP_FINISHED` pair, each
phase's prose (plan, reason, observe, a model's thinking) a reasoning span,
streamed answer text a text message, a tool call its start/args/end and
result, a question or an approval the interrupt that ends the AG-UI run,
and `response_complete` its `RUN_FINISHED` (or `RUN_ERROR`). What AG-UI has
no event for travels as a `CUSTOM` event named `loopwire.<kind>`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from pydantic import BaseModel

from backend.protocol import (
    AgentCompletion,
    AgentError,
    AgentObserve,
    AgentPlan,
    AgentReason,
    AgentRequestInput,
    AgentTurnStart,
    ChatResponse,
    ClientToolCall,
    Envelope,
    Error,
    ResponseComplete,
    Thinking,
    TokenStream,
    ToolApprovalRequest,
    ToolComplete,
    ToolError,
    ToolStart,
)

QUESTION = "question:"
APPROVAL = "approval:"
"""An interrupt's id: the kind of pause, then loopwire's id for it (the
question's `question_id`, the approval's `tool_call_id`)."""
APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "reason": {"type": "string"},
        "arguments": {"type": "object"},
        "remember": {"enum": ["conversation", "user"]},
    },
    "required": ["approved"],
}
LINK_SCHEMA = {
    "type": "object",
    "properties": {"action": {"enum": ["accept", "decline", "cancel"]}},
    "required": ["action"],
    "additionalProperties": False,
}
"""A question with a page to open (`url`): say it is done there, or not."""
ENVELOPE = frozenset(Envelope.model_fields)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _payload(frame: BaseModel) -> dict[str, Any]:
    """A frame's own fields (its envelope left out), as JSON values."""
    return frame.model_dump(mode="json", exclude=set(ENVELOPE))


def _response_schema(frame: AgentRequestInput) -> dict[str, Any]:
    """What a resume's payload answers the question with."""
    if frame.url is not None:
        return LINK_SCHEMA
    return frame.answer_schema or {"type": "string"}


class AgUiRun:
    """The AG-UI events of the AG-UI run `body` asks for, following
    loopwire run `loopwire_run` of the conversation `body.thread_id` (the
    client's spelling of it)."""

    def __init__(self, body: RunAgentInput, loopwire_run: str | None) -> None:
        self.thread_id = body.thread_id
        self.run_id = body.run_id
        self.loopwire_run = loopwire_run
        self._frontend = frozenset(tool.name for tool in body.tools or ())
        """The client's own tools: it has their results already."""
        self.ended = False
        self._step: int | None = None
        self._spans = 0
        self._text: str | None = None
        self._texts = 0
        self._said = False
        self._error: RunErrorEvent | None = None
        self._completion: AgentCompletion | None = None
        self._answer: ChatResponse | None = None
        self._ts = 0.0

    def started(self, conversation_id: str) -> BaseEvent:
        meta = {"conversation_id": conversation_id, "run_id": self.loopwire_run}
        return RunStartedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            protocol_version="1.0",
            metadata={"loopwire": meta},
        )

    def cut_off(self, message: str) -> list[BaseEvent]:
        """The run's stream ends early (the server is restarting)."""
        return self._close(
            RunErrorEvent(message=message, code="server_restarting"), error=True
        )

    def see(self, frame: Envelope) -> list[BaseEvent]:
        """The events `frame` becomes (none for another run's frames)."""
        if self.ended:
            return []
        if frame.run_id is None:
            return self._outside(frame)
        if frame.run_id != self.loopwire_run:
            return []
        self._ts = frame.ts
        events = self._step_of(frame)
        events += self._translate(frame)
        return events

    # ------------------------------------------------------------ steps

    def _step_of(self, frame: Envelope) -> list[BaseEvent]:
        """A step opened for a frame of a step not open (a turn's start, or
        the first frame of a resumed step)."""
        step = getattr(frame, "step", 0)
        if not step or step == self._step or isinstance(frame, AgentPlan):
            return []
        events = self._end_step()
        self._step = step
        events.append(StepStartedEvent(step_name=f"step {step}"))
        return events

    def _end_step(self) -> list[BaseEvent]:
        if self._step is None:
            return []
        name, self._step = f"step {self._step}", None
        return [StepFinishedEvent(step_name=name)]

    # ------------------------------------------------------------ frames

    def _translate(self, frame: Envelope) -> list[BaseEvent]:
        if isinstance(frame, AgentTurnStart):
            return []  # the step it opens is its event
        if isinstance(frame, (AgentReason, AgentObserve)):
            phase = "reason" if isinstance(frame, AgentReason) else "observe"
            control = None if frame.control is None else frame.control.model_dump()
            return self._reasoning(frame.content, phase, frame.step, control)
        if isinstance(frame, AgentPlan):
            text = "\n".join(f"{n}. {s}" for n, s in enumerate(frame.steps, 1))
            body = f"{frame.content}\n\n{text}".strip()
            return self._reasoning(body, "plan", frame.step, {"steps": frame.steps})
        if isinstance(frame, Thinking):
            return self._reasoning(frame.content, f"thinking.{frame.phase}", frame.step)
        if isinstance(frame, TokenStream):
            return self._token(frame)
        if isinstance(frame, (ToolStart, ToolComplete, ToolError, ClientToolCall)):
            return self._tool_frame(frame)
        if isinstance(frame, (AgentRequestInput, ToolApprovalRequest)):
            return self._interrupt(frame)
        if isinstance(frame, ChatResponse):
            self._answer = frame
            return self._whole_answer(frame.message)
        if isinstance(frame, AgentError):
            self._error = RunErrorEvent(message=frame.message, code="agent_error")
            return []
        if isinstance(frame, Error):
            self._error = RunErrorEvent(message=frame.message, code=frame.error_type)
            return []
        if isinstance(frame, AgentCompletion):
            self._completion = frame
            return [self._custom(frame)]
        if isinstance(frame, ResponseComplete):
            return self._finished()
        return [self._custom(frame)]

    def _outside(self, frame: Envelope) -> list[BaseEvent]:
        """A frame of the conversation outside any run (a file a tool made)."""
        if getattr(frame, "type", "") == "files_update":
            return [self._custom(frame)]
        return []

    def _custom(self, frame: Envelope) -> BaseEvent:
        kind = getattr(frame, "update_type", None) or getattr(frame, "type", "")
        return CustomEvent(name=f"loopwire.{kind}", value=_payload(frame))

    def _reasoning(
        self, text: str, phase: str, step: int, control: Any = None
    ) -> list[BaseEvent]:
        """One phase's prose as a reasoning span holding one message."""
        self._spans += 1
        span = f"{self.run_id}:reasoning:{self._spans}"
        meta: dict[str, Any] = {"phase": phase, "step": step}
        if control is not None:
            meta["control"] = control
        events: list[BaseEvent] = [
            ReasoningStartEvent(message_id=span, metadata={"loopwire": meta}),
            ReasoningMessageStartEvent(message_id=span),
        ]
        if text:
            events.append(ReasoningMessageContentEvent(message_id=span, delta=text))
        events += [
            ReasoningMessageEndEvent(message_id=span),
            ReasoningEndEvent(message_id=span),
        ]
        return events

    def _open_text(self) -> list[BaseEvent]:
        if self._text is not None:
            return []
        self._texts += 1
        self._text = f"{self.run_id}:text:{self._texts}"
        self._said = True
        return [TextMessageStartEvent(message_id=self._text, role="assistant")]

    def _close_text(self) -> list[BaseEvent]:
        if self._text is None:
            return []
        message, self._text = self._text, None
        return [TextMessageEndEvent(message_id=message)]

    def _token(self, frame: TokenStream) -> list[BaseEvent]:
        events = self._open_text()
        assert self._text is not None
        if frame.token:
            events.append(
                TextMessageContentEvent(message_id=self._text, delta=frame.token)
            )
        if frame.is_last:
            events += self._close_text()
        return events

    def _whole_answer(self, message: str) -> list[BaseEvent]:
        """The answer as one text message, unless this run streamed it."""
        if self._said or not message:
            return []
        events = self._open_text()
        assert self._text is not None
        events.append(TextMessageContentEvent(message_id=self._text, delta=message))
        return events + self._close_text()

    def _tool_frame(
        self, frame: ToolStart | ToolComplete | ToolError | ClientToolCall
    ) -> list[BaseEvent]:
        if isinstance(frame, ToolStart):
            return self._tool_call(frame)
        if isinstance(frame, ClientToolCall):
            return self._awaits_tool(frame)
        if frame.tool_name in self._frontend:
            return []  # the client sent this result
        return [self._tool_result(frame)]

    def _tool_call(self, frame: ToolStart) -> list[BaseEvent]:
        events = self._close_text()
        args = frame.arguments
        return [
            *events,
            ToolCallStartEvent(
                tool_call_id=frame.tool_call_id, tool_call_name=frame.tool_name
            ),
            ToolCallArgsEvent(
                tool_call_id=frame.tool_call_id,
                delta=args if isinstance(args, str) else _json(args),
            ),
            ToolCallEndEvent(tool_call_id=frame.tool_call_id),
        ]

    def _tool_result(self, frame: ToolComplete | ToolError) -> BaseEvent:
        if isinstance(frame, ToolComplete):
            content, meta = _json(frame.result), {"status": "ok"}
        else:
            content = f"Error ({frame.status}): {frame.error}"
            meta = {"status": frame.status, "error": frame.error}
        return ToolCallResultEvent(
            message_id=f"{self.run_id}:tool:{frame.tool_call_id}",
            tool_call_id=frame.tool_call_id,
            content=content,
            role="tool",
            metadata={"loopwire": {**meta, "duration_ms": frame.duration_ms}},
        )

    def _interrupt(
        self, frame: AgentRequestInput | ToolApprovalRequest
    ) -> list[BaseEvent]:
        """The run pauses: the AG-UI run ends with the interrupt outcome."""
        if isinstance(frame, AgentRequestInput):
            expires = datetime.fromtimestamp(self._ts + frame.timeout_s, UTC)
            interrupt = Interrupt(
                id=QUESTION + frame.question_id,
                reason="input_required",
                message=frame.question,
                response_schema=_response_schema(frame),
                expires_at=expires.isoformat().replace("+00:00", "Z"),
                metadata={"loopwire": _payload(frame)},
            )
        else:
            interrupt = Interrupt(
                id=APPROVAL + frame.tool_call_id,
                reason="tool_approval",
                message=frame.description,
                tool_call_id=frame.tool_call_id,
                response_schema=APPROVAL_SCHEMA,
                metadata={"loopwire": _payload(frame)},
            )
        outcome = RunFinishedInterruptOutcome(interrupts=[interrupt])
        return self._close(
            RunFinishedEvent(
                thread_id=self.thread_id, run_id=self.run_id, outcome=outcome
            )
        )

    def _awaits_tool(self, frame: ClientToolCall) -> list[BaseEvent]:
        """The run waits for a frontend tool's result: the AG-UI run ends
        (its call was streamed), and the input carrying the result goes on."""
        result = {"loopwire": {"awaiting_tool_result": _payload(frame)}}
        return self._close(
            RunFinishedEvent(
                thread_id=self.thread_id, run_id=self.run_id, result=result
            )
        )

    def _finished(self) -> list[BaseEvent]:
        if self._error is not None:
            return self._close(self._error, error=True)
        completion = self._completion
        event = RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id)
        if completion is not None:
            usage = completion.usage
            event.usage = [
                TokenUsage(
                    input_tokens=usage.prompt_tokens,
                    output_tokens=usage.completion_tokens,
                    total_tokens=usage.total_tokens,
                )
            ]
            if completion.reason == "stopped":
                event.outcome = RunFinishedCancelledOutcome()
            else:
                event.result = self._result(completion)
        return self._close(event)

    def _result(self, completion: AgentCompletion) -> dict[str, Any]:
        answer = self._answer
        return {
            "answer": None if answer is None else answer.message,
            "sources": [] if answer is None else _payload(answer)["sources"],
            "reason": completion.reason,
            "steps": completion.steps,
        }

    def _close(self, last: BaseEvent, *, error: bool = False) -> list[BaseEvent]:
        """Whatever is open closed, then `last`: the run's final event (a
        `RUN_ERROR` may come at any point, so nothing is closed before it)."""
        self.ended = True
        if error:
            return [last]
        return [*self._close_text(), *self._end_step(), last]
