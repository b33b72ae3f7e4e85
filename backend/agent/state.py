"""`RunState`: everything needed to continue a run, as one serialisable value.

A run is a strategy advancing a `RunState` one phase at a time; the driver
(`agent/driver.py`) checkpoints it after every phase and before every wait.
With the state and the session's history alone, a run can be continued — in
another task, after a restart, on another instance — with no tool that
already completed run again: a call is recorded in `outcomes` (and leaves
`queue`) in the same phase that ran it.

The state is a plain pydantic model, mutated in place while a phase runs
(assignment is not validated: it costs nothing on the hot path) and dumped to
JSON at phase boundaries.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from backend.budget import UNBOUNDED, Budget, Dimension
from backend.llm.base import ToolCall, ToolSpec, Usage
from backend.prompts import ResultLine
from backend.protocol import (
    AnswerAction,
    CompletionReason,
    Remember,
    SourceRef,
    StopMode,
    ToolArguments,
    UntrustedSource,
    UpcomingApproval,
)
from backend.tools.outcome import ToolOutcome

START = "start"
"""The phase of a run that has not begun: the driver announces it first."""
ENDING = "ending"
"""The phase of a run whose `ending` is decided: only the final answer is left."""
MAX_UNTRUSTED = 20
"""Untrusted reads a run remembers by name (it stays tainted after more)."""


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RunRequest(_Value):
    """What the user asked for, as the run needs it."""

    content: str
    agent: bool
    """An agent run shows its phases (`agent_update` frames); a plain one
    shows only tool frames, tokens and the answer."""
    selected_tools: tuple[str, ...] | None = None
    read_only: bool = False
    model: str | None = None
    temperature: float | None = None
    save_chat: bool = True
    include_history: bool = True
    system_prompt: str | None = None
    """The client's instructions, sent after the server's system prompt."""
    user_instructions: str = ""
    """The user's own custom instructions, for all their conversations, and
    the conversation's, read when the run starts (`chat/instructions.py`)."""
    conversation_instructions: str = ""
    data_sources: tuple[str, ...] | None = None
    """The data sources `search_documents` may search in this run (None: all)."""
    client_tools: tuple[ToolSpec, ...] = ()
    """Tools the client runs itself (`agent/client_tools.py`)."""


class PendingQuestion(_Value):
    """A question the run asked the user and waits on."""

    question_id: str
    question: str
    step: int
    timeout_s: float
    deadline: float
    """Wall-clock time (epoch seconds) after which the wait times out."""
    tool_call_id: str | None = None
    """The `request_input` call it answers, or None for a question asked in
    a control block (llm_only)."""
    client_tool: str | None = None
    """Not a question: the run waits for the result of its call
    `tool_call_id` of this client tool (`agent/client_tools.py`)."""
    arguments: ToolArguments | None = None
    """The client tool call's arguments."""
    answer_schema: dict[str, Any] | None = None
    """The JSON Schema the answer must fit (`answer_forms.py`); None:
    free text."""
    asked_by: str | None = None
    """Asked by the tool call `tool_call_id` in the middle of its run (an MCP
    server's elicitation, `agent/elicitations.py`), not by the model: this
    names the asker for the person."""
    url: str | None = None
    """The page the asker wants the person to open (MCP's URL mode)."""


class PendingApproval(_Value):
    """A tool call waiting for the user's approval."""

    tool_call_id: str
    tool_name: str
    arguments: ToolArguments
    description: str
    step: int
    deadline: float
    in_doubt: bool = False
    """The call was running when its server stopped and may have taken
    effect: approving runs it again, declining reports it as may-have-run."""
    untrusted_sources: tuple[UntrustedSource, ...] = ()
    """What the run had read that the user did not write, when it asked."""
    also: tuple[UpcomingApproval, ...] = ()
    """The reply's later calls that will ask too, shown with this one: each
    may be decided now (`RunState.decided_ahead`)."""

    def upcoming(self, tool_call_id: str) -> UpcomingApproval | None:
        return next((a for a in self.also if a.tool_call_id == tool_call_id), None)


class Answered(_Value):
    kind: Literal["answered"] = "answered"
    content: str
    error: bool = False
    """A client tool's result that says its call failed."""
    action: AnswerAction = "accept"
    """A question declined or dismissed instead (`content` is then empty)."""

    def said(self) -> str:
        """The answer, or what the model hears when none was given."""
        if self.action == "decline":
            return "(The user declined to answer this question.)"
        if self.action == "cancel":
            return "(The user dismissed this question without answering.)"
        return self.content


