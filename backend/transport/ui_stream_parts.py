"""loopwire's frames as the AI SDK's UI message stream parts (chunks).

`Parts` follows one run, frame by frame, and says what each frame becomes
for `useChat`: the loop's steps as `start-step`/`finish-step`, the plan,
reason and observe phases and a model's `thinking` as `reasoning-*`
blocks, the answer as `text-*` (block ids: the run's id and the frame's
seq, the same in a replay), tool calls as `tool-input-*` and
`tool-output-*` (dynamic tools: the client need not declare loopwire's
tools), an approval as `tool-approval-request` (its `approvalId` is the
tool call's id), a question as `data-loopwire-question`, the rest of the
loop's news as `data-loopwire-update`, and the run's end as `finish`.

A stream answers one request: it ends at the run's end or where the run
waits for the user (`paused`), and the next request takes up the same run.
"""

from __future__ import annotations

from typing import Any

from backend.protocol import (
    AgentCompletion,
    AgentObserve,
    AgentPlan,
    AgentReason,
    AgentRequestInput,
    AgentStart,
    AgentTurnStart,
    ChatResponse,
    Envelope,
    Error,
    ResponseComplete,
    SourceRef,
    Thinking,
    TokenStream,
    ToolApprovalRequest,
    ToolComplete,
    ToolError,
    ToolStart,
)

Chunk = dict[str, Any]

FINISH_REASONS = {
    "finished": "stop",
    "max_steps": "length",
    "budget": "length",
    "error": "error",
}
"""`agent_completion.reason` → the `finish` part's `finishReason` (`other`
for the rest: stopped, rejected, timeout, interrupted)."""

ENVELOPE = frozenset({"seq", "session_id", "run_id", "ts", "type"})


class Parts:
    """What one run's frames become, in order, for one response."""

    def __init__(
        self,
        conversation_id: str,
        run_id: str,
        message_id: str | None = None,
        *,
        continued: bool = False,
    ) -> None:
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.message_id = message_id or run_id
        self.step_open = continued
        """A continued run resumes inside the step it paused in."""
        self.text_id: str | None = None
        self.answered = False
        self.completion: AgentCompletion | None = None
        self.paused: str | None = None
        """Set (to the `finishReason`) when the run waits for the user."""
        self.ended = False

    def start(self) -> list[Chunk]:
        """The response's first part: the assistant message is the run."""
        return [
            {
                "type": "start",
                "messageId": self.message_id,
                "messageMetadata": {
                    "conversationId": self.conversation_id,
                    "runId": self.run_id,
                },
            }
        ]

    def see(self, frame: Envelope) -> list[Chunk]:
        """The parts `frame` becomes (none for a frame of another run)."""
        if frame.run_id != self.run_id or self.ended:
            return []
        self.paused = None  # the run goes on: what it waited for came
        return self._translate(frame)

    def _translate(self, frame: Envelope) -> list[Chunk]:  # noqa: C901
        if isinstance(frame, AgentTurnStart):
            return [*self._end_step(), *self._open_step()]
        if isinstance(frame, TokenStream):
            return self._token(frame, frame.seq)
        if isinstance(frame, AgentPlan):
            return self._reasoning(frame.seq, _plan_text(frame))
        if isinstance(frame, AgentReason | AgentObserve | Thinking):
            return self._reasoning(frame.seq, frame.content)
        if isinstance(frame, ToolStart):
            return [*self._open_step(), *_tool_input(frame)]
        if isinstance(frame, ToolComplete):
            return [_tool_output(frame)]
        if isinstance(frame, ToolError):
            return [_tool_error(frame)]
        if isinstance(frame, ToolApprovalRequest):
            self.paused = "tool-calls"
            return _approval(frame)
        if isinstance(frame, AgentRequestInput):
            self.paused = "other"
            return [*self._open_step(), _question(frame)]
        if isinstance(frame, ChatResponse):
            return self._answer(frame, frame.seq)
        if isinstance(frame, AgentCompletion):
            self.completion = frame
            return []
        if isinstance(frame, Error):
            return [{"type": "error", "errorText": frame.message}]
        if isinstance(frame, ResponseComplete):
            reason = "stop"
            if self.completion is not None:
                reason = FINISH_REASONS.get(self.completion.reason, "other")
            return self._close(reason)
        if isinstance(frame, AgentStart):
            return [_update(frame)]
        return [*self._open_step(), _update(frame)]

    def pause(self) -> list[Chunk]:
        """The end of a response whose run now waits for the user."""
        assert self.paused is not None
        return self._close(self.paused)

    def _open_step(self) -> list[Chunk]:
        if self.step_open:
            return []
        self.step_open = True
        return [{"type": "start-step"}]

    def _end_step(self) -> list[Chunk]:
        chunks = self._end_text()
        if self.step_open:
            self.step_open = False
            chunks.append({"type": "finish-step"})
        return chunks

    def _end_text(self) -> list[Chunk]:
        if self.text_id is None:
            return []
        text_id, self.text_id = self.text_id, None
        return [{"type": "text-end", "id": text_id}]

    def _token(self, frame: TokenStream, seq: int) -> list[Chunk]:
        """A piece of the answer; an empty one only closes the text (after
        a `thinking` frame had closed it already: nothing)."""
        if not frame.token:
            return self._end_text() if frame.is_last else []
        chunks = self._open_step()
        if self.text_id is None:
            self.text_id = f"{self.run_id}-text-{seq}"
            chunks.append({"type": "text-start", "id": self.text_id})
        self.answered = True
        chunks.append({"type": "text-delta", "id": self.text_id, "delta": frame.token})
        if frame.is_last:
            chunks += self._end_text()
        return chunks

    def _reasoning(self, seq: int, content: str) -> list[Chunk]:
        """One phase's prose as a whole reasoning block (none if empty)."""
        if not content.strip():
            return []
        block = f"{self.run_id}-reasoning-{seq}"
        return [
            *self._open_step(),
            *self._end_text(),
            {"type": "reasoning-start", "id": block},
            {"type": "reasoning-delta", "id": block, "delta": content},
            {"type": "reasoning-end", "id": block},
        ]

    def _answer(self, frame: ChatResponse, seq: int) -> list[Chunk]:
        """The final message, as text unless it was streamed already; its
        sources as `source-document` parts."""
        chunks = [*self._open_step(), *self._end_text()]
        if frame.message and not self.answered:
            text_id = f"{self.run_id}-text-{seq}"
            chunks += [
                {"type": "text-start", "id": text_id},
                {"type": "text-delta", "id": text_id, "delta": frame.message},
                {"type": "text-end", "id": text_id},
            ]
        self.answered = True
        return chunks + [_source(ref) for ref in frame.sources]

    def _close(self, finish_reason: str) -> list[Chunk]:
        """The end of this response: the step, then `finish`."""
        self.ended = True
        finish: Chunk = {"type": "finish", "finishReason": finish_reason}
        if self.completion is not None:
            finish["messageMetadata"] = {
                "steps": self.completion.steps,
                "reason": self.completion.reason,
                "usage": self.completion.usage.model_dump(),
            }
        return [*self._end_step(), finish]


