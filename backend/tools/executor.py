"""Running one tool call through every policy, in this order:

1. look the tool up (unknown or not offered → `failed`, read-only → `blocked`)
2. validate the arguments (a specific, friendly error back to the model)
3. rate-limit mutating tools per session (`rate_limited`)
4. ask for approval when the tool requires it (`rejected` / `timeout`)
5. run it with its timeout (`timeout`), retrying idempotent tools on
   transient failures (bounded)
6. run its side-effect hooks once, collecting their notes

`ToolExecutor.run` announces the call (`ToolStarted`), and closes it with
`ToolCompleted` or `ToolFailed`. Every failure becomes an outcome the model is
told about; nothing here raises except cancellation, which is reported as a
`cancelled` outcome and then re-raised. Policy comes only from the tool's
registered `ToolEffect`: no argument or model output can change it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from backend.errors import ToolError
from backend.events import (
    ApprovalRequested,
    EventSink,
    ToolCompleted,
    ToolFailed,
    ToolStarted,
)
from backend.llm.base import ToolCall
from backend.protocol import ToolArguments, ToolErrorStatus
from backend.tools.base import AnyTool, ToolContext, ToolRegistry
from backend.tools.policy import ApprovalDecision, Approver, RateLimiter
from backend.tools.results import compact

log = logging.getLogger(__name__)

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
    attempts: int = 0
    notes: tuple[str, ...] = ()
    """System notes from side-effect hooks, for the conversation."""

    @property
    def ok(self) -> bool:
        return self.status is None

    def for_model(self, max_chars: int) -> str:
        """The tool message content the model receives (bounded)."""
        if self.ok:
            return compact(self.result, max_chars)
        return compact(f"Error ({self.status}): {self.error}", max_chars)


@dataclass(frozen=True, slots=True)
class CallScope:
    """Where a call happens: who may do what, and how to report it."""

    ctx: ToolContext
    emit: EventSink
    allowed: Collection[str]
    read_only: bool = False
    approver: Approver | None = None


@dataclass(frozen=True, slots=True)
class ExecutorConfig:
    default_timeout_s: float = 60.0
    approval_timeout_s: float = 300.0
    max_attempts: int = 3
    retry_backoff_s: float = 0.2
    rate_limit_calls: int = 10
    rate_limit_window_s: float = 60.0


def parse_arguments(raw: str) -> ToolArguments:
    """The call's arguments as an object, or the raw text if they are not one."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


@dataclass
class _Attempt:
    """Mutable bookkeeping for one call through the pipeline."""

    call: ToolCall
    arguments: ToolArguments
    attempts: int = 0
    notes: list[str] = field(default_factory=list)

    def failed(self, status: ToolErrorStatus, error: str) -> ToolOutcome:
        return ToolOutcome(
            self.call, self.arguments, status, error=error, attempts=self.attempts
        )

    def succeeded(self, result: Any) -> ToolOutcome:
        return ToolOutcome(
            self.call,
            self.arguments,
            None,
            result=_jsonable(result),
            attempts=self.attempts,
            notes=tuple(self.notes),
        )


@dataclass(frozen=True, slots=True)
class _Try:
    """One invocation: `status` None means success and `value` is the result."""

    status: ToolErrorStatus | None
    value: Any
    transient: bool = False