class Approved(_Value):
    kind: Literal["approved"] = "approved"
    arguments: dict[str, Any] | None = None
    """The arguments the person approved instead of the model's."""
    remember: Remember | None = None
    """The tool is allowed from now on (`chat/tool_grants.py`)."""


class Declined(_Value):
    kind: Literal["declined"] = "declined"
    reason: str | None = None


class TimedOut(_Value):
    kind: Literal["timed_out"] = "timed_out"


class StopRequested(_Value):
    kind: Literal["stop_requested"] = "stop_requested"


WaitOutcome = Annotated[
    Answered | Approved | Declined | TimedOut | StopRequested,
    Field(discriminator="kind"),
]
"""How a wait ended. The driver records it in `RunState.resolution`; the
phase that asked reads it when the run goes on (`StopRequested` the driver
handles itself)."""


class AskedInCall(_Value):
    question: PendingQuestion
    reply: WaitOutcome | None = None


class StepRecord(BaseModel):
    """The step in progress: what reason planned, what act did."""

    plan: str = ""
    tools_to_consider: list[str] = Field(default_factory=list)
    results: list[ResultLine] = Field(default_factory=list)
    act_note: str = ""
    prose: str = ""


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One phase as it ran: for the run's record and for operators.

    A plain dataclass (pydantic still validates and dumps it as part of the
    state): one is made per phase, so it should cost next to nothing.
    """

    step: int
    phase: str
    started_at: float
    duration_ms: float
    llm_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    """The phase's model calls' tokens (`Usage`), so a run's record says
    which phase spent what."""


class InFlight(_Value):
    """The queue's head once announced (`tool_start` sent), until it finishes."""

    tool_call_id: str
    started_at: float


class Ending(_Value):
    """How the run ends: its answer (None: the model writes one now), why."""

    answer: str | None
    reason: CompletionReason
    why: str = ""
    stop_mode: StopMode | None = None
    error: str | None = None


