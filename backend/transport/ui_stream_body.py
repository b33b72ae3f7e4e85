"""What `useChat`'s `DefaultChatTransport` sends to `POST /api/ui-stream`,
and what its last message asks loopwire to do.

The body is `{id, messages, trigger, messageId?}` (the AI SDK's) plus
loopwire's own run options, which a page passes as the transport's `body`.
`messages` is the client's copy of the conversation: loopwire keeps its
own, so only the end of it counts —

- a user message last: its text is the run's `chat`, or the answer to the
  question the conversation's run waits on;
- an assistant message last: its tool parts in state `approval-responded`
  are the user's decisions on the run's approval requests;
- `trigger: "regenerate-message"`: edit and resend (`replace_from`) of the
  run whose assistant message `messageId` names; without `messageId`
  (`regenerate()`), of the run that answered the last user message;
- a `messageId` that names the last user message (`sendMessage({ text,
  messageId })`): edit and resend of the run that message started, with
  its new text.

A user message is mapped to the run it started by position: the saved run
after the run of the assistant message just before it (the conversation's
first run when it is the first message), so `Edit` says which, and the
adapter looks the run up among the conversation's saved runs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from backend.protocol import (
    AnswerAction,
    ChatMessage,
    Id,
    Name,
    Steps,
    SystemPrompt,
    ToolApprovalResponseMessage,
    ToolNames,
)
from backend.transport.bodies import StrictBody, describe, read_json
from backend.transport.refusal import Refused

CONVERSATION_ID = r"^[0-9a-f]{32}$"
MOST_PROBLEMS = 15
"""Validation problems named in a refusal: fewer than `read_model` lists,
so that a body missing its three required fields and carrying unknown ones
still gets a short message."""
SEGMENT = ":"
"""Between a run's id and the question it continues after, in a message id."""
ACTIONS: dict[str, AnswerAction] = {a: a for a in ("accept", "decline", "cancel")}


class UIPart(BaseModel):
    """A part of a UI message: its `type`, and whatever else it holds."""

    model_config = ConfigDict(extra="allow", strict=True)

    type: Annotated[str, Field(min_length=1, max_length=128)]

    def field(self, name: str) -> Any:
        return (self.model_extra or {}).get(name)


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    id: Annotated[str, Field(max_length=256)]
    role: Literal["system", "user", "assistant"]
    parts: Annotated[list[UIPart], Field(max_length=10_000)]
    metadata: Any = None


class UIStreamRequest(StrictBody):
    id: Id
    """The chat's id: a loopwire conversation's id, or the client's own."""
    messages: Annotated[list[UIMessage], Field(min_length=1, max_length=10_000)]
    trigger: Literal["submit-message", "regenerate-message"]
    messageId: Id | None = None
    """The SDK's name: the message to regenerate, or the one edited."""
    detach: bool = False
    """Keep the run going if the client goes away."""
    max_steps: Steps | None = None
    loop_strategy: Name | None = None
    selected_tools: ToolNames | None = None
    model: Name | None = None
    system_prompt: SystemPrompt | None = None

    def chat(self, content: str, replace_from: str | None = None) -> ChatMessage:
        return ChatMessage(
            type="chat",
            content=content,
            agent_mode=True,
            agent_max_steps=self.max_steps,
            selected_tools=self.selected_tools,
            loop_strategy=self.loop_strategy,
            model=self.model,
            system_prompt=self.system_prompt,
            replace_from=replace_from,
        )

    def conversation_hint(self) -> str | None:
        """The conversation the client's latest assistant message says it
        belongs to (its metadata, as the stream's `start` part gave it)."""
        for message in reversed(self.messages):
            if message.role == "assistant" and isinstance(message.metadata, dict):
                found = message.metadata.get("conversationId")
                if isinstance(found, str):
                    return found
        return None


class Decision(BaseModel):
    """A tool part's `approval` once the user answered it."""

    model_config = ConfigDict(strict=True)

    id: Id
    approved: bool
    reason: Annotated[str, Field(max_length=2000)] | None = None


class Ask:
    """A new run (`chat`)."""

    def __init__(self, content: str, replace_from: str | None = None) -> None:
        self.content = content
        self.replace_from = replace_from


