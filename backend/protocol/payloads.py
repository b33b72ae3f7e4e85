"""Server → client payloads, other than the agent loop's `agent_update`s:
the session, tool calls, replies, files and errors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.protocol.agent_updates import UsageInfo
from backend.protocol.values import BudgetLimits, Payload, ToolArguments


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_steps_cap: int
    default_max_steps: int
    max_message_bytes: int
    run_budget: BudgetLimits = BudgetLimits()
    """The server's budget of every run (its cap: `agent_budget` and
    `grant_budget` go no higher); null fields are unbounded."""
    daily_budget: BudgetLimits = BudgetLimits()
    """Each user's budget per day (UTC) unless the server gives them their
    own (`GET /api/usage` says a user's); null fields are unbounded."""


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


class SessionReady(Payload):
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


ToolErrorStatus = Literal[
    "failed", "blocked", "timeout", "rate_limited", "rejected", "cancelled"
]


class ToolStart(Payload):
    type: Literal["tool_start"] = "tool_start"
    tool_call_id: str
    tool_name: str
    arguments: ToolArguments
    step: int


class ToolComplete(Payload):
    type: Literal["tool_complete"] = "tool_complete"
    tool_call_id: str
    tool_name: str
    result: Any
    duration_ms: float
    step: int


class ToolError(Payload):
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


class UpcomingApproval(BaseModel):
    """A later call of the same reply that will ask for approval too."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_call_id: str
    tool_name: str
    arguments: ToolArguments
    description: str


class ToolApprovalRequest(Payload):
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
    also: list[UpcomingApproval] = Field(default_factory=list)
    """The reply's later calls that will ask too, in order: each may be
    decided now, while this request waits, with a `tool_approval_response`
    for its id (send those before this one's); one not decided by the time
    its turn comes is asked then."""


class ToolApprovalDecided(Payload):
    """A "yes" to an approval request that changed something, before the
    call runs: `arguments` are what the person approved instead of the
    model's (the call runs with them); `remember` says the tool runs
    without asking from now on, in this conversation or for the user."""

    type: Literal["tool_approval_decided"] = "tool_approval_decided"
    tool_call_id: str
    tool_name: str
    step: int
    arguments: dict[str, Any] | None = None
    remember: Literal["conversation", "user"] | None = None


class PendingInput(Payload):
    """A message sent while a run worked (`chat.when_busy`), as it goes:
    `queued` (kept; `position` 0 is used first), `started` (its run began:
    `started_run_id`), `cancelled` (dropped unused: by the user, a reset,
    or because it could not run: `reason`). A steer told to the run shows
    there as `agent_interjection`."""

    type: Literal["pending_input"] = "pending_input"
    input_id: str
    mode: Literal["queue", "steer", "interrupt"]
    content: str
    agent_mode: bool = False
    """The message asks for an agent run (as its `chat` said)."""
    state: Literal["queued", "started", "cancelled"]
    position: int = 0
    started_run_id: str | None = None
    reason: str | None = None


class ClientToolCall(Payload):
    """The model called a tool the client declared (`ChatMessage.
    client_tools`): run it and send its `tool_result`; the run waits up to
    `timeout_s` (then the model is told no result came)."""

    type: Literal["client_tool_call"] = "client_tool_call"
    tool_call_id: str
    tool_name: str
    arguments: ToolArguments
    step: int
    timeout_s: float


class TokenStream(Payload):
    type: Literal["token_stream"] = "token_stream"
    token: str
    is_first: bool
    is_last: bool


ThinkingPhase = Literal["chat", "plan", "reason", "act", "observe", "final"]


class Thinking(Payload):
    """A reasoning model's thinking in one call, sent once the call's reply is
    complete and before what the reply leads to; never part of the answer.
    `step` is the agent step (0 outside agent mode)."""

    type: Literal["thinking"] = "thinking"
    step: int
    phase: ThinkingPhase
    content: str


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
    url: str | None = None
    """Where the document opens (`GET /api/sources/{source}/documents/{path}`,
    relative to the server; a PDF at its page)."""


class ChatResponse(Payload):
    type: Literal["chat_response"] = "chat_response"
    message: str
    sources: list[SourceRef] = Field(default_factory=list)
    """The passages the run's tools found (citations), in the order found,
    each once; empty when no tool that cites was used."""
    usage: UsageInfo | None = None
    """What the run's model calls used so far, and cost: every run's, a
    plain one's too (which sends no `agent_completion`)."""


class ResponseComplete(Payload):
    type: Literal["response_complete"] = "response_complete"


class SessionReset(Payload):
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


class FilesUpdate(Payload):
    """The conversation's files changed (an upload, or a tool's artifact):
    all of them, oldest first. Download one with
    `GET /api/conversations/{id}/files/{file_id}`."""

    type: Literal["files_update"] = "files_update"
    files: list[FileInfo]
    added: list[str]
    """The ids of the files this update adds."""


class RunsRemoved(Payload):
    """A `chat` with `replace_from` set these runs aside (oldest first): their
    messages left the conversation's history, kept as a branch that
    `switch_branch` can bring back. Their frames stay in the replay log,
    before this one. Sent before the new run's first frame."""

    type: Literal["runs_removed"] = "runs_removed"
    run_ids: list[str]


class RestoredRun(BaseModel):
    """A run a switch of branches brought back: what its user asked."""

    run_id: str
    request: str
    mode: str | None
    """As the conversations API says: `agent`, `tools`, `retrieve`, `plain`."""


class BranchSwitched(Payload):
    """`switch_branch` was done: the runs `removed` (oldest first) were set
    aside as branch `set_aside`, and the branch's runs came back
    (`restored`, oldest first). The `resent` frames that follow at once are
    the restored runs' frames sent again, with new `seq`s: render them as
    a replay. A frame the store no longer keeps (past the replay window)
    is not among them."""

    type: Literal["branch_switched"] = "branch_switched"
    fork_at: int
    """Where in the history the versions part."""
    set_aside: str
    removed: list[str]
    restored: list[RestoredRun]
    resent: int


ErrorType = Literal[
    "invalid_message",
    "invalid_answer",
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
    "budget_exhausted",
    "store_error",
    "unavailable",
    "moved",
]
"""`invalid_answer`: an answer or an approval's edited arguments that do not
fit the question's or the tool's schema (the wait goes on: send another).
`moved`: the instance a decision (an answer, an approval) reached no longer
owns the conversation, so it was not taken; reconnect and send it again (it
lands on the owner)."""


class Error(Payload):
    type: Literal["error"] = "error"
    message: str
    error_type: ErrorType
    about: str | None = None
    """What the refused message named, if anything: its `question_id`,
    `tool_call_id` or `input_id` (so a client knows which request an
    `invalid_answer` is for)."""
    resets_at: float | None = None
    """`budget_exhausted`: when the user's daily budget starts over (epoch
    seconds)."""
