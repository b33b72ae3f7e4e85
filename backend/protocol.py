"""Protocol v1: THE wire contract, both ways.

Every frame is a JSON text frame with a `type`. Client frames parse into the
`ClientMessage` union (strict: wrong types and unknown fields are errors);
a server frame is the envelope (`seq`, `session_id`, `run_id`, `ts`) plus
one payload. Each payload is declared once, below; the loop emits payloads,
and `backend.notifications` alone stamps them with the envelope. The flat
frame models of the `ServerMessage` union are made from the payloads
(`Envelope` + payload), never written out a second time. `python -m backend
schema` exports both unions as JSON Schema to `docs/protocol.schema.json`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    create_model,
    model_validator,
)

PROTOCOL_VERSION = 1


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


Id = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[!-~]+$")]
"""A question, tool call or run id: short printable ASCII, no spaces (tool
call ids come from the model's provider, so no narrower alphabet is assumed)."""
Name = Annotated[str, Field(min_length=1, max_length=128)]
"""A tool, strategy or model name."""
STEPS_LIMIT = 10_000
"""No step count a client sends may exceed this (the server's cap is lower)."""
SYSTEM_PROMPT_LIMIT = 20_000
"""Characters of a client's own instructions (`ChatMessage.system_prompt`)."""


# ---------------------------------------------------------------- client → server


class ChatMessage(_Frame):
    """Start a run: a plain reply, tool use, or an agent loop."""

    type: Literal["chat"]
    content: Annotated[str, Field(min_length=1)]
    agent_mode: bool = False
    agent_max_steps: Annotated[int, Field(ge=1, le=STEPS_LIMIT)] | None = None
    selected_tools: Annotated[list[Name], Field(max_length=256)] | None = None
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
    system_prompt: (
        Annotated[str, Field(min_length=1, max_length=SYSTEM_PROMPT_LIMIT)] | None
    ) = None
    """Instructions for this run, given to the model after the server's own
    system prompt on every call of the run (the server may refuse them)."""
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
        return self


class AgentControlMessage(_Frame):
    """Stop the running loop, stop it gracefully, or extend its budget."""

    type: Literal["agent_control"]
    action: Literal["stop", "stop_after_step", "grant_steps"]
    steps: Annotated[int, Field(ge=1, le=STEPS_LIMIT)] | None = None

    @model_validator(mode="after")
    def _steps_with_grant(self) -> AgentControlMessage:
        if self.action == "grant_steps" and self.steps is None:
            raise ValueError("grant_steps needs 'steps' (a positive integer)")
        if self.action != "grant_steps" and self.steps is not None:
            raise ValueError(f"'steps' only goes with grant_steps, not {self.action}")
        return self


class AgentUserInputMessage(_Frame):
    """The user's answer to a pending `request_input` question."""

    type: Literal["agent_user_input"]
    content: str
    question_id: Id | None = None


class ToolApprovalResponseMessage(_Frame):
    type: Literal["tool_approval_response"]
    tool_call_id: Id
    approved: bool
    reason: Annotated[str, Field(max_length=2000)] | None = None
    in_doubt: bool | None = None
    """`true` to approve a request `in_doubt` (run the call again), which
    must say so: an approval given before the server stopped, sent again by
    a client that reconnected, is then never taken as a "run it again"."""


class ResetSessionMessage(_Frame):
    """Forget the session's history (refused while a run is active)."""

    type: Literal["reset_session"]


ClientMessage = Annotated[
    ChatMessage
    | AgentControlMessage
    | AgentUserInputMessage
    | ToolApprovalResponseMessage
    | ResetSessionMessage,
    Field(discriminator="type"),
]
client_message_adapter: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)
CLIENT_MESSAGE_TYPES: tuple[str, ...] = tuple(
    get_args(member.model_fields["type"].annotation)[0]
    for member in get_args(get_args(ClientMessage)[0])
)
"""Every client frame `type`, read off the union itself."""


# ---------------------------------------------------------------- server → client