class ToolExecutor:
    def __init__(
        self,
        registry: ToolRegistry,
        config: ExecutorConfig = ExecutorConfig(),
        *,
        clock: Callable[[], float] = time.perf_counter,
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        self._registry = registry
        self.config = config
        self._clock = clock
        self._limiter = rate_limiter or RateLimiter(
            config.rate_limit_calls, config.rate_limit_window_s
        )

    async def run(self, call: ToolCall, scope: CallScope) -> ToolOutcome:
        """Announce, execute and report one call."""
        arguments = parse_arguments(call.arguments)
        step = scope.ctx.step
        scope.emit(ToolStarted(call.id, call.name, arguments, step))
        started = self._clock()
        try:
            outcome = await self._execute(_Attempt(call, arguments), scope)
        except asyncio.CancelledError:
            elapsed = self._elapsed(started)
            scope.emit(
                ToolFailed(
                    call.id, call.name, CANCELLED_NOTE, "cancelled", elapsed, step
                )
            )
            raise
        outcome = replace(outcome, duration_ms=self._elapsed(started))
        scope.emit(_report(outcome, step))
        return outcome

    def forget_session(self, session_id: str) -> None:
        self._limiter.forget(session_id)

    # ------------------------------------------------------------ pipeline

    async def _execute(self, attempt: _Attempt, scope: CallScope) -> ToolOutcome:
        tool = self._registry.get(attempt.call.name)
        refusal = _refuse(attempt.call.name, tool, scope)
        if refusal is not None:
            return attempt.failed(*refusal)
        assert tool is not None
        parsed = _validate(tool, attempt.arguments)
        if isinstance(parsed, str):
            return attempt.failed("failed", parsed)
        if not tool.effect.read_only:
            wait_s = self._limiter.acquire(scope.ctx.session_id)
            if wait_s is not None:
                return attempt.failed("rate_limited", self._rate_message(tool, wait_s))
        if tool.effect.requires_approval:
            decision = await self._ask(tool, attempt, scope)
            if decision.status != "approved":
                return attempt.failed(*_declined(tool, decision, self.config))
        return await self._run_with_retries(tool, parsed, attempt, scope.ctx)

    async def _ask(
        self, tool: AnyTool, attempt: _Attempt, scope: CallScope
    ) -> ApprovalDecision:
        if scope.approver is None:
            return ApprovalDecision("rejected", "approvals are not possible here")
        call = attempt.call
        request = ApprovalRequested(
            call.id, tool.name, attempt.arguments, tool.description, scope.ctx.step
        )
        return await scope.approver.wait_for_approval(
            call.id, self.config.approval_timeout_s, lambda: scope.emit(request)
        )

    async def _run_with_retries(
        self, tool: AnyTool, args: BaseModel, attempt: _Attempt, ctx: ToolContext
    ) -> ToolOutcome:
        limit = self.config.max_attempts if tool.effect.idempotent else 1
        while True:
            attempt.attempts += 1
            result = await self._invoke_once(tool, args, ctx)
            if result.status is None:
                await self._side_effects(tool, args, result.value, ctx, attempt)
                return attempt.succeeded(result.value)
            if result.transient and attempt.attempts < limit:
                log.info(
                    "retrying %s after attempt %d: %s",
                    tool.name,
                    attempt.attempts,
                    result.value,
                )
                await asyncio.sleep(
                    self.config.retry_backoff_s * 2 ** (attempt.attempts - 1)
                )
                continue
            return attempt.failed(
                result.status, _with_attempts(result.value, attempt.attempts)
            )

    async def _invoke_once(
        self, tool: AnyTool, args: BaseModel, ctx: ToolContext
    ) -> _Try:
        timeout = tool.effect.timeout_s or self.config.default_timeout_s
        try:
            async with asyncio.timeout(timeout):
                return _Try(None, await tool(args, ctx))
        except TimeoutError:
            return _Try("timeout", f"timed out after {timeout:g}s", transient=True)
        except ToolError as exc:
            return _Try("failed", str(exc), transient=exc.retryable)
        except Exception as exc:  # a tool's bug must not take the run down
            log.warning("tool %s crashed", tool.name, exc_info=True)
            return _Try(
                "failed",
                f"the tool crashed ({type(exc).__name__}: {exc})",
                transient=True,
            )

    async def _side_effects(
        self,
        tool: AnyTool,
        args: BaseModel,
        result: Any,
        ctx: ToolContext,
        attempt: _Attempt,
    ) -> None:
        for hook in tool.side_effects:
            name = getattr(hook, "__name__", type(hook).__name__)
            try:
                note = await hook(args, result, ctx)
            except Exception as exc:
                log.warning(
                    "side effect %s of %s failed", name, tool.name, exc_info=True
                )
                note = f"Side effect '{name}' of {tool.name} failed: {exc}"
            if note:
                attempt.notes.append(note)

    def _rate_message(self, tool: AnyTool, wait_s: float) -> str:
        calls, window = self._limiter.max_calls, self._limiter.window_s
        return (
            f"{tool.name} was not run: at most {calls} changing tool calls per "
            f"{window:g}s in a session; try again in {max(wait_s, 0.1):.1f}s "
            "or continue without it"
        )

    def _elapsed(self, started: float) -> float:
        return round((self._clock() - started) * 1000, 3)


def _refuse(
    name: str, tool: AnyTool | None, scope: CallScope
) -> tuple[ToolErrorStatus, str] | None:
    if tool is not None and name in scope.allowed:
        return None
    if tool is not None and scope.read_only and not tool.effect.read_only:
        return "blocked", (
            f"{name} changes data and this session is read-only; "
            "answer without it or ask the user to turn read-only off"
        )
    offered = ", ".join(sorted(scope.allowed)) or "none"
    if tool is not None:
        return (
            "failed",
            f"{name} is not enabled for this conversation; available tools: {offered}",
        )
    return "failed", f"there is no tool named {name!r} here; available tools: {offered}"


def _declined(
    tool: AnyTool, decision: ApprovalDecision, config: ExecutorConfig
) -> tuple[ToolErrorStatus, str]:
    reason = f" (reason: {decision.reason})" if decision.reason else ""
    if decision.status == "timeout":
        return "timeout", (
            f"no approval decision for {tool.name} within "
            f"{config.approval_timeout_s:g}s; it was not run"
        )
    if decision.status == "withdrawn":
        return "cancelled", f"{tool.name} was not run: the run is stopping"
    return "rejected", f"the user declined to run {tool.name}{reason}"


def _with_attempts(error: str, attempts: int) -> str:
    return error if attempts == 1 else f"{error} (after {attempts} attempts)"


def _validate(tool: AnyTool, arguments: ToolArguments) -> BaseModel | str:
    if isinstance(arguments, str):
        return f"arguments for {tool.name} are not a JSON object: {arguments[:200]!r}"
    try:
        parsed: BaseModel = tool.args_model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
            for err in exc.errors()
        )
        return f"invalid arguments for {tool.name}: {problems}"
    return parsed


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