def _plan_text(frame: AgentPlan) -> str:
    numbered = "\n".join(f"{i}. {step}" for i, step in enumerate(frame.steps, 1))
    return "\n\n".join(part for part in (frame.content, numbered) if part.strip())


def _tool_input(frame: ToolStart) -> list[Chunk]:
    common = {"toolCallId": frame.tool_call_id, "toolName": frame.tool_name}
    return [
        {"type": "tool-input-start", **common, "dynamic": True},
        {
            "type": "tool-input-available",
            **common,
            "input": frame.arguments,
            "dynamic": True,
        },
    ]


def _tool_output(frame: ToolComplete) -> Chunk:
    return {
        "type": "tool-output-available",
        "toolCallId": frame.tool_call_id,
        "output": frame.result,
        "dynamic": True,
    }


def _tool_error(frame: ToolError) -> Chunk:
    """A declined call is `tool-output-denied`; any other failure an error."""
    if frame.status == "rejected":
        return {"type": "tool-output-denied", "toolCallId": frame.tool_call_id}
    return {
        "type": "tool-output-error",
        "toolCallId": frame.tool_call_id,
        "errorText": frame.error,
        "dynamic": True,
    }


def _approval(frame: ToolApprovalRequest) -> list[Chunk]:
    """The SDK's approval request, and what loopwire tells people about it."""
    return [
        {
            "type": "tool-approval-request",
            "approvalId": frame.tool_call_id,
            "toolCallId": frame.tool_call_id,
        },
        {
            "type": "data-loopwire-approval",
            "id": frame.tool_call_id,
            "data": {
                "toolCallId": frame.tool_call_id,
                "toolName": frame.tool_name,
                "description": frame.description,
                "step": frame.step,
                "inDoubt": frame.in_doubt,
                "untrustedSources": [s.model_dump() for s in frame.untrusted_sources],
            },
        },
    ]


def _question(frame: AgentRequestInput) -> Chunk:
    return {
        "type": "data-loopwire-question",
        "id": frame.question_id,
        "data": {
            "questionId": frame.question_id,
            "question": frame.question,
            "step": frame.step,
            "timeoutS": frame.timeout_s,
            "answerSchema": frame.answer_schema,
            "askedBy": frame.asked_by,
            "url": frame.url,
        },
    }


def _source(ref: SourceRef) -> Chunk:
    return {
        "type": "source-document",
        "sourceId": f"{ref.source}:{ref.path}#{ref.location}",
        "mediaType": "text/plain",
        "title": f"{ref.path} ({ref.location})" if ref.location else ref.path,
        "filename": ref.path,
    }


def _update(frame: Envelope) -> Chunk:
    """Any other news of the loop, its fields as the frame has them."""
    fields = frame.model_dump(mode="json", exclude=set(ENVELOPE))
    return {"type": "data-loopwire-update", "data": fields}