class Answer:
    """The last user message: an answer if a question waits, else a chat.
    With `action` "decline" or "cancel" (its `metadata.action`), only the
    question's refusal, its text not sent."""

    def __init__(
        self, content: str, question_id: str | None, action: AnswerAction | None
    ) -> None:
        self.content = content
        self.question_id = question_id
        self.action = action

    @property
    def refusal(self) -> bool:
        return self.action in ("decline", "cancel")


class Decide:
    """The user's decisions on approval requests, and the message they are in."""

    def __init__(
        self, message_id: str, decisions: list[ToolApprovalResponseMessage]
    ) -> None:
        self.message_id = message_id
        self.decisions = decisions


class Edit:
    """A chat replacing the run the user's message `message_id` started: the
    saved run after `after` (the run of the answer before the message;
    None: the message is the first, so is its run)."""

    def __init__(self, content: str, message_id: str, after: str | None) -> None:
        self.content = content
        self.message_id = message_id
        self.after = after

    def run_in(self, run_ids: list[str], conversation_id: str) -> str:
        """The run among the conversation's saved runs (oldest first) that
        the message started; 404 naming what is not there."""
        index = 0
        if self.after is not None:
            if self.after not in run_ids:
                raise _unknown(
                    f"the assistant message {self.after!r} before message "
                    f"{self.message_id!r} is not a saved run of conversation "
                    f"{conversation_id!r}"
                )
            index = run_ids.index(self.after) + 1
        if index >= len(run_ids):
            raise _unknown(
                f"message {self.message_id!r} started no saved run of "
                f"conversation {conversation_id!r}, so there is nothing to "
                "replace: send it as a new message"
            )
        return run_ids[index]


Turn = Ask | Answer | Decide | Edit


async def read_body(request: Request, limit: int) -> UIStreamRequest:
    """The body (at most `limit` bytes), validated; 400 naming the problems."""
    data = await read_json(request, limit)
    try:
        return UIStreamRequest.model_validate(data)
    except ValidationError as exc:
        fields, problems = describe(exc, most=MOST_PROBLEMS)
        raise Refused(
            400,
            "invalid_message",
            f"invalid ui-stream request: {problems}",
            fields=fields,
        ) from exc


def turn_of(body: UIStreamRequest) -> Turn:
    """What the request's last message asks for; 400 when it asks for
    nothing loopwire does."""
    last = body.messages[-1]
    if body.trigger == "regenerate-message":
        return _regenerate(body)
    if last.role == "assistant":
        return Decide(last.id, _decisions(last))
    if last.role != "user":
        raise _refused("the last message must be the user's (or approvals)")
    if body.messageId is not None and body.messageId == last.id:
        return _edit(body)
    earlier = body.messages[-2] if len(body.messages) > 1 else None
    action = _action_in(last)
    content = "" if action in ("decline", "cancel") else text_of(last)
    return Answer(content, _question_in(earlier), action)


def _action_in(message: UIMessage) -> AnswerAction | None:
    """What a user message's `metadata.action` does with the question."""
    meta = message.metadata
    action = meta.get("action") if isinstance(meta, dict) else None
    if action is None:
        return None
    if not isinstance(action, str) or action not in ACTIONS:
        raise _refused("metadata.action must be accept, decline or cancel")
    return ACTIONS[action]


def _edit(body: UIStreamRequest) -> Edit:
    """`sendMessage({ text, messageId })`: the last user message, edited,
    replaces the run it started. An answer to a question started none."""
    last = body.messages[-1]
    asked = _answered(body.messages)
    if asked is not None:
        raise _refused(
            f"message {last.id!r} answered a question of run {asked!r}, and an "
            f"answer cannot be edited: regenerate({{ messageId: '{asked}' }}) "
            "runs that run again"
        )
    return Edit(text_of(last), last.id, _run_before(body.messages))


def _regenerate(body: UIStreamRequest) -> Ask | Edit:
    """Edit and resend: the run of the assistant message `messageId` (or,
    without one, of the answer the SDK left out after the last user
    message), again with the user's message that started it."""
    if body.messageId is None:
        return _regenerate_last(body)
    return _again(body, body.messageId.split(SEGMENT)[0])


