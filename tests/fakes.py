"""Test doubles that implement the real seams: a scripted LLM and test tools."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel, Field

from backend.agent.run_control import RunControl
from backend.errors import ToolError
from backend.llm.base import (
    Completion,
    LLMRequest,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)
from backend.protocol import StopMode
from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry


@dataclass
class Hang:
    """A reply that never comes; the test sees the call start and get cancelled."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)


Step = Completion | str | Hang | Exception | Callable[[LLMRequest], Completion]


SCRIPTED: list[ScriptedLLM] = []
"""Every `ScriptedLLM` made by the running test: `tests/conftest.py` checks
at its end that each was asked for all it was scripted to answer."""


class ScriptedLLM:
    """Answers each call with the next scripted step and records every request.

    A step the code never asked for is a failure of the test (a script that
    says more than happens hides a change of behaviour): `assert_complete`,
    called for every test by `tests/conftest.py`."""

    def __init__(self, *steps: Step, model: str = "scripted-model") -> None:
        self._steps: list[Step] = list(steps)
        self._model = model
        self.requests: list[LLMRequest] = []
        self.closed = False
        SCRIPTED.append(self)

    def assert_complete(self) -> None:
        """Every scripted step was asked for."""
        if self._steps:
            shown = ", ".join(repr(step)[:60] for step in self._steps[:3])
            raise AssertionError(
                f"ScriptedLLM: {len(self._steps)} scripted replies were never "
                f"asked for (after {len(self.requests)} calls): {shown}"
            )

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return "scripted"

    @property
    def purposes(self) -> list[str]:
        return [r.purpose for r in self.requests]

    def add(self, *steps: Step) -> None:
        self._steps.extend(steps)

    async def complete(self, request: LLMRequest) -> Completion:
        self.requests.append(request)
        if not self._steps:
            raise AssertionError(
                f"ScriptedLLM: no reply scripted for call #{len(self.requests)} "
                f"({request.purpose})"
            )
        step = self._steps.pop(0)
        if isinstance(step, Hang):
            step.started.set()
            try:
                await asyncio.Event().wait()
            finally:
                step.cancelled.set()
        if isinstance(step, Exception):
            raise step
        if isinstance(step, str):
            return Completion(content=step, usage=_usage(step))
        if isinstance(step, Completion):
            return step
        assert callable(step)
        return step(request)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        completion = await self.complete(request)
        for word in _pieces(completion.content):
            yield TextDelta(text=word)
        yield completion

    async def aclose(self) -> None:
        self.closed = True


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [
        w if i == len(words) - 1 else w + " " for i, w in enumerate(words) if w or i
    ]


def _usage(text: str) -> Usage:
    tokens = len(text.split())
    return Usage(
        prompt_tokens=10,
        completion_tokens=tokens,
        total_tokens=10 + tokens,
        llm_calls=1,
    )


# ------------------------------------------------------------ reply builders


def reason(
    plan: str = "Use the calculator.",
    *,
    prose: str = "I will work it out.",
    tools: list[str] | None = None,
    finish: bool = False,
    final: str = "",
) -> str:
    control = {
        "plan": plan,
        "tools_to_consider": tools or [],
        "finish": finish,
        "final_answer": final,
    }
    return f"{prose}\n\n```json\n{json.dumps(control)}\n```"


def observe(
    observation: str = "Got it.",
    *,
    prose: str = "The result is in.",
    should_continue: bool = True,
    final: str = "",
) -> str:
    control = {
        "observation": observation,
        "should_continue": should_continue,
        "final_answer": final,
    }
    return f"{prose}\n```json\n{json.dumps(control)}\n```"


_ids = itertools.count(1)


def calls(
    *requested: tuple[str, dict[str, Any] | str], content: str = ""
) -> Completion:
    """A reply asking for tool calls, with fresh ids `call_<n>`."""
    tool_calls = tuple(
        ToolCall(
            id=f"call_{next(_ids)}",
            name=name,
            arguments=args if isinstance(args, str) else json.dumps(args),
        )
        for name, args in requested
    )
    return Completion(content=content, tool_calls=tool_calls, usage=_usage(content))


