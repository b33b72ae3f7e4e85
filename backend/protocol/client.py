"""Client → server frames: the `ClientMessage` union (strict: wrong types
and unknown fields are errors)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from backend.protocol.values import (
    BudgetLimits,
    Id,
    Name,
    Steps,
    SystemPrompt,
    ToolName,
    ToolNames,
)

CLIENT_TOOLS_LIMIT = 64
"""Tools a client may declare for one run."""
TOOL_RESULT_LIMIT = 200_000
"""Characters of a client tool's result."""


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class ClientTool(_Frame):
    """A tool the client runs itself (a frontend tool): the model may call
    it; the run waits for the client's `tool_result` as it would for an
    approval."""

    name: ToolName
    description: Annotated[str, Field(max_length=4000)] = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    """Its arguments' JSON Schema, given to the model as it is."""

    @model_validator(mode="after")
    def _schema_is_an_object(self) -> ClientTool:
        kind = self.parameters.get("type", "object")
        if kind != "object":
            raise ValueError(
                f"tool {self.name!r}: parameters must be a JSON Schema of an "
                f"object (type 'object'), not {kind!r}"
            )
        return self


def check_client_tools(tools: list[ClientTool] | None) -> None:
    """`ValueError` if `tools` name one tool twice."""
    names = [tool.name for tool in tools or ()]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"client_tools names a tool twice: {', '.join(twice)}")


class ChatMessage(_Frame):
    """Start a run: a plain reply, tool use, or an agent loop."""

    type: Literal["chat"]
    content: Annotated[str, Field(min_length=1)]
    agent_mode: bool = False
    agent_max_steps: Steps | None = None
    agent_budget: BudgetLimits | None = None
    """A budget for this run below the server's (`limits.run_budget`): a
    bound above it is lowered to it. The run ends with reason `budget` at
    a bound."""
    selected_tools: ToolNames | None = None
    selected_data_sources: Annotated[list[Name], Field(max_length=50)] | None = None
    """The data sources `search_documents` may search in this run (None: all
    of them). With neither `agent_mode`, `loop_strategy` nor `selected_tools`,
    the run is a retrieval: the server searches them for `content` and the
    model answers from the passages, citing them (`chat_response.sources`)."""
    loop_strategy: Name | None = None
    read_only: bool = False
    model: Name | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    save_chat: bool = True
    """False: nothing of this run is stored, and it leaves no trace in the
    conversation's history (the model of later runs never sees it)."""
    include_history: bool = True
    """False: the model sees only this message, not the conversation before."""
    system_prompt: SystemPrompt | None = None
    """Instructions for this run, given to the model after the server's own
    system prompt on every call of the run (the server may refuse them)."""
    client_tools: (
        Annotated[list[ClientTool], Field(max_length=CLIENT_TOOLS_LIMIT)] | None
    ) = None
    """Tools the client runs itself, offered to the model next to the
    server's (a run with them and no agent mode is a tool-use run). A call
    of one is sent as `client_tool_call`, and the run waits for the
    client's `tool_result`."""
    when_busy: Literal["refuse", "queue", "steer", "interrupt"] = "refuse"
    """What to do if a run is active: `refuse` (a `busy` error), `queue`
    (run it after that run), `steer` (tell it to that run, as the user's
    interjection, at its next phase boundary; a run that is not an agent
    loop queues it), `interrupt` (stop that run after its current phase,
    then run this first). Kept until used: it survives a restart."""
    replace_from: Id | None = None
    """Edit and resend: the `run_id` of a saved run of this conversation. That
    run and every later run of the conversation are removed (their messages
    cut from the history the model sees, their records deleted from the
    store; `runs_removed` names them), then this message starts a new run.
    What their tools did (notes saved, …) is not undone."""

    @model_validator(mode="after")
    def _content_not_blank(self) -> ChatMessage:
        if not self.content.strip():
            raise ValueError("content must not be blank")
        if self.system_prompt is not None and not self.system_prompt.strip():
            raise ValueError("system_prompt must not be blank (leave it out for none)")
        check_client_tools(self.client_tools)
        return self


class AgentControlMessage(_Frame):
    """Stop the running loop, stop it gracefully, or extend its budget."""

    type: Literal["agent_control"]
    action: Literal["stop", "stop_after_step", "grant_steps", "grant_budget"]
    steps: Steps | None = None
    budget: BudgetLimits | None = None
    """`grant_budget`: what to add to the running run's budget (up to the
    server's cap and the user's daily remainder)."""

    @model_validator(mode="after")
    def _steps_with_grant(self) -> AgentControlMessage:
        if self.action == "grant_steps" and self.steps is None:
            raise ValueError("grant_steps needs 'steps' (a positive integer)")
        if self.action != "grant_steps" and self.steps is not None:
            raise ValueError(f"'steps' only goes with grant_steps, not {self.action}")
        if self.action == "grant_budget" and not _adds(self.budget):
            raise ValueError(
                "grant_budget needs 'budget' with a positive tokens, cost_usd "
                "or time_s to add"
            )
        if self.action != "grant_budget" and self.budget is not None:
            raise ValueError(f"'budget' only goes with grant_budget, not {self.action}")
        return self


