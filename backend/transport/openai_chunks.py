"""A loopwire run told as an OpenAI chat completion (`transport/openai_api.py`).

`Reply` reads the frames of one run as they go by and says what each adds
to the reply: `reasoning_content` (the loop's phases: plan, reason and
observe prose, a reasoning model's thinking, tool calls and their results
as short lines) or `content` (the answer), and when the reply ends — at the
run's end, or at a pause (a question, or with a conversation id an approval)
that the client's next message answers. Then `completion` and `chunk` make
OpenAI's `chat.completion` and `chat.completion.chunk` objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from backend.protocol import (
    AgentCompletion,
    AgentDuplicateCall,
    AgentError,
    AgentMaxStepsReached,
    AgentObserve,
    AgentPlan,
    AgentReason,
    AgentRequestInput,
    AgentStopped,
    ChatResponse,
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
from backend.text import shorten
from backend.transport.openai_requests import DECLINE, DISMISS

ARGUMENTS_CHARS = 200
RESULT_CHARS = 300
"""Tool arguments and results are shown in `reasoning_content` cut to these."""
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")
REFUSE_HINT = f"Reply {DECLINE} to decline, or {DISMISS} to dismiss the question."


@dataclass
class Delta:
    """What one frame adds to the reply."""

    reasoning: str = ""
    content: str = ""

    def __bool__(self) -> bool:
        return bool(self.reasoning or self.content)


def _compact(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return shorten(text, limit)


def question_text(frame: AgentRequestInput) -> str:
    """The question, and what its answer must be when it has a form: a
    chat client shows text only (the answer is checked all the same). A
    tool's question names who asks, the page to open, and how to refuse."""
    text = f"{frame.question}{_form_hint(frame.answer_schema or {})}"
    if frame.asked_by is None:
        return text
    text = f"{frame.asked_by[:1].upper()}{frame.asked_by[1:]} asks: {text}"
    if frame.url is not None:
        text += f"\nOpen {frame.url}, then reply done."
    return f"{text}\n{REFUSE_HINT}"


def _form_hint(schema: dict[str, Any]) -> str:
    if isinstance(schema.get("enum"), list):
        return f" (one of: {_choices(schema)})"
    if schema.get("type") == "boolean":
        return " (true or false)"
    fields = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(fields, dict):
        return ""
    needed = schema.get("required") or []
    named = "; ".join(
        _field_hint(name, spec) + ("" if name in needed else " (optional)")
        for name, spec in fields.items()
    )
    return f"\nReply with a JSON object: {named}."


def _field_hint(name: str, spec: Any) -> str:
    spec = spec if isinstance(spec, dict) else {}
    if isinstance(spec.get("enum"), list):
        what = f"one of {_choices(spec)}"
    elif spec.get("type") in ("integer", "number"):
        low, high = spec.get("minimum", "…"), spec.get("maximum", "…")
        kind = "an integer" if spec["type"] == "integer" else "a number"
        what = f"{kind} from {low} to {high}"
    else:
        what = {"boolean": "true or false"}.get(spec.get("type"), "text")
    return f"{name}: {what}"


def _choices(schema: dict[str, Any]) -> str:
    return ", ".join(str(choice) for choice in schema["enum"])


def approval_text(frame: ToolApprovalRequest) -> str:
    """The reply that ends at an approval: what waits, and how to answer."""
    arguments = _compact(frame.arguments, ARGUMENTS_CHARS)
    return (
        f"Approval needed: the agent wants to run {frame.tool_name}({arguments})"
        f" — {frame.description}\nReply yes to run it, or no to decline."
    )


def _prose(text: str) -> str:
    text = text.strip()
    return f"{text}\n\n" if text else ""