def _regenerate_last(body: UIStreamRequest) -> Ask | Edit:
    """`regenerate()`: the SDK sends the messages up to the user message the
    last answer followed. After an answer to a question, that answer was
    the question's run going on: that run again."""
    last = body.messages[-1]
    if last.role != "user":
        raise _refused(
            "regenerate-message without messageId needs the user's message "
            "last (the answer to regenerate left out, as regenerate() sends it)"
        )
    asked = _answered(body.messages)
    if asked is not None:
        return _again(body, asked)
    return Edit(text_of(last), last.id, _run_before(body.messages))


def _again(body: UIStreamRequest, run_id: str) -> Ask:
    """The run `run_id` replaced by the user's message that started it."""
    users = [m for m in body.messages if m.role == "user"]
    starts = [i for i, m in enumerate(body.messages) if m.id == run_id]
    if starts:  # a continued run: the user's message before its first part
        users = [m for m in body.messages[: starts[0]] if m.role == "user"]
    if not users:
        raise _refused("no user message to send again")
    return Ask(text_of(users[-1]), replace_from=run_id)


def _answered(messages: list[UIMessage]) -> str | None:
    """The run whose question the last message answered, if it did."""
    earlier = messages[-2] if len(messages) > 1 else None
    if earlier is None or _question_in(earlier) is None:
        return None
    return earlier.id.split(SEGMENT)[0]


def _run_before(messages: list[UIMessage]) -> str | None:
    """The run of the assistant message just before the last message (None
    when the last is the first); 400 when another user message is between."""
    prior = [m for m in messages[:-1] if m.role != "system"]
    if not prior:
        return None
    if prior[-1].role != "assistant":
        raise _refused(
            f"cannot tell which run message {messages[-1].id!r} started: the "
            f"message before it, {prior[-1].id!r}, is not an answer"
        )
    return prior[-1].id.split(SEGMENT)[0]


def text_of(message: UIMessage) -> str:
    """A user message's text parts, joined; 400 for a file or no text."""
    texts: list[str] = []
    for part in message.parts:
        if part.type == "file":
            raise Refused(
                400,
                "invalid_message",
                "file parts are not taken here: upload files with "
                "POST /api/conversations/{id}/files",
            )
        if part.type == "text":
            text = part.field("text")
            if not isinstance(text, str):
                raise _refused("a text part's text must be a string")
            texts.append(text)
    content = "\n\n".join(texts)
    if not content.strip():
        raise _refused("the last user message has no text")
    return content


def _question_in(message: UIMessage | None) -> str | None:
    """The id of the question an assistant message ends waiting on."""
    if message is None or message.role != "assistant":
        return None
    for part in reversed(message.parts):
        if part.type == "data-loopwire-question":
            data = part.field("data")
            found = data.get("questionId") if isinstance(data, dict) else None
            return found if isinstance(found, str) else None
    return None


def _decisions(message: UIMessage) -> list[ToolApprovalResponseMessage]:
    """The approvals the user answered in `message`; 400 for none."""
    in_doubt = _in_doubt(message)
    decisions = []
    for part in message.parts:
        is_tool = part.type == "dynamic-tool" or part.type.startswith("tool-")
        if not is_tool or part.field("state") != "approval-responded":
            continue
        try:
            decision = Decision.model_validate(part.field("approval"))
        except ValidationError as exc:
            raise _refused(
                "an approval response must be {id, approved, reason?}"
            ) from exc
        decisions.append(
            ToolApprovalResponseMessage(
                type="tool_approval_response",
                tool_call_id=decision.id,
                approved=decision.approved,
                reason=decision.reason,
                in_doubt=True if decision.id in in_doubt else None,
            )
        )
    if not decisions:
        raise _refused(
            "the last message is the assistant's but answers no approval request"
        )
    return decisions


def _in_doubt(message: UIMessage) -> set[str]:
    """The calls whose approval request the user was shown as in doubt
    (approving one runs it again, and must say so)."""
    found = set()
    for part in message.parts:
        data = part.field("data")
        if (
            part.type == "data-loopwire-approval"
            and isinstance(data, dict)
            and data.get("inDoubt") is True
            and isinstance(data.get("toolCallId"), str)
        ):
            found.add(data["toolCallId"])
    return found


def _unknown(message: str) -> Refused:
    return Refused(404, "not_found", f"invalid ui-stream request: {message}")


def _refused(message: str) -> Refused:
    return Refused(400, "invalid_message", f"invalid ui-stream request: {message}")