class Envelope(BaseModel):
    """What every server frame carries besides its payload."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int = Field(description="Per-session, strictly increasing from 1.")
    session_id: str
    run_id: str | None = Field(description="The run this frame belongs to, if any.")
    ts: float = Field(description="Server time, seconds since the Unix epoch.")


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_steps_cap: int
    default_max_steps: int
    max_message_bytes: int


class ToolEffectInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    read_only: bool
    idempotent: bool
    requires_approval: bool
    """A call waits for the user's approval."""
    asks_after_untrusted: bool
    """A call waits for approval once the run has read content the user did
    not write (`tool_approval_request.untrusted_sources`)."""
    untrusted_result: bool
    """Its result may carry text the user did not write."""
    finalize: bool


class ToolInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    """What the model is told."""
    summary: str
    """What it does, in words for people (shown by the UI)."""
    effect: ToolEffectInfo


class ServerInfo(BaseModel):
    """What a client may do here (`GET /api/info`, and inside `session_ready`)."""

    model_config = ConfigDict(frozen=True)

    protocol: Literal[1] = 1
    limits: Limits
    model: str
    models: list[str]
    """What a `chat` may name as `model` (the first is the default)."""
    provider: str
    tools: list[ToolInfo]
    strategies: list[str]
    """The loop strategies a `chat` may name, the default agent strategy first."""
    data_sources: list[str] = Field(default_factory=list)
    """What `chat.selected_data_sources` may name (`LOOPWIRE_DATA_SOURCES`)."""


class SessionReady(_Payload):
    """First frame on every connection. Not part of the replayable stream:
    its `seq` is 0 and `last_seq` tells where the session's stream stands."""

    type: Literal["session_ready"] = "session_ready"
    protocol: Literal[1] = 1
    resumed: bool
    last_seq: int
    oldest_seq: int = Field(
        description="The oldest frame still held for replay (0: none). If the "
        "last_seq you resumed from is below oldest_seq - 1, frames were lost."
    )
    limits: Limits
    model: str
    models: list[str]
    provider: str
    tools: list[ToolInfo]
    strategies: list[str]
    data_sources: list[str] = Field(default_factory=list)


class ReasonControl(BaseModel):
    model_config = ConfigDict(frozen=True)

    plan: str = ""
    tools_to_consider: list[str] = Field(default_factory=list)
    finish: bool = False
    final_answer: str = ""
    ask_user: str = Field(
        default="",
        description="A clarifying question for the user (strategies without "
        "tools, such as llm_only, ask through this field).",
    )


class ObserveControl(BaseModel):
    model_config = ConfigDict(frozen=True)

    observation: str = ""
    should_continue: bool = True
    final_answer: str = ""
    replan: bool = Field(
        default=False,
        description="plan_execute: the plan no longer fits; make a new one.",
    )


class PlanControl(BaseModel):
    model_config = ConfigDict(frozen=True)

    steps: list[str] = Field(default_factory=list)
    final_answer: str = ""


class UsageInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    llm_calls: int


class BaseAgentUpdate(_Payload):
    """Every `agent_update` payload."""

    type: Literal["agent_update"] = "agent_update"


class AgentStart(BaseAgentUpdate):
    update_type: Literal["agent_start"] = "agent_start"
    max_steps: int
    strategy: str


class AgentTurnStart(BaseAgentUpdate):
    update_type: Literal["agent_turn_start"] = "agent_turn_start"
    step: int
    max_steps: int


class AgentPlan(BaseAgentUpdate):
    """plan_execute's numbered plan; `revision` counts re-plans (first: 1)."""

    update_type: Literal["agent_plan"] = "agent_plan"
    step: int
    steps: list[str]
    revision: int
    content: str = ""


class AgentReason(BaseAgentUpdate):
    update_type: Literal["agent_reason"] = "agent_reason"
    step: int
    content: str
    control: ReasonControl | None


class AgentRequestInput(BaseAgentUpdate):
    update_type: Literal["agent_request_input"] = "agent_request_input"
    step: int
    question: str
    question_id: str
    timeout_s: float


class AgentRequestInputTimeout(BaseAgentUpdate):
    update_type: Literal["agent_request_input_timeout"] = "agent_request_input_timeout"
    step: int
    question_id: str


class AgentObserve(BaseAgentUpdate):
    update_type: Literal["agent_observe"] = "agent_observe"
    step: int
    content: str
    control: ObserveControl | None


class AgentDuplicateCall(BaseAgentUpdate):
    update_type: Literal["agent_duplicate_call"] = "agent_duplicate_call"
    step: int
    tool_name: str