def _adds(budget: BudgetLimits | None) -> bool:
    """`budget` adds something (a positive amount of some kind)."""
    if budget is None:
        return False
    return any(amount for amount in (budget.tokens, budget.cost_usd, budget.time_s))


AnswerAction = Literal["accept", "decline", "cancel"]
"""An answer (`accept`), or none: the person said no to the question
(`decline`) or dismissed it (`cancel`). MCP's three replies to a server's
question; the model, when it asked, hears that no answer was given."""


class AgentUserInputMessage(_Frame):
    """The user's answer to a pending question (the model's `request_input`,
    or an MCP server's question during a tool call)."""

    type: Literal["agent_user_input"]
    content: str = ""
    question_id: Id | None = None
    action: AnswerAction | None = None
    """None: `accept`."""

    @model_validator(mode="after")
    def _content_with_accept(self) -> AgentUserInputMessage:
        if self.action not in (None, "accept") and self.content:
            raise ValueError(f"an answer with action {self.action!r} has no content")
        return self


Remember = Literal["conversation", "user"]
"""How long a "yes" lasts past its call: this tool runs without asking for
the rest of the conversation, or in all of the user's conversations."""


class ToolApprovalResponseMessage(_Frame):
    type: Literal["tool_approval_response"]
    tool_call_id: Id
    approved: bool
    reason: Annotated[str, Field(max_length=2000)] | None = None
    """Why not (with a "no"): the model is told it as the call's result."""
    in_doubt: bool | None = None
    """`true` to approve a request `in_doubt` (run the call again), which
    must say so: an approval given before the server stopped, sent again by
    a client that reconnected, is then never taken as a "run it again"."""
    arguments: dict[str, Any] | None = None
    """Approve with these arguments instead of the model's (checked against
    the tool's schema: `invalid_answer`, the approval still waiting, if
    they do not fit)."""
    remember: Remember | None = None
    """Always allow this tool (with a "yes"): in this conversation, or for
    this user; revocable (`GET/DELETE /api/tool-grants`)."""

    @model_validator(mode="after")
    def _only_with_yes(self) -> ToolApprovalResponseMessage:
        if not self.approved and (self.arguments is not None or self.remember):
            raise ValueError("arguments and remember go with approved: true only")
        return self


class ToolResultMessage(_Frame):
    """The result of a client tool's call the run waits for (`is_error`:
    the call failed, and `content` says how)."""

    type: Literal["tool_result"]
    tool_call_id: Id
    content: Annotated[str, Field(max_length=TOOL_RESULT_LIMIT)]
    is_error: bool = False


class CancelInputMessage(_Frame):
    """Drop a message held while a run works (`pending_input`), unused."""

    type: Literal["cancel_input"]
    input_id: Id


class ResetSessionMessage(_Frame):
    """Forget the session's history (refused while a run is active)."""

    type: Literal["reset_session"]


class SwitchBranchMessage(_Frame):
    """Show another version of the conversation: the branch `branch_id` (one
    of `GET /api/conversations/{id}/branches`) takes the place of the
    messages from where it forks, which are set aside as a branch in turn
    (refused while a run is active). Answered with `branch_switched`."""

    type: Literal["switch_branch"]
    branch_id: Id


ClientMessage = Annotated[
    ChatMessage
    | AgentControlMessage
    | AgentUserInputMessage
    | ToolApprovalResponseMessage
    | ToolResultMessage
    | CancelInputMessage
    | ResetSessionMessage
    | SwitchBranchMessage,
    Field(discriminator="type"),
]
client_message_adapter: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)
CLIENT_MESSAGE_TYPES: tuple[str, ...] = tuple(
    get_args(member.model_fields["type"].annotation)[0]
    for member in get_args(get_args(ClientMessage)[0])
)
"""Every client frame `type`, read off the union itself."""


def named_in(message: ClientMessage) -> str | None:
    """The question, tool call or held input a message is about, if any."""
    match message:
        case (
            AgentUserInputMessage(question_id=named)
            | CancelInputMessage(input_id=named)
        ):
            return named
        case (
            ToolApprovalResponseMessage(tool_call_id=named)
            | ToolResultMessage(tool_call_id=named)
        ):
            return named
    return None
