"""Drive one run directly (a strategy, a `RunState`, a `RunDriver`), recording
every payload it reports, the checkpoints it saves and its result."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Self

from backend.agent.config import LoopConfig
from backend.agent.driver import RunDriver
from backend.agent.kit import LoopKit
from backend.agent.loop import AgentContext, AgentLoop, AgentResult
from backend.agent.registry import StrategyRegistry
from backend.agent.run_control import RunControl, UserAnswer
from backend.agent.state import RunRequest, RunState
from backend.app import default_strategies
from backend.history import History
from backend.llm.base import LLMClient, Message
from backend.prompts import PromptProvider
from backend.protocol import (
    AgentRequestInput,
    RunEvent,
    ToolApprovalRequest,
    ToolComplete,
    ToolError,
    ToolStart,
)
from backend.tools.base import ToolRegistry
from backend.tools.config import ExecutorConfig
from backend.tools.executor import ToolExecutor

QUESTION = "What is 2+3?"


def make_kit(
    llm: LLMClient,
    registry: ToolRegistry,
    executor: ToolExecutor | None = None,
    **config: Any,
) -> LoopKit:
    executor = executor or ToolExecutor(registry, ExecutorConfig(retry_backoff_s=0))
    return LoopKit.build(
        llm, registry, executor, PromptProvider(), LoopConfig(**config)
    )


def strategies(
    llm: LLMClient, registry: ToolRegistry, **config: Any
) -> StrategyRegistry:
    return default_strategies(make_kit(llm, registry, **config))


def label(event: RunEvent) -> str:
    """`AgentReason`, `ToolStart:add`, `ToolError:add:cancelled`, …"""
    name = type(event).__name__
    if isinstance(event, ToolStart | ToolComplete | ToolApprovalRequest):
        return f"{name}:{event.tool_name}"
    if isinstance(event, ToolError):
        return f"{name}:{event.tool_name}:{event.status}"
    return name


class Run:
    """One run of `strategy`, recorded."""

    def __init__(
        self,
        strategy: AgentLoop,
        *,
        question: str = QUESTION,
        max_steps: int = 10,
        cap: int = 50,
        agent: bool = True,
        read_only: bool = False,
        selected_tools: Sequence[str] | None = None,
        history: Sequence[Message] = (),
    ) -> None:
        self.strategy = strategy
        self.events: list[RunEvent] = []
        self.history = History([*history, Message.user(question)])
        self.state = RunState(
            run_id="r1",
            session_id="s1",
            strategy=strategy.name,
            request=RunRequest(
                content=question,
                agent=agent,
                read_only=read_only,
                selected_tools=tuple(selected_tools) if selected_tools else None,
            ),
            max_steps=max_steps,
            max_steps_cap=cap,
        )
        self.control = RunControl()
        self.on_event: Callable[[RunEvent], None] = lambda event: None
        self.checkpoints: list[tuple[str, tuple[Message, ...]]] = []

    @classmethod
    def restore(
        cls, strategy: AgentLoop, state_json: str, messages: Sequence[Message]
    ) -> Self:
        """A run continued from a checkpoint: its state's JSON and its history."""
        run = cls(strategy)
        run.state = RunState.from_json(state_json)
        run.history = History(messages)
        return run

    def emit(self, event: RunEvent) -> None:
        self.events.append(event)
        self.on_event(event)

    async def _save(self, ctx: AgentContext) -> None:
        self.checkpoints.append((ctx.state.to_json(), ctx.history.messages))

    def driver(self) -> RunDriver:
        ctx = AgentContext(self.state, self.history, self.emit)
        return RunDriver(self.strategy, ctx, self.control, checkpoint=self._save)

    async def go(self) -> AgentResult:
        return await self.driver().run()

    def names(self) -> list[str]:
        return [label(e) for e in self.events]

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def answer_with(self, content: str) -> None:
        """Answer every question the run asks with `content`."""
        self.on_event = lambda e: (
            self.control.answer(UserAnswer(e.question_id, content))
            if isinstance(e, AgentRequestInput)
            else None
        )

    def approve_with(self, approved: bool, reason: str | None = None) -> None:
        """Decide every approval the run asks for."""
        self.on_event = lambda e: (
            self.control.resolve_approval(e.tool_call_id, approved, reason)
            if isinstance(e, ToolApprovalRequest)
            else None
        )