def _reasoning(frame: Envelope) -> str:
    """The `reasoning_content` a frame adds ("" for none)."""
    match frame:
        case AgentReason() | AgentObserve() | Thinking():
            return _prose(frame.content)
        case AgentPlan():
            lines = "".join(f"{n}. {s}\n" for n, s in enumerate(frame.steps, 1))
            return f"Plan:\n{lines}\n"
        case ToolStart():
            return (
                f"→ {frame.tool_name}({_compact(frame.arguments, ARGUMENTS_CHARS)})\n"
            )
        case ToolComplete():
            return f"← {frame.tool_name}: {_compact(frame.result, RESULT_CHARS)}\n\n"
        case ToolError():
            return f"✗ {frame.tool_name} ({frame.status}): {frame.error}\n\n"
        case AgentDuplicateCall():
            return f"(a repeated call of {frame.tool_name}: its earlier result)\n\n"
        case AgentMaxStepsReached():
            return f"The step budget is spent ({frame.steps} steps).\n\n"
        case AgentStopped():
            return "Stopped.\n\n"
        case AgentError():
            return f"The model failed: {frame.message}\n\n"
        case Error():
            return f"Error ({frame.error_type}): {frame.message}\n\n"
    return ""


@dataclass
class Reply:
    """One reply: the frames of run `run_id` until it ends or pauses.

    `stateless`: the client sent no conversation id, so it cannot answer an
    approval; `decline` names the call the caller must decline now."""

    run_id: str | None
    stateless: bool
    reasoning: list[str] = field(default_factory=list)
    streamed: str = ""
    answer: str | None = None
    pause: str | None = None
    """The question or the approval the reply ended at (its content)."""
    question: bool = False
    usage: dict[str, int] | None = None
    finish_reason: str = "stop"
    over: bool = False
    decline: str | None = None

    def see(self, frame: Envelope) -> Delta:
        """What `frame` adds to the reply (nothing for another run's)."""
        self.decline = None
        if self.over or self.run_id is None or frame.run_id != self.run_id:
            return Delta()
        delta = Delta(reasoning=_reasoning(frame), content=self._content(frame))
        if delta.reasoning:
            self.reasoning.append(delta.reasoning)
        return delta

    def _content(self, frame: Envelope) -> str:
        match frame:
            case TokenStream():
                self.streamed += frame.token
                return frame.token
            case ChatResponse():
                self.answer = frame.message
                if frame.message.startswith(self.streamed):
                    rest = frame.message[len(self.streamed) :]
                    self.streamed = frame.message
                    return rest
            case AgentRequestInput():
                return self._paused(question_text(frame), question=True)
            case ToolApprovalRequest():
                if self.stateless:
                    self.decline = frame.tool_call_id
                    return ""
                return self._paused(approval_text(frame), question=False)
            case AgentCompletion():
                self.usage = {k: getattr(frame.usage, k) for k in USAGE_FIELDS}
                if frame.reason in ("max_steps", "budget"):
                    self.finish_reason = "length"
            case ResponseComplete():
                self.over = True
        return ""

    def _paused(self, text: str, *, question: bool) -> str:
        self.pause, self.question, self.over = text, question, True
        return ("\n\n" if self.streamed else "") + text

    @property
    def content(self) -> str:
        """The whole reply's content."""
        if self.pause is not None:
            return (f"{self.streamed}\n\n" if self.streamed else "") + self.pause
        return self.answer if self.answer is not None else self.streamed


def usage_between(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """The tokens spent between two of a run's usage reports."""
    return {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in USAGE_FIELDS}


@dataclass(frozen=True)
class Head:
    """What every object of one reply repeats."""

    id: str
    created: int
    model: str
    conversation_id: str

    def fields(self, kind: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.conversation_id,
        }


def chunk(
    head: Head,
    delta: dict[str, str],
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """A `chat.completion.chunk` with one choice."""
    choice = {
        "index": 0,
        "delta": delta,
        "logprobs": None,
        "finish_reason": finish_reason,
    }
    return {**head.fields("chat.completion.chunk"), "choices": [choice]}


def usage_chunk(head: Head, usage: dict[str, int]) -> dict[str, Any]:
    """The last chunk when `stream_options.include_usage` asked: no choices."""
    return {**head.fields("chat.completion.chunk"), "choices": [], "usage": usage}


def completion(head: Head, reply: Reply, usage: dict[str, int]) -> dict[str, Any]:
    """The `chat.completion` of a whole reply."""
    message = {
        "role": "assistant",
        "content": reply.content,
        "reasoning_content": "".join(reply.reasoning),
    }
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": reply.finish_reason,
    }
    return {**head.fields("chat.completion"), "choices": [choice], "usage": usage}
