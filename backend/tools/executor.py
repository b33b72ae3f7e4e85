"""Running one tool call: look-up, validation, timeout, honest outcomes.

`ToolExecutor.run` announces the call (`ToolStarted`), executes it and closes
it with `ToolCompleted` or `ToolFailed`. Every failure becomes an outcome the
model is told about; nothing here raises except cancellation, which is
reported as a `cancelled` outcome and then re-raised.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from backend.errors import ToolError
from backend.events import EventSink, ToolCompleted, ToolFailed, ToolStarted
from backend.llm.base import ToolCall
from backend.protocol import ToolArguments, ToolErrorStatus
from backend.tools.base import AnyTool, ToolContext, ToolRegistry
from backend.tools.results import compact

CANCELLED_NOTE = "Cancelled: the user stopped the run before this tool finished."


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What happened to one tool call."""

    call: ToolCall
    arguments: ToolArguments
    status: ToolErrorStatus | None
    result: Any = None
    error: str | None = None
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is None

    def for_model(self, max_chars: int) -> str:
        """The tool message content the model receives (bounded)."""
        if self.ok:
            return compact(self.result, max_chars)
        return compact(f"Error ({self.status}): {self.error}", max_chars)


def parse_arguments(raw: str) -> ToolArguments:
    """The call's arguments as an object, or the raw text if they are not one."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


class ToolExecutor:
    def __init__(
        self,
        registry: ToolRegistry,
        *,
        default_timeout_s: float = 60.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._registry = registry
        self._default_timeout_s = default_timeout_s
        self._clock = clock

    async def run(
        self,
        call: ToolCall,
        ctx: ToolContext,
        emit: EventSink,
        *,
        allowed: Collection[str],
    ) -> ToolOutcome:
        """Announce, execute and report one call; `allowed` = offered names."""
        arguments = parse_arguments(call.arguments)
        emit(ToolStarted(call.id, call.name, arguments, ctx.step))
        started = self._clock()
        try:
            outcome = await self._execute(call, arguments, ctx, allowed)
        except asyncio.CancelledError:
            elapsed = self._elapsed(started)
            emit(
                ToolFailed(
                    call.id, call.name, CANCELLED_NOTE, "cancelled", elapsed, ctx.step
                )
            )
            raise
        outcome = _with_duration(outcome, self._elapsed(started))
        emit(_report(outcome, ctx.step))
        return outcome

    async def _execute(
        self,
        call: ToolCall,
        arguments: ToolArguments,
        ctx: ToolContext,
        allowed: Collection[str],
    ) -> ToolOutcome:
        tool = self._registry.get(call.name)
        if tool is None or call.name not in allowed:
            return _failed(call, arguments, "failed", _unknown_tool(call.name, allowed))
        parsed = _validate(tool, arguments)
        if isinstance(parsed, str):
            return _failed(call, arguments, "failed", parsed)
        return await self._invoke(tool, parsed, call, arguments, ctx)

    async def _invoke(
        self,
        tool: AnyTool,
        args: BaseModel,
        call: ToolCall,
        arguments: ToolArguments,
        ctx: ToolContext,
    ) -> ToolOutcome:
        timeout = tool.effect.timeout_s or self._default_timeout_s
        try:
            async with asyncio.timeout(timeout):
                result = await tool(args, ctx)
        except TimeoutError:
            return _failed(call, arguments, "timeout", f"timed out after {timeout:g}s")
        except ToolError as exc:
            return _failed(call, arguments, "failed", str(exc))
        except Exception as exc:  # a tool's bug must not take the run down
            detail = f"{type(exc).__name__}: {exc}"
            return _failed(call, arguments, "failed", f"the tool crashed ({detail})")
        return ToolOutcome(call, arguments, None, result=_jsonable(result))

    def _elapsed(self, started: float) -> float:
        return round((self._clock() - started) * 1000, 3)


def _validate(tool: AnyTool, arguments: ToolArguments) -> BaseModel | str:
    if isinstance(arguments, str):
        return f"arguments for {tool.name} are not a JSON object: {arguments[:200]!r}"
    try:
        parsed: BaseModel = tool.args_model.model_validate(arguments)
        return parsed
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
            for err in exc.errors()
        )
        return f"invalid arguments for {tool.name}: {problems}"


def _unknown_tool(name: str, allowed: Collection[str]) -> str:
    offered = ", ".join(sorted(allowed)) or "none"
    return f"there is no tool named {name!r} here; available tools: {offered}"


def _failed(
    call: ToolCall, arguments: ToolArguments, status: ToolErrorStatus, error: str
) -> ToolOutcome:
    return ToolOutcome(call, arguments, status, error=error)


def _with_duration(outcome: ToolOutcome, duration_ms: float) -> ToolOutcome:
    return ToolOutcome(
        outcome.call,
        outcome.arguments,
        outcome.status,
        outcome.result,
        outcome.error,
        duration_ms,
    )


def _report(outcome: ToolOutcome, step: int) -> ToolCompleted | ToolFailed:
    call = outcome.call
    if outcome.ok:
        return ToolCompleted(
            call.id, call.name, outcome.result, outcome.duration_ms, step
        )
    assert outcome.status is not None and outcome.error is not None
    return ToolFailed(
        call.id, call.name, outcome.error, outcome.status, outcome.duration_ms, step
    )


def _jsonable(value: Any) -> Any:
    """Tool results travel as JSON; models become dicts, the rest str()."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=str))
    return value
