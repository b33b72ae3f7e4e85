"""The `AgentLoop` seam and the values that cross it.

Every run — plain chat, tool use, the strict loop, any other strategy — is
an `AgentLoop` (a *strategy*) advancing a `RunState` one phase at a time.
`advance(ctx)` runs the phase `ctx.state.phase` names, sets the next one and
returns a `Decision`:

- `Continue` — go on with the next phase;
- `Final(answer, reason, why)` — the run ends (`answer` None: the model
  writes the final answer now, told `why`);
- `Stopped(mode)` — a stop ends the run;
- `AwaitInput(question)` / `AwaitApproval(approval)` — the run needs the user.

A phase never waits for a person, but for one thing: a tool that asks the
user in the middle of its call (`ctx.ask_in_phase`, an MCP server's
elicitation), which pauses the run's clocks meanwhile. Otherwise the driver
(`agent/driver.py`) alone waits, racing the stop events, and records how the
wait ended in `state.resolution`, which the next phase reads. Progress is
reported through `ctx.emit` with payloads from `backend.protocol`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from backend.agent.state import (
    PendingApproval,
    PendingQuestion,
    RunState,
    WaitOutcome,
)
from backend.history import History
from backend.llm.base import Usage
from backend.pauses import Pauses
from backend.protocol import CompletionReason, FileInfo, RunEvent, StopMode
from backend.telemetry.signals import NO_TELEMETRY, Telemetry

Emit = Callable[[RunEvent], None]
"""Reports a run event; never blocks and never fails (safe during cleanup)."""
AskInPhase = Callable[[PendingQuestion, bool], Awaitable[WaitOutcome]]
"""Asks `question` (announced unless the bool says it is shown already) and
waits: the answer, a decline, the deadline or a graceful stop; a shutdown
raises `RunSuspended` instead."""


@dataclass(slots=True)
class AgentContext:
    """One run as a strategy sees it: its state, the conversation, the sink."""

    state: RunState
    history: History
    emit: Emit
    resumed: bool = False
    """True during the first phase of a run continued from a checkpoint: what
    the state says was under way may have happened in a process now gone."""
    files: Sequence[FileInfo] = ()
    """The conversation's files as they are now (the session's own list,
    which grows as files come): the manifest each reason prompt shows."""
    held: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    """Frames emitted inside are shown to clients only at its end (the
    session's `holding`): the driver wraps a question or an approval request
    and the checkpoint that stores it, so a page reloaded anywhere finds it."""
    epoch: int | None = None
    """The fencing epoch its conversation is owned at here (None: no store);
    tools that change data pass it to the store with their idempotency key."""
    pauses: Pauses = field(default_factory=Pauses)
    """Its waits for a person inside a phase: no clock of the run counts them."""
    ask_in_phase: AskInPhase | None = None
    """Shows a question asked inside a phase (a tool call's) and waits for
    the reply (the driver's; None: nobody can be asked)."""
    telemetry: Telemetry = NO_TELEMETRY
    """Where the run's phases, waits and tool calls are traced and counted."""
    waited_s: dict[str, float] = field(default_factory=dict)
    """Tool call id → how long a person took to approve it (for its span)."""
    final_tokens: int | None = None
    """The most output tokens the final answer may use (a run that reached
    its budget: the reserved allowance); None: the model's own limit."""


# ------------------------------------------------------------------ decisions


@dataclass(frozen=True, slots=True)
class Continue:
    """Go on to the next phase.

    `stoppable` False: the next phase finishes what this one began (a checked
    tool call that is about to run), so a graceful stop waits for it.
    """

    stoppable: bool = True


@dataclass(frozen=True, slots=True)
class Final:
    """End the run. `answer` None means: write a final answer now."""

    answer: str | None
    reason: CompletionReason
    why: str = ""


@dataclass(frozen=True, slots=True)
class Stopped:
    mode: StopMode


@dataclass(frozen=True, slots=True)
class AwaitInput:
    question: PendingQuestion


@dataclass(frozen=True, slots=True)
class AwaitApproval:
    approval: PendingApproval


Decision = Continue | Final | Stopped | AwaitInput | AwaitApproval


@dataclass(frozen=True, slots=True)
class AgentResult:
    """How a run ended, for `ChatService` to finish it."""

    answer: str | None
    reason: CompletionReason
    steps: int
    usage: Usage
    stop_mode: StopMode | None = None
    error: str | None = None


# ------------------------------------------------------------------ the seam


class AgentLoop(Protocol):
    """A strategy: how a run gets from the user's message to an answer."""

    name: str
    description: str
    uses_tools: bool
    """Whether the model may call tools in this strategy's runs."""
    loop: bool
    """Whether its runs go step by step within a budget (an agent loop a
    `chat` may name as `loop_strategy`); False: a fixed sequence of phases
    the request's mode chooses (`retrieve`)."""

    def first_phase(self, state: RunState) -> str:
        """The phase a new run starts in."""
        ...

    async def advance(self, ctx: AgentContext) -> Decision:
        """Run the phase `ctx.state.phase` names; set the next one."""
        ...

    async def final_answer(self, ctx: AgentContext, why: str) -> str:
        """Have the model write the final answer (streamed); "" if it wrote none."""
        ...
