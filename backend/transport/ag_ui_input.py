"""What an AG-UI `RunAgentInput` asks of loopwire (`transport/ag_ui.py`):
the conversation its `threadId` names, the options in `forwardedProps`, the
user's message, its frontend tools as client tools, and the loopwire
messages its `resume` entries and trailing `tool` messages are."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Annotated, Any

from ag_ui.core import (
    InputContent,
    ResumeEntry,
    RunAgentInput,
    TextPart,
    ToolMessage,
    UserMessage,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.protocol import (
    AgentControlMessage,
    AgentUserInputMessage,
    AnswerAction,
    ClientMessage,
    ClientTool,
    Name,
    Remember,
    Steps,
    ToolApprovalResponseMessage,
    ToolNames,
    ToolResultMessage,
)
from backend.transport.ag_ui_events import APPROVAL, QUESTION
from backend.transport.bodies import describe
from backend.transport.refusal import Refused

HEX_ID = re.compile(r"[0-9a-f]{32}")
ACTIONS: dict[str, AnswerAction] = {a: a for a in ("accept", "decline", "cancel")}


class Props(BaseModel):
    """What loopwire reads of `forwardedProps` (other keys are the app's)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    detach: bool = False
    max_steps: Steps | None = None
    loop_strategy: Name | None = None
    selected_tools: ToolNames | None = None
    model: Name | None = None


class Decision(BaseModel):
    """An approval interrupt's resume payload."""

    model_config = ConfigDict(extra="forbid", strict=True)

    approved: bool
    reason: Annotated[str, Field(max_length=2000)] | None = None
    in_doubt: bool | None = None
    arguments: dict[str, Any] | None = None
    remember: Remember | None = None


def _invalid(what: str, exc: ValidationError) -> Refused:
    fields, problems = describe(exc, most=20)
    return Refused(400, "invalid_message", f"invalid {what}: {problems}", fields=fields)


def conversation_of(thread_id: str) -> str | None:
    """The conversation id `thread_id` spells (32 hex digits, or a UUID)."""
    if HEX_ID.fullmatch(thread_id):
        return thread_id
    try:
        return uuid.UUID(thread_id).hex
    except ValueError:
        return None


def props_of(body: RunAgentInput) -> Props:
    raw = body.forwarded_props
    try:
        return Props.model_validate(raw if isinstance(raw, dict) else {})
    except ValidationError as exc:
        raise _invalid("forwardedProps", exc) from exc


def said(body: RunAgentInput) -> str:
    """The text of the input's last message, which must be the user's."""
    last = body.messages[-1] if body.messages else None
    if not isinstance(last, UserMessage):
        raise Refused(
            400,
            "invalid_message",
            "the last message must be the user's, or the results of the "
            "frontend tool calls the run waits for",
        )
    text = _text(last.content)
    if not text.strip():
        raise Refused(400, "invalid_message", "the user's message has no text")
    return text


def _text(content: str | Sequence[InputContent]) -> str:
    """A message's text (its text parts, one per line)."""
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content if isinstance(part, TextPart))


def client_tools_of(body: RunAgentInput) -> list[ClientTool] | None:
    """The input's frontend tools, as loopwire's client tools."""
    try:
        return [
            ClientTool.model_validate(
                {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters or {"type": "object"},
                }
            )
            for tool in body.tools or ()
        ] or None
    except ValidationError as exc:
        raise _invalid("tools", exc) from exc


def tool_results(body: RunAgentInput) -> list[ClientMessage]:
    """The results the input's last messages carry (the `tool` messages
    after the last other one), oldest first: a frontend tool's outcome."""
    results: list[ClientMessage] = []
    for message in reversed(body.messages):
        if not isinstance(message, ToolMessage):
            break
        failed = message.error is not None
        content = (message.error if failed else None) or _text(message.content)
        try:
            results.append(
                ToolResultMessage(
                    type="tool_result",
                    tool_call_id=message.tool_call_id,
                    content=content or "",
                    is_error=failed,
                )
            )
        except ValidationError as exc:
            raise _invalid(f"tool message {message.id!r}", exc) from exc
    return results[::-1]


def answer_of(entry: ResumeEntry, body: RunAgentInput) -> ClientMessage:
    """The loopwire message a resume entry is: an answer, a decision, or a
    stop (a question cancelled)."""
    kind, _, key = entry.interrupt_id.partition(":")
    try:
        if f"{kind}:" == QUESTION:
            return _question_answer(entry, key, body)
        if f"{kind}:" == APPROVAL:
            if entry.status == "cancelled":
                decision = Decision(approved=False, reason="cancelled")
            else:
                decision = Decision.model_validate(entry.payload)
            return ToolApprovalResponseMessage(
                type="tool_approval_response", tool_call_id=key, **decision.model_dump()
            )
    except ValidationError as exc:
        raise _invalid(f"resume entry {entry.interrupt_id!r}", exc) from exc
    raise Refused(
        409, "no_pending_input", f"no interrupt {entry.interrupt_id!r} of this thread"
    )


def _question_answer(
    entry: ResumeEntry, key: str, body: RunAgentInput
) -> ClientMessage:
    if entry.status == "cancelled":
        return AgentControlMessage(type="agent_control", action="stop")
    payload = entry.payload
    action = _action_of(payload)
    if action is not None:
        return AgentUserInputMessage(
            type="agent_user_input", question_id=key, action=action
        )
    if payload is None:
        content = said(body)
    elif isinstance(payload, str):
        content = payload
    else:  # a form's value (its `responseSchema`): JSON, as loopwire takes it
        content = json.dumps(payload, ensure_ascii=False)
    return AgentUserInputMessage(
        type="agent_user_input", content=content, question_id=key
    )


def _action_of(payload: Any) -> AnswerAction | None:
    """`{"action": ...}` alone: the question declined, dismissed, or (a
    page to open) done; any other payload is an answer."""
    if not isinstance(payload, dict) or set(payload) != {"action"}:
        return None
    action = payload["action"]
    return ACTIONS.get(action) if isinstance(action, str) else None