def asks_which_unit() -> tuple[str | Completion, ...]:
    """A react run that asks "Which unit?" (`request_input`) and, answered,
    finishes with "16.09 km": reason, the question, observe, reason."""
    return (
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("km it is"),
        reason("done", finish=True, final="16.09 km"),
    )


# ------------------------------------------------------------ test tools


class ExpressionArgs(BaseModel):
    expression: str = Field(description="An arithmetic expression.")


class SlowArgs(BaseModel):
    label: str = "slow"


class FailArgs(BaseModel):
    reason: str = "it broke"


@dataclass
class SlowTool:
    """A tool that waits until released; records start and cancellation."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, args: SlowArgs, ctx: ToolContext) -> dict[str, str]:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return {"label": args.label, "status": "done"}


async def _add(args: ExpressionArgs, ctx: ToolContext) -> dict[str, Any]:
    left, _, right = args.expression.partition("+")
    try:
        return {"expression": args.expression, "result": float(left) + float(right)}
    except ValueError as exc:
        raise ToolError(f"cannot add {args.expression!r}") from exc


async def _fail(args: FailArgs, ctx: ToolContext) -> None:
    raise ToolError(args.reason)


def test_registry(slow: SlowTool | None = None) -> ToolRegistry:
    """`add` (read-only), `fail` (always fails) and `slow` (waits for
    release; changes nothing the user would be asked about)."""
    read_only = ToolEffect(read_only=True, idempotent=True, untrusted_result=False)
    return ToolRegistry(
        [
            Tool(
                "add",
                "Add two numbers written as 'a+b'.",
                ExpressionArgs,
                _add,
                read_only,
            ),
            Tool("fail", "Always fails.", FailArgs, _fail, read_only),
            Tool(
                "slow",
                "Waits until released.",
                SlowArgs,
                slow or SlowTool(),
                ToolEffect(requires_approval=False, untrusted_result=False),
            ),
        ]
    )


test_registry.__test__ = False  # type: ignore[attr-defined]


class NoteArgs(BaseModel):
    text: str


class SummaryArgs(BaseModel):
    summary: str


@dataclass
class Saver:
    """A mutating tool that needs approval; records what it saved."""

    saved: list[str] = field(default_factory=list)

    async def __call__(self, args: NoteArgs, ctx: ToolContext) -> dict[str, str]:
        self.saved.append(args.text)
        return {"saved": args.text}


async def _finish(args: SummaryArgs, ctx: ToolContext) -> dict[str, str]:
    return {"summary": args.summary, "status": "done"}


def approval_registry(saver: Saver | None = None) -> ToolRegistry:
    """`add` (read-only), `save` (needs approval) and `finish` (a finalize tool)."""
    return ToolRegistry(
        [
            Tool(
                "add",
                "Add two numbers written as 'a+b'.",
                ExpressionArgs,
                _add,
                ToolEffect(read_only=True, idempotent=True, untrusted_result=False),
            ),
            Tool(
                "save",
                "Save a note (asks the user first).",
                NoteArgs,
                saver or Saver(),
                ToolEffect(requires_approval=True, untrusted_result=False),
            ),
            Tool(
                "finish",
                "Finish with a summary.",
                SummaryArgs,
                _finish,
                ToolEffect(read_only=True, finalize=True),
            ),
        ]
    )


approval_registry.__test__ = False  # type: ignore[attr-defined]


def stops_taken(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set when a run takes a stop (`RunControl.stop`, any run): what a test
    waits on to know the server acted on its control frame."""
    taken = asyncio.Event()
    stop = RunControl.stop

    def stop_and_tell(control: RunControl, mode: StopMode) -> None:
        stop(control, mode)
        taken.set()

    monkeypatch.setattr(RunControl, "stop", stop_and_tell)
    return taken
