"""The agent loop's `agent_update` payloads (tagged by `update_type`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.protocol.values import (
    BudgetDimension,
    BudgetLimits,
    BudgetScope,
    Payload,
)


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
    cached_tokens: int = 0
    """Of `prompt_tokens`, those the model server read from its prompt cache."""
    reasoning_tokens: int = 0
    """Of `completion_tokens`, a reasoning model's thinking."""
    estimated_calls: int = 0
    """Of `llm_calls`, those whose server reported no usage: their tokens
    are the server's estimate, not a count."""
    cost_usd: float | None = None
    """What the calls cost in US dollars by the server's price table; null
    when it has no price for the model (unknown, never guessed)."""


class BaseAgentUpdate(Payload):
    """Every `agent_update` payload."""

    type: Literal["agent_update"] = "agent_update"


class AgentStart(BaseAgentUpdate):
    update_type: Literal["agent_start"] = "agent_start"
    max_steps: int
    strategy: str
    budget: BudgetLimits | None = None
    """The run's budget, when it has a bound (`agent_budget_reached` ends
    it at one)."""


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
    answer_schema: dict[str, Any] | None = None
    """The JSON Schema the answer must fit (a choice, yes/no, a bounded
    number, a small object); None: free text."""
    asked_by: str | None = None
    """Not the model: a tool asks in the middle of its call (an MCP server's
    elicitation), named for the person ("the MCP server 'coffee'"). It may
    be declined or dismissed (`agent_user_input.action`)."""
    url: str | None = None
    """The asker wants the person to open this page (MCP's URL mode): accept
    once it is done there; no text comes back."""


class AgentRequestInputTimeout(BaseAgentUpdate):
    update_type: Literal["agent_request_input_timeout"] = "agent_request_input_timeout"
    step: int
    question_id: str


class AgentInterjection(BaseAgentUpdate):
    """The user's message sent while the run worked (`when_busy: steer`),
    told to the model now, at a phase boundary, as the user's words."""

    update_type: Literal["agent_interjection"] = "agent_interjection"
    step: int
    content: str
    input_id: str


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


class AgentBudgetWarning(BaseAgentUpdate):
    """80 % of a bound of the run's budget is used (once per bound)."""

    update_type: Literal["agent_budget_warning"] = "agent_budget_warning"
    step: int
    dimension: BudgetDimension
    used: float
    limit: float
    scope: BudgetScope
    can_grant: bool
    """`grant_budget` can raise this bound (it is below the server's cap)."""


class AgentBudgetReached(BaseAgentUpdate):
    """A bound is reached: the run ends (reason `budget`) once the model has
    written its final answer within a small reserved allowance."""

    update_type: Literal["agent_budget_reached"] = "agent_budget_reached"
    step: int
    dimension: BudgetDimension
    used: float
    limit: float
    scope: BudgetScope
    can_grant: bool
    """A run continued with more budget may go further (`agent_budget` of
    the next `chat`, up to the server's cap); false at the server's cap or
    the user's daily bound."""
    resets_at: float | None = None
    """`scope` day: when the user's daily budget starts over (epoch s)."""


class AgentBudgetGranted(BaseAgentUpdate):
    update_type: Literal["agent_budget_granted"] = "agent_budget_granted"
    granted: BudgetLimits
    """What was added (less than asked where the cap bounds it)."""
    budget: BudgetLimits
    """The run's budget now."""


StopMode = Literal["immediate", "after_step"]


class AgentStopped(BaseAgentUpdate):
    update_type: Literal["agent_stopped"] = "agent_stopped"
    step: int
    mode: StopMode


CompletionReason = Literal[
    "finished",
    "max_steps",
    "budget",
    "stopped",
    "rejected",
    "timeout",
    "error",
    "interrupted",
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
    | AgentInterjection
    | AgentRequestInputTimeout
    | AgentObserve
    | AgentDuplicateCall
    | AgentStepsGranted
    | AgentMaxStepsReached
    | AgentBudgetWarning
    | AgentBudgetReached
    | AgentBudgetGranted
    | AgentStopped
    | AgentCompletion
    | AgentError
)
