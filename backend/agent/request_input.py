"""`request_input`: the virtual tool through which the model asks the user.

Offered next to the real tools in agent runs of tool-using strategies. The
tool-call phase hands such a call here, never to the executor: `ask` turns it
into `AwaitInput` (the driver announces the question and waits), and
`settle` takes the wait's outcome — the answer becomes the call's result, or,
when none came in time, the run ends with a final answer that says so.
"""

from __future__ import annotations

import uuid
from typing import Any

from backend.agent.loop import AgentContext, AwaitInput, Continue, Decision, Final
from backend.agent.state import Answered, PendingQuestion
from backend.answer_forms import MAX_CHOICES, accept_schema
from backend.llm.base import Message, ToolCall, ToolSpec
from backend.prompts import ResultLine
from backend.protocol import AgentRequestInputTimeout
from backend.tools.outcome import parse_arguments

REQUEST_INPUT = "request_input"
REQUEST_INPUT_SPEC = ToolSpec(
    name=REQUEST_INPUT,
    description=(
        "Pause and ask the user a clarifying question. Use it only when the "
        "request lacks information you need; the user's answer comes back as "
        "this tool's result. Optionally give `answer_schema`, a JSON Schema "
        "for the answer, so the user answers with a click: a choice "
        '{"type": "string", "enum": ["km", "mi"]} (shown as buttons, at most '
        f"{MAX_CHOICES}), yes/no "
        '{"type": "boolean"}, a number {"type": "number", "minimum": 0, '
        '"maximum": 10} (or "integer"), or an object of such properties. '
        "Without it the user answers in free text. A string answer comes back "
        "as its text, any other as JSON (42, true)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question to ask."},
            "answer_schema": {
                "type": "object",
                "description": "Optional JSON Schema the answer must fit.",
            },
        },
        "required": ["question"],
    },
)


def is_request_input(ctx: AgentContext, call: ToolCall) -> bool:
    """A question for the user (offered in agent runs only; elsewhere the
    name is an unknown tool, refused like any other)."""
    return call.name == REQUEST_INPUT and ctx.state.request.agent


def ask(ctx: AgentContext, call: ToolCall, timeout_s: float, now: float) -> Decision:
    state = ctx.state
    return AwaitInput(
        PendingQuestion(
            question_id=call.id or uuid.uuid4().hex,
            question=question_of(call),
            step=state.step,
            timeout_s=timeout_s,
            deadline=now + timeout_s,
            tool_call_id=call.id,
            answer_schema=schema_of(call),
        )
    )


def settle(ctx: AgentContext, call: ToolCall, pending: PendingQuestion) -> Decision:
    """The wait is over (its outcome in `state.resolution`): record it as the
    call's result and take the call off the queue."""
    state = ctx.state
    resolution = state.take_resolution()
    state.pending_question = None
    state.queue.pop(0)
    if isinstance(resolution, Answered):
        answer = resolution.said()
        ctx.history.append(Message.tool(call.id, REQUEST_INPUT, answer))
        line = ResultLine(
            name=REQUEST_INPUT,
            status="answered" if resolution.action == "accept" else "declined",
            arguments=pending.question,
            content=answer,
        )
        state.record.results.append(line)
        return Continue()
    ctx.emit(AgentRequestInputTimeout(step=state.step, question_id=pending.question_id))
    limit = f"{pending.timeout_s:g}"
    reason = f"the user did not reply within {limit} seconds"
    note = f"No answer: {reason}."
    ctx.history.append(Message.tool(call.id, REQUEST_INPUT, note, "timeout", reason))
    why = (
        f"You asked the user: {pending.question!r}, but no answer came within "
        f"{limit} seconds. Say so, and answer as far as possible without it."
    )
    return Final(None, "timeout", why)


def schema_of(call: ToolCall) -> dict[str, Any] | None:
    """The call's `answer_schema`, if supported (else None: free text)."""
    arguments = parse_arguments(call.arguments)
    if not isinstance(arguments, dict):
        return None
    return accept_schema(arguments.get("answer_schema"))


def question_of(call: ToolCall) -> str:
    arguments = parse_arguments(call.arguments)
    if isinstance(arguments, dict) and str(arguments.get("question", "")).strip():
        return str(arguments["question"]).strip()
    return "Could you tell me more about what you need?"