class RunState(BaseModel):
    """A run's whole state; see the module docstring."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    """The shape of this model; bumped (with a migration) when it changes."""
    run_id: str
    session_id: str
    owner: str = "local"
    """Whose conversation this is (tools keep per-owner data, such as notes)."""
    strategy: str
    request: RunRequest
    history_start: int = 0
    """Where this run's model input begins in the history (its own message,
    when the request excludes the conversation before it)."""
    request_at: int | None = None
    """Where this run's own user message sits in the history (an edit cuts
    the history there: `ChatMessage.replace_from`). None in checkpoints
    written before runs knew it."""
    phase: str = START
    step: int = 0
    max_steps: int
    max_steps_cap: int
    model: str = ""
    """The model its calls go to (the request's, or the server's)."""
    budget: Budget = UNBOUNDED
    """What the run may spend (`agent/budget_meter.py`); a grant raises it."""
    budget_cap: Budget = UNBOUNDED
    """The most a grant may raise `budget` to: the server's cap per run,
    and what the user had left of the day when the run started."""
    budget_day: list[Dimension] = Field(default_factory=list)
    """The bounds that are what the user had left of the day (no grant can
    raise them; reaching one says when the day's budget starts over)."""
    budget_warned: list[Dimension] = Field(default_factory=list)
    """The bounds `agent_budget_warning` was sent for."""

    # what the strategy is doing
    record: StepRecord = Field(default_factory=StepRecord)
    plan: list[str] = Field(default_factory=list)
    plan_index: int = 0
    plan_revision: int = 0
    observations: list[str] = Field(default_factory=list)

    # tool calls
    queue: list[ToolCall] = Field(default_factory=list)
    """This step's calls that have not finished, in order; the head is next."""
    in_flight: InFlight | None = None
    batch: list[str] = Field(default_factory=list)
    """The ids of read-only calls announced together, the head (`in_flight`)
    first, that run at once in the next phase (`agent/tool_batch.py`): all
    in flight until settled. Empty: one call at a time."""
    outcomes: list[ToolOutcome] = Field(default_factory=list)
    seen: dict[str, int] = Field(default_factory=dict)
    """Canonical call key → index in `outcomes`: no call runs twice in a run."""
    failures: int = 0
    """Consecutive failed tool calls."""
    duplicates: int = 0

    # what people allowed
    granted: list[str] = Field(default_factory=list)
    """Tools that run without asking in this run (`chat/tool_grants.py`),
    unless it read what the user did not write (`untrusted`)."""
    decided_ahead: dict[str, Approved | Declined] = Field(default_factory=dict)
    """Tool call id → a person's decision on a call asked about ahead of its
    turn (`PendingApproval.also`), taken when the call comes up."""
    edited: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Tool call id → the arguments a person approved instead of the model's."""
    interjected: list[str] = Field(default_factory=list)
    """The held inputs told to the run (`chat/inbox.py`), in order."""

    # waits
    pending_question: PendingQuestion | None = None
    pending_approval: PendingApproval | None = None
    resolution: WaitOutcome | None = None
    asked_in_call: AskedInCall | None = None
    """A question the call in flight asked mid-call when the run was parked
    or its process died, and the reply if one came since: given to the same
    question when the call is made again (`agent/elicitations.py`)."""
    ending: Ending | None = None
    """Set when a phase ends the run; a run resumed with it only finishes."""

    # counters and the record
    parse_failures: int = 0
    usage: Usage = Field(default_factory=Usage)
    _streamed: list[str] = PrivateAttr(default_factory=list)
    """The pieces of the stream in progress (kept as the answer if a stop
    cuts it), joined once when taken: adding to one string would copy it
    each time (a 20 MB answer took 17 s). Never in a checkpoint, which is
    taken between phases."""
    started_at: float = Field(default_factory=time.time)
    active_ms: float = 0.0
    """Time spent working (waits for the user excluded), across resumptions."""
    trace: list[TraceEntry] = Field(default_factory=list)
    trace_context: str | None = None
    """The W3C `traceparent` of the run's first span (when traced): where it
    is continued after a restart or on another instance, as one trace."""
    sources: list[SourceRef] = Field(default_factory=list)
    """What the run's citing tools found (`chat_response.sources`)."""
    untrusted: list[UntrustedSource] = Field(default_factory=list)
    """Tool results the run read whose text the user did not write (at most
    `MAX_UNTRUSTED`, the first ones): once there is one, tools that change
    something ask, and every approval request names them."""

    @property
    def waiting(self) -> bool:
        """The run waits for the user (and no answer has come yet)."""
        pending = self.pending_question is not None or self.pending_approval is not None
        return pending and self.resolution is None

    def grant(self, steps: int) -> int:
        """Raise the budget by `steps`, up to the cap; return how many it got."""
        before = self.max_steps
        self.max_steps = min(before + steps, self.max_steps_cap)
        return self.max_steps - before

    def read_untrusted(self, source: UntrustedSource) -> None:
        """Remember that the run read `source` (once; the first few)."""
        known = any(
            (s.tool_name, s.origin) == (source.tool_name, source.origin)
            for s in self.untrusted
        )
        if not known and len(self.untrusted) < MAX_UNTRUSTED:
            self.untrusted.append(source)

    def stream_sink(self) -> Callable[[str], None]:
        """Where the pieces of the reply being streamed go: looked up once
        a call, not once a piece (a private attribute of a pydantic model
        is a `__getattr__` away: 4 % of a streamed answer's CPU)."""
        return self._streamed.append

    def drop_streamed(self) -> bool:
        """Forget the text streamed since the last take (without joining
        it); whether there was any."""
        had = bool(self._streamed)
        self._streamed.clear()
        return had

    def take_streamed(self) -> str:
        """The text streamed since the last take, and forget it."""
        text = "".join(self._streamed)
        self._streamed.clear()
        return text

    @model_validator(mode="before")
    @classmethod
    def _drop_streamed(cls, data: Any) -> Any:
        """Checkpoints written before the stream was kept in pieces have a
        `streamed` key (always empty between phases)."""
        if isinstance(data, dict) and data.get("streamed") == "":
            data = {k: v for k, v in data.items() if k != "streamed"}
        return data

    def take_resolution(self) -> WaitOutcome | None:
        """The outcome of the last wait, once."""
        outcome, self.resolution = self.resolution, None
        return outcome

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> RunState:
        return cls.model_validate_json(text)