class AgentStepsGranted(BaseAgentUpdate):
    update_type: Literal["agent_steps_granted"] = "agent_steps_granted"
    granted: int
    max_steps: int


class AgentMaxStepsReached(BaseAgentUpdate):
    update_type: Literal["agent_max_steps_reached"] = "agent_max_steps_reached"
    steps: int


StopMode = Literal["immediate", "after_step"]


class AgentStopped(BaseAgentUpdate):
    update_type: Literal["agent_stopped"] = "agent_stopped"
    step: int
    mode: StopMode


CompletionReason = Literal[
    "finished", "max_steps", "stopped", "rejected", "timeout", "error", "interrupted"
]


class AgentCompletion(BaseAgentUpdate):
    update_type: Literal["agent_completion"] = "agent_completion"
    steps: int
    reason: CompletionReason
    usage: UsageInfo
    duration_ms: float
    strategy: str


class AgentError(BaseAgentUpdate):
    update_type: Literal["agent_error"] = "agent_error"
    message: str


AgentUpdate = (
    AgentStart
    | AgentTurnStart
    | AgentPlan
    | AgentReason
    | AgentRequestInput
    | AgentRequestInputTimeout
    | AgentObserve
    | AgentDuplicateCall
    | AgentStepsGranted
    | AgentMaxStepsReached
    | AgentStopped
    | AgentCompletion
    | AgentError
)

ToolArguments = dict[str, Any] | str
"""Parsed arguments, or the raw text when the model sent something unparseable."""

ToolErrorStatus = Literal[
    "failed", "blocked", "timeout", "rate_limited", "rejected", "cancelled"
]


class ToolStart(_Payload):
    type: Literal["tool_start"] = "tool_start"
    tool_call_id: str
    tool_name: str
    arguments: ToolArguments
    step: int


class ToolComplete(_Payload):
    type: Literal["tool_complete"] = "tool_complete"
    tool_call_id: str
    tool_name: str
    result: Any
    duration_ms: float
    step: int


class ToolError(_Payload):
    type: Literal["tool_error"] = "tool_error"
    tool_call_id: str
    tool_name: str
    error: str
    status: ToolErrorStatus
    duration_ms: float
    step: int


class UntrustedSource(BaseModel):
    """Content a run read that the user did not write: a tool result with
    text from documents, files, web pages or other systems. An instruction
    in it is not the user's."""

    model_config = ConfigDict(frozen=True)

    tool_name: str
    step: int
    origin: str
    """Where the text came from, for people ("the file report.pdf",
    "docs/handbook.md", "the MCP server web"); empty: the tool says it."""


class ToolApprovalRequest(_Payload):
    type: Literal["tool_approval_request"] = "tool_approval_request"
    tool_call_id: str
    tool_name: str
    arguments: ToolArguments
    description: str
    step: int
    in_doubt: bool = False
    """The call was running when the server that ran it stopped, and nothing
    can tell whether it took effect: approving runs it again."""
    untrusted_sources: list[UntrustedSource] = Field(default_factory=list)
    """What the run had read before asking that the user did not write, in
    the order read: the request to make this call may have come from
    there, not from the user (prompt injection). Empty: nothing yet."""


class TokenStream(_Payload):
    type: Literal["token_stream"] = "token_stream"
    token: str
    is_first: bool
    is_last: bool


class SourceRef(BaseModel):
    """A passage the run's answer may rest on (from a tool that cites, such
    as `search_documents`)."""

    model_config = ConfigDict(frozen=True)

    source: str
    """The data source's name."""
    path: str
    """The document, relative to its source's folder."""
    location: str
    """Where in it: a heading path, `page 3`, or a range of lines."""
    score: float | None = None
    excerpt: str = ""


class ChatResponse(_Payload):
    type: Literal["chat_response"] = "chat_response"
    message: str
    sources: list[SourceRef] = Field(default_factory=list)
    """The passages the run's tools found (citations), in the order found,
    each once; empty when no tool that cites was used."""


class ResponseComplete(_Payload):
    type: Literal["response_complete"] = "response_complete"


class SessionReset(_Payload):
    type: Literal["session_reset"] = "session_reset"


