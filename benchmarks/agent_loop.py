"""The agent loop's own cost per step, in-process.

The `react` strategy under its `RunDriver`, in this process: no server, no
socket, no store, events dropped. The LLM answers at once (`InstantLLM`, a
deterministic fake that speaks the reason → act → observe protocol) and the
tool does nothing, so the time per step is the loop's own: prompt
rendering, control parsing, the tool-call phase with its policies, the run
state and its trace. One sample per run of `steps` steps; every run must
take exactly `steps` steps and finish.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

from pydantic import BaseModel

from backend.agent.driver import RunDriver
from backend.agent.kit import LoopKit
from backend.agent.loop import AgentContext
from backend.agent.run_control import RunControl
from backend.agent.state import RunRequest, RunState
from backend.agent.strategies.react import ReasonActObserve
from backend.history import History
from backend.llm.base import (
    Completion,
    LLMRequest,
    Message,
    StreamEvent,
    TextDelta,
    ToolCall,
)
from backend.prompts import PromptProvider
from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from backend.tools.executor import ToolExecutor
from benchmarks.checks import BenchError
from benchmarks.results import AgentLoop
from benchmarks.stats import Summary

WARM_UP_RUNS = 3


class InstantLLM:
    """Answers every phase at once; finishes after `steps` steps."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    @property
    def model(self) -> str:
        return "instant"

    @property
    def provider(self) -> str:
        return "bench"

    async def complete(self, request: LLMRequest) -> Completion:
        done = _tool_results_this_run(request.messages)
        if request.purpose == "reason":
            control = {
                "plan": "call noop",
                "tools_to_consider": ["noop"],
                "finish": False,
            }
            return Completion(content=f"Thinking.\n```json\n{json.dumps(control)}\n```")
        if request.purpose == "act":
            arguments = json.dumps({"n": done + 1})  # distinct: not a duplicate call
            call = ToolCall(id=f"call_{done + 1}", name="noop", arguments=arguments)
            return Completion(tool_calls=(call,))
        if request.purpose == "observe":
            final = "All done." if done >= self.steps else ""
            control = {
                "observation": "ok",
                "should_continue": not final,
                "final_answer": final,
            }
            return Completion(content=f"Noted.\n```json\n{json.dumps(control)}\n```")
        return Completion(content="All done.")

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        completion = await self.complete(request)
        yield TextDelta(text=completion.content)
        yield completion

    async def aclose(self) -> None:
        return None


def _tool_results_this_run(messages: tuple[Message, ...]) -> int:
    count = 0
    for message in reversed(messages):
        if message.role == "user":
            break
        count += message.role == "tool"
    return count


class NoopArgs(BaseModel):
    n: int = 0


async def _noop(args: NoopArgs, ctx: ToolContext) -> dict[str, int]:
    return {"n": args.n}


def _registry() -> ToolRegistry:
    effect = ToolEffect(read_only=True, idempotent=True)
    return ToolRegistry([Tool("noop", "Does nothing.", NoopArgs, _noop, effect)])


async def _runs(count: int, steps: int) -> list[float]:
    """ms per step, one sample per run."""
    registry = _registry()
    kit = LoopKit.build(
        InstantLLM(steps), registry, ToolExecutor(registry), PromptProvider()
    )
    loop = ReasonActObserve(kit)
    per_step: list[float] = []
    for _ in range(count):
        state = RunState(
            run_id="bench",
            session_id="bench",
            strategy=loop.name,
            request=RunRequest(content="go", agent=True),
            max_steps=steps + 1,
            max_steps_cap=steps + 1,
        )
        ctx = AgentContext(state, History([Message.user("go")]), lambda event: None)
        started = time.perf_counter()
        result = await RunDriver(loop, ctx, RunControl()).run()
        per_step.append((time.perf_counter() - started) * 1000 / steps)
        if result.steps != steps or result.reason != "finished":
            raise BenchError(f"the in-process run went wrong: {result}")
    return per_step


async def measure(runs: int, steps: int) -> AgentLoop:
    await _runs(WARM_UP_RUNS, steps)
    return AgentLoop(
        runs=runs, steps=steps, ms_per_step=Summary.of(await _runs(runs, steps))
    )
