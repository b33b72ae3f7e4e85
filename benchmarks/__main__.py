"""Measure the server's own overhead per agent step.

The LLM here answers instantly (a deterministic in-process fake that speaks
the reason → act → observe protocol), and the tool does nothing, so whatever
time a step takes is loopwire's: prompt rendering, control parsing, tool
execution plumbing, frame building, serialisation, and - in the end-to-end
case - the WebSocket round trip through uvicorn to a real client.

    python -m benchmarks [--runs 30] [--steps 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel
from websockets.asyncio.client import connect

from backend.agent.driver import RunDriver
from backend.agent.kit import LoopKit
from backend.agent.loop import AgentContext
from backend.agent.run_control import RunControl
from backend.agent.state import RunRequest, RunState
from backend.agent.strategies.react import ReasonActObserve
from backend.app import create_app
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
from backend.settings import Settings
from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from backend.tools.executor import ToolExecutor


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


async def bench_loop(runs: int, steps: int) -> list[float]:
    """In-process: the loop alone, events dropped. Returns ms per step per run."""
    registry = _registry()
    kit = LoopKit.build(
        InstantLLM(steps), registry, ToolExecutor(registry), PromptProvider()
    )
    loop = ReasonActObserve(kit)
    per_step: list[float] = []
    for _ in range(runs):
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
        per_step.append((time.perf_counter() - started) * 1000 / result.steps)
        if result.steps != steps or result.reason != "finished":
            raise RuntimeError(f"the benchmark run went wrong: {result}")
    return per_step


async def bench_websocket(runs: int, steps: int) -> tuple[list[float], int]:
    """End to end over uvicorn + a real WebSocket client; ms per step per run."""
    from tests.live_server import serving

    settings = Settings(_env_file=None, agent_max_steps_cap=steps + 1)  # type: ignore[call-arg]
    app = create_app(settings, llm=InstantLLM(steps), registry=_registry())
    per_step: list[float] = []
    frames = 0
    async with serving(app) as server, connect(server.url("/ws", "ws")) as ws:
        await ws.recv()
        for _ in range(runs):
            request = {
                "type": "chat",
                "content": "go",
                "agent_mode": True,
                "agent_max_steps": steps + 1,
            }
            started = time.perf_counter()
            await ws.send(json.dumps(request))
            count = await _drain(ws)
            per_step.append((time.perf_counter() - started) * 1000 / steps)
            expected = 1 + steps * 5 + 3  # start, 5 frames a step, the 3 ending frames
            if count != expected:
                raise RuntimeError(f"expected {expected} frames in a run, got {count}")
            frames += count
            await ws.send(json.dumps({"type": "reset_session"}))
            await ws.recv()
    return per_step, frames


class HangingLLM(InstantLLM):
    """Every call hangs until cancelled: what Stop has to cut through."""

    def __init__(self) -> None:
        super().__init__(steps=1)
        self.started = asyncio.Event()

    async def complete(self, request: LLMRequest) -> Completion:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def bench_stop(runs: int) -> list[float]:
    """ms from sending `stop` during an LLM call to `response_complete`."""
    from tests.live_server import serving

    llm = HangingLLM()
    settings = Settings(_env_file=None, database_url="sqlite://")  # type: ignore[call-arg]
    app = create_app(settings, llm=llm, registry=_registry())
    samples: list[float] = []
    async with serving(app) as server, connect(server.url("/ws", "ws")) as ws:
        await ws.recv()
        for _ in range(runs):
            llm.started.clear()
            await ws.send(
                json.dumps({"type": "chat", "content": "go", "agent_mode": True})
            )
            await llm.started.wait()
            started = time.perf_counter()
            await ws.send(json.dumps({"type": "agent_control", "action": "stop"}))
            await _drain(ws)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


async def _drain(ws: Any) -> int:
    count = 0
    while True:
        frame = json.loads(await ws.recv())
        count += 1
        if frame["type"] == "response_complete":
            return count


def _report(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"{name:<34} median {statistics.median(samples):7.3f} ms/step   "
        f"p95 {p95:7.3f}   min {ordered[0]:7.3f}"
    )


async def main(runs: int, steps: int) -> None:
    await bench_loop(3, steps)  # warm-up
    loop_samples = await bench_loop(runs, steps)
    ws_samples, frames = await bench_websocket(runs, steps)
    print(f"loopwire overhead, {runs} runs x {steps} steps, instant LLM, no-op tool")
    print(_report("agent loop (in-process)", loop_samples))
    print(_report("end to end (uvicorn + WebSocket)", ws_samples))
    print(f"frames per run: {frames // runs}")
    stop_samples = await bench_stop(runs)
    median_stop = statistics.median(stop_samples)
    print(
        f"{'stop → response_complete':<34} median {median_stop:7.3f} ms"
        f"        max {max(stop_samples):7.3f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--steps", type=int, default=10)
    options = parser.parse_args()
    asyncio.run(main(options.runs, options.steps))