class FileInfo(BaseModel):
    """A conversation's file, as clients see it (`files_update`, the files API)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    media_type: str
    size: int
    """Bytes."""
    origin: Literal["upload", "artifact"]
    """Uploaded by the user, or made by a tool (an artifact)."""
    description: str = ""
    run_id: str | None = None
    """The run whose tool made it (artifacts)."""
    created_at: float


class FilesUpdate(_Payload):
    """The conversation's files changed (an upload, or a tool's artifact):
    all of them, oldest first. Download one with
    `GET /api/conversations/{id}/files/{file_id}`."""

    type: Literal["files_update"] = "files_update"
    files: list[FileInfo]
    added: list[str]
    """The ids of the files this update adds."""


class RunsRemoved(_Payload):
    """A `chat` with `replace_from` removed these runs (oldest first): their
    messages left the conversation's history and their records the store.
    Their frames stay in the replay log, before this one. Sent before the
    new run's first frame."""

    type: Literal["runs_removed"] = "runs_removed"
    run_ids: list[str]


ErrorType = Literal[
    "invalid_message",
    "busy",
    "no_pending_input",
    "no_pending_approval",
    "no_active_run",
    "llm_error",
    "unauthorized",
    "rate_limited",
    "internal_error",
    "run_interrupted",
    "server_restarting",
    "store_error",
    "unavailable",
    "moved",
]
"""`moved`: the instance a decision (an answer, an approval) reached no longer
owns the conversation, so it was not taken; reconnect and send it again (it
lands on the owner)."""


class Error(_Payload):
    type: Literal["error"] = "error"
    message: str
    error_type: ErrorType


RunEvent = (
    AgentUpdate
    | ToolStart
    | ToolComplete
    | ToolError
    | ToolApprovalRequest
    | TokenStream
)
"""What a run reports while it works (strategies, the driver, the executor's
caller); `ChatService` adds the run's closing frames."""

ServerPayload = (
    SessionReady
    | RunEvent
    | ChatResponse
    | ResponseComplete
    | SessionReset
    | RunsRemoved
    | FilesUpdate
    | Error
)

_AGENT_UPDATES: tuple[type[_Payload], ...] = get_args(AgentUpdate)
_OTHER_PAYLOADS: tuple[type[_Payload], ...] = (
    SessionReady,
    ToolStart,
    ToolComplete,
    ToolError,
    ToolApprovalRequest,
    TokenStream,
    ChatResponse,
    ResponseComplete,
    SessionReset,
    RunsRemoved,
    FilesUpdate,
    Error,
)


def _frame_model(payload: type[_Payload]) -> type[BaseModel]:
    """The flat wire frame of `payload`: the envelope's fields, then its own."""
    return create_model(
        f"{payload.__name__}Frame",
        __base__=(Envelope, payload),
        __module__=__name__,
        __doc__=payload.__doc__,
    )


FRAME_MODELS: dict[type[_Payload], type[BaseModel]] = {
    payload: _frame_model(payload) for payload in (*_AGENT_UPDATES, *_OTHER_PAYLOADS)
}
"""Payload type → its flat frame model (for the schema and for parsing frames)."""


def _tagged_union(models: tuple[type[BaseModel], ...], tag: str) -> Any:
    """`Annotated[A | B | …, Field(discriminator=tag)]`, built from `models`."""
    return Annotated[Union[models], Field(discriminator=tag)]  # noqa: UP007


_AGENT_FRAME_UNION = _tagged_union(
    tuple(FRAME_MODELS[p] for p in _AGENT_UPDATES), "update_type"
)
ServerMessage = _tagged_union(
    (_AGENT_FRAME_UNION, *(FRAME_MODELS[p] for p in _OTHER_PAYLOADS)),
    "type",
)
"""Every server frame, flat (`Envelope` + payload), tagged by `type` and, for
`agent_update`, by `update_type`."""
server_message_adapter: TypeAdapter[Any] = TypeAdapter(ServerMessage)


def json_schema() -> dict[str, Any]:
    """Both directions as one JSON Schema document (what `docs/` exports)."""
    client = client_message_adapter.json_schema(ref_template="#/$defs/{model}")
    server = server_message_adapter.json_schema(ref_template="#/$defs/{model}")
    defs = {**client.pop("$defs", {}), **server.pop("$defs", {})}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"loopwire protocol v{PROTOCOL_VERSION}",
        "type": "object",
        "properties": {"client_message": client, "server_message": server},
        "$defs": defs,
    }
