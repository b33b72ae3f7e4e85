"""Protocol v1: THE wire contract, both ways.

Every frame is a JSON text frame with a `type`. Client frames parse into the
`ClientMessage` union (strict: wrong types and unknown fields are errors);
server frames are built only by `backend.notifications` as members of the
`ServerMessage` union and carry the envelope `seq`, `session_id`, `run_id`,
`ts`. `python -m backend schema` exports both unions as JSON Schema to
`docs/protocol.schema.json`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

PROTOCOL_VERSION = 1


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


# ---------------------------------------------------------------- client → server


class ChatMessage(_Frame):
    """Start a run: a plain reply, tool use, or an agent loop."""

    type: Literal["chat"]
    content: Annotated[str, Field(min_length=1)]
    agent_mode: bool = False
    agent_max_steps: Annotated[int, Field(ge=1)] | None = None
    selected_tools: list[str] | None = None
    loop_strategy: str | None = None
    read_only: bool = False
    model: Annotated[str, Field(min_length=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None

    @model_validator(mode="after")
    def _content_not_blank(self) -> ChatMessage:
        if not self.content.strip():
            raise ValueError("content must not be blank")
        return self


class AgentControlMessage(_Frame):
    """Stop the running loop, stop it gracefully, or extend its budget."""

    type: Literal["agent_control"]
    action: Literal["stop", "stop_after_step", "grant_steps"]
    steps: Annotated[int, Field(ge=1)] | None = None

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
    question_id: str | None = None


class ToolApprovalResponseMessage(_Frame):
    type: Literal["tool_approval_response"]
    tool_call_id: str
    approved: bool
    reason: str | None = None


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
CLIENT_MESSAGE_TYPES: tuple[str, ...] = (
    "chat",
    "agent_control",
    "agent_user_input",
    "tool_approval_response",
    "reset_session",
)
client_message_adapter: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)


# ---------------------------------------------------------------- server → client


class _ServerFrame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int = Field(description="Per-session, strictly increasing from 1.")
    session_id: str
    run_id: str | None = Field(description="The run this frame belongs to, if any.")
    ts: float = Field(description="Server time, seconds since the Unix epoch.")


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
    finalize: bool


class ToolInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    effect: ToolEffectInfo


class ServerInfo(BaseModel):
    """What a client may do here (`GET /api/info`, and inside `session_ready`)."""

    model_config = ConfigDict(frozen=True)

    protocol: Literal[1] = 1
    limits: Limits
    model: str
    provider: str
    tools: list[ToolInfo]
    strategies: list[str]


class SessionReady(_ServerFrame):
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
    provider: str
    tools: list[ToolInfo]
    strategies: list[str]


class ReasonControl(BaseModel):
    model_config = ConfigDict(frozen=True)

    plan: str = ""
    tools_to_consider: list[str] = Field(default_factory=list)
    finish: bool = False
    final_answer: str = ""


class ObserveControl(BaseModel):
    model_config = ConfigDict(frozen=True)

    observation: str = ""
    should_continue: bool = True
    final_answer: str = ""


class UsageInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    llm_calls: int


class _AgentUpdate(_ServerFrame):
    type: Literal["agent_update"] = "agent_update"


class AgentStartUpdate(_AgentUpdate):
    update_type: Literal["agent_start"] = "agent_start"
    max_steps: int
    strategy: str


class AgentTurnStartUpdate(_AgentUpdate):
    update_type: Literal["agent_turn_start"] = "agent_turn_start"
    step: int
    max_steps: int


class AgentReasonUpdate(_AgentUpdate):
    update_type: Literal["agent_reason"] = "agent_reason"
    step: int
    content: str
    control: ReasonControl | None


class AgentRequestInputUpdate(_AgentUpdate):
    update_type: Literal["agent_request_input"] = "agent_request_input"
    step: int
    question: str
    question_id: str
    timeout_s: float


class AgentRequestInputTimeoutUpdate(_AgentUpdate):
    update_type: Literal["agent_request_input_timeout"] = "agent_request_input_timeout"
    step: int
    question_id: str


class AgentObserveUpdate(_AgentUpdate):
    update_type: Literal["agent_observe"] = "agent_observe"
    step: int
    content: str
    control: ObserveControl | None


class AgentDuplicateCallUpdate(_AgentUpdate):
    update_type: Literal["agent_duplicate_call"] = "agent_duplicate_call"
    step: int
    tool_name: str


class AgentStepsGrantedUpdate(_AgentUpdate):
    update_type: Literal["agent_steps_granted"] = "agent_steps_granted"
    granted: int
    max_steps: int


class AgentMaxStepsReachedUpdate(_AgentUpdate):
    update_type: Literal["agent_max_steps_reached"] = "agent_max_steps_reached"
    steps: int


class AgentStoppedUpdate(_AgentUpdate):
    update_type: Literal["agent_stopped"] = "agent_stopped"
    step: int
    mode: Literal["immediate", "after_step"]


CompletionReason = Literal[
    "finished", "max_steps", "stopped", "rejected", "timeout", "error"
]


class AgentCompletionUpdate(_AgentUpdate):
    update_type: Literal["agent_completion"] = "agent_completion"
    steps: int
    reason: CompletionReason
    usage: UsageInfo
    duration_ms: float


class AgentErrorUpdate(_AgentUpdate):
    update_type: Literal["agent_error"] = "agent_error"
    message: str


AgentUpdate = Annotated[
    AgentStartUpdate
    | AgentTurnStartUpdate
    | AgentReasonUpdate
    | AgentRequestInputUpdate
    | AgentRequestInputTimeoutUpdate
    | AgentObserveUpdate
    | AgentDuplicateCallUpdate
    | AgentStepsGrantedUpdate
    | AgentMaxStepsReachedUpdate
    | AgentStoppedUpdate
    | AgentCompletionUpdate
    | AgentErrorUpdate,
    Field(discriminator="update_type"),
]

ToolArguments = dict[str, Any] | str
"""Parsed arguments, or the raw text when the model sent something unparseable."""

ToolErrorStatus = Literal[
    "failed", "blocked", "timeout", "rate_limited", "rejected", "cancelled"
]


class ToolStart(_ServerFrame):
    type: Literal["tool_start"] = "tool_start"
    tool_call_id: str
    tool_name: str
    arguments: ToolArguments
    step: int


class ToolComplete(_ServerFrame):
    type: Literal["tool_complete"] = "tool_complete"
    tool_call_id: str
    tool_name: str
    result: Any
    duration_ms: float
    step: int


class ToolErrorFrame(_ServerFrame):
    type: Literal["tool_error"] = "tool_error"
    tool_call_id: str
    tool_name: str
    error: str
    status: ToolErrorStatus
    duration_ms: float
    step: int


class ToolApprovalRequest(_ServerFrame):
    type: Literal["tool_approval_request"] = "tool_approval_request"
    tool_call_id: str
    tool_name: str
    arguments: ToolArguments
    description: str
    step: int


class TokenStream(_ServerFrame):
    type: Literal["token_stream"] = "token_stream"
    token: str
    is_first: bool
    is_last: bool


class ChatResponse(_ServerFrame):
    type: Literal["chat_response"] = "chat_response"
    message: str


class ResponseComplete(_ServerFrame):
    type: Literal["response_complete"] = "response_complete"


class SessionReset(_ServerFrame):
    type: Literal["session_reset"] = "session_reset"


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
]


class ErrorFrame(_ServerFrame):
    type: Literal["error"] = "error"
    message: str
    error_type: ErrorType


ServerMessage = Annotated[
    SessionReady
    | AgentUpdate
    | ToolStart
    | ToolComplete
    | ToolErrorFrame
    | ToolApprovalRequest
    | TokenStream
    | ChatResponse
    | ResponseComplete
    | SessionReset
    | ErrorFrame,
    Field(discriminator="type"),
]
server_message_adapter: TypeAdapter[ServerMessage] = TypeAdapter(ServerMessage)


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
