"""Running one tool call through every policy, in this order:

1. look the tool up (unknown or not offered → `failed`, read-only → `blocked`)
2. validate the arguments (a specific, friendly error back to the model)
3. rate-limit mutating tools per session (`rate_limited`)
4. ask for approval when the tool requires it: `check` answers
   `NeedsApproval`, the run's driver asks the user, and a decline becomes
   `declined(...)` (`rejected` / `timeout` / `cancelled`)
5. run it with its timeout (`timeout`; a question it asks the user
   mid-call does not count), retrying idempotent tools on
   transient failures (bounded): an async function on the loop, a plain one
   in a worker thread (abandoned at the timeout: a thread cannot be
   stopped), a `cpu_bound` one in a worker process (killed at the timeout)
6. run its side-effect hooks once, collecting their notes

`check(call, scope)` does 1-4 and answers `Ready | NeedsApproval | Refused`;
`execute(ready, ctx)` does 5-6 and returns a `ToolOutcome`. Neither waits for
a person and neither announces anything: the run's tool-call phase
(`agent/tool_calls.py`) reports each call. Every failure becomes an outcome the
model is told about; nothing here raises except cancellation. Policy comes
only from the tool's registered `ToolEffect`: no argument or model output can
change it.

The executor owns its worker threads and processes (`threads.py`,
`processes.py`); `aclose()` stops the processes.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from backend.errors import OwnershipLost, RunSuspended, ToolError
from backend.llm.base import ToolCall, ToolStatus
from backend.pauses import wait_unpaused
from backend.tools.base import AnyTool, ToolContext, ToolRegistry
from backend.tools.config import ExecutorConfig
from backend.tools.outcome import ToolOutcome, jsonable, parse_arguments
from backend.tools.policy import ApprovalDecision, RateLimiter
from backend.tools.processes import ProcessPool
from backend.tools.threads import ThreadRunner

log = logging.getLogger(__name__)

CANCEL_GRACE_S = 1.0
"""How long a timed-out async tool call has to end once cancelled before it
is reported as still running (and left to run on, watched)."""


@dataclass(frozen=True, slots=True)
class CallScope:
    """Where a call happens: who may do what."""

    ctx: ToolContext
    allowed: Collection[str]
    read_only: bool = False
    untrusted_read: bool = False
    """The run has read content the user did not write (`RunState.untrusted`)."""


@dataclass(frozen=True, slots=True)
class Ready:
    """Every check passed: run it."""

    tool: AnyTool
    args: BaseModel


@dataclass(frozen=True, slots=True)
class NeedsApproval:
    """Every check passed, and the tool asks the user first."""

    tool: AnyTool
    args: BaseModel


@dataclass(frozen=True, slots=True)
class Refused:
    """A check failed; the call must not run."""

    status: ToolStatus
    error: str


Check = Ready | NeedsApproval | Refused


class Runner(Protocol):
    """Runs a plain function away from the event loop (`ThreadRunner`,
    `ProcessPool`); cancelling `run` gives the call up."""

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Try:
    """One invocation: `status` "ok" means success and `value` is the result."""

    status: ToolStatus
    value: Any
    transient: bool = False


class ToolExecutor:
    def __init__(
        self,
        registry: ToolRegistry,
        config: ExecutorConfig | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
        rate_limiter: RateLimiter | None = None,
        threads: Runner | None = None,
        processes: Runner | None = None,
    ) -> None:
        self._registry = registry
        self.config = config = config or ExecutorConfig()
        self._clock = clock
        self._limiter = rate_limiter or RateLimiter(
            config.rate_limit_calls, config.rate_limit_window_s
        )
        self._threads = threads or ThreadRunner(config.threads)
        self._processes = processes or ProcessPool(config.processes)
        self._abandoned: set[asyncio.Future[Any]] = set()
        """Async calls that ran past their timeout and ignored the cancel."""

    @property
    def abandoned(self) -> int:
        """Async tool calls still running after their timeout."""
        return len(self._abandoned)

    async def aclose(self) -> None:
        """Stop the worker processes (threads cannot be stopped; they are
        daemons and do not hold up the exit), and cancel once more the
        async calls that went on past their timeout, waiting a moment."""
        await self._threads.aclose()
        await self._processes.aclose()
        if self._abandoned:
            for call in self._abandoned:
                call.cancel()
            await asyncio.wait(self._abandoned, timeout=CANCEL_GRACE_S)

    def forget_session(self, session_id: str) -> None:
        self._limiter.forget(session_id)

    @property
    def sessions_tracked(self) -> int:
        """How many sessions it holds per-session state (rate limits) for."""
        return self._limiter.tracked

    # ------------------------------------------------------------ 1-4: check

    def check(
        self, call: ToolCall, scope: CallScope, *, approved: bool = False
    ) -> Check:
        """May `call` run here? `approved`: the user said yes (steps 3-4 are done)."""
        tool = self._registry.get(call.name)
        refusal = _refuse(call.name, tool, scope)
        if refusal is not None:
            return Refused(*refusal)
        assert tool is not None
        parsed = tool.validate(parse_arguments(call.arguments))
        if isinstance(parsed, str):
            return Refused("failed", parsed)
        if approved:
            return Ready(tool, parsed)
        if not tool.effect.read_only:
            wait_s = self._limiter.acquire(scope.ctx.session_id)
            if wait_s is not None:
                return Refused("rate_limited", self._rate_message(tool, wait_s))
        if tool.effect.asks(scope.untrusted_read):
            return NeedsApproval(tool, parsed)
        return Ready(tool, parsed)

    def would_ask(self, call: ToolCall, scope: CallScope) -> AnyTool | None:
        """The tool, if `call` would wait for approval were it made now (a
        look ahead: no rate-limit token is taken, nothing is refused)."""
        tool = self._registry.get(call.name)
        if tool is None or _refuse(call.name, tool, scope) is not None:
            return None
        if isinstance(tool.validate(parse_arguments(call.arguments)), str):
            return None
        return tool if tool.effect.asks(scope.untrusted_read) else None

    def declined(
        self, tool_name: str, decision: ApprovalDecision, *, waited_s: float
    ) -> Refused:
        """The refusal that an approval `decision` other than approved means
        (`waited_s`: how long the approval was waited for)."""
        reason = f" (reason: {decision.reason})" if decision.reason else ""
        if decision.status == "timeout":
            return Refused(
                "timeout",
                f"no approval decision for {tool_name} within {waited_s:g}s; "
                "it was not run",
            )
        if decision.status == "withdrawn":
            return Refused("cancelled", f"{tool_name} was not run: the run is stopping")
        return Refused("rejected", f"the user declined to run {tool_name}{reason}")

    # ------------------------------------------------------------ 5-6: execute

    async def execute(
        self, ready: Ready, call: ToolCall, ctx: ToolContext
    ) -> ToolOutcome:
        """Run a checked call with its timeout and retries; then its side effects."""
        started = self._clock()
        tool, args = ready.tool, ready.args
        limit = self.config.max_attempts if tool.effect.idempotent else 1
        attempts, notes = 0, list[str]()
        while True:
            attempts += 1
            tried = await self._invoke_once(tool, args, ctx)
            if tried.status == "ok":
                await self._side_effects(tool, args, tried.value, ctx, notes)
                break
            if not (tried.transient and attempts < limit):
                break
            log.info(
                "retrying %s after attempt %d: %s", tool.name, attempts, tried.value
            )
            await asyncio.sleep(self.config.retry_backoff_s * 2 ** (attempts - 1))
        return ToolOutcome(
            call=call,
            arguments=parse_arguments(call.arguments),
            status=tried.status,
            result=jsonable(tried.value) if tried.status == "ok" else None,
            error=None
            if tried.status == "ok"
            else _with_attempts(tried.value, attempts),
            duration_ms=self._elapsed(started),
            attempts=attempts,
            step=ctx.step,
            notes=tuple(notes),
        )

    async def _invoke_once(
        self, tool: AnyTool, args: BaseModel, ctx: ToolContext
    ) -> _Try:
        timeout = tool.effect.timeout_s or self.config.default_timeout_s
        try:
            if tool.runs_in == "loop":
                return _Try("ok", await self._on_loop(tool, args, ctx, timeout))
            async with asyncio.timeout(timeout):
                return _Try("ok", await self._run(tool, args, ctx))
        except TimeoutError:
            if tool.runs_in == "thread":
                log.warning(
                    "tool %s timed out after %gs; its thread runs on until the "
                    "function returns (the call is not tried again)",
                    tool.name,
                    timeout,
                )
                return _Try("timeout", _still_running(timeout), transient=False)
            return _Try("timeout", f"timed out after {timeout:g}s", transient=True)
        except _StillRunning:
            return _Try("timeout", _still_running(timeout), transient=False)
        except ToolError as exc:
            return _Try("failed", str(exc), transient=exc.retryable)
        except (OwnershipLost, RunSuspended):
            raise  # not the tool's failure: the run ends or is parked here
        except Exception as exc:  # a tool's bug must not take the run down
            log.warning("tool %s crashed", tool.name, exc_info=True)
            return _Try(
                "failed",
                f"the tool crashed ({type(exc).__name__}: {exc})",
                transient=True,
            )

    async def _on_loop(
        self, tool: AnyTool, args: BaseModel, ctx: ToolContext, limit_s: float
    ) -> Any:
        """An async tool's call, bounded even when it ignores its cancellation.

        The time it waits for a person (an MCP server's question) does not
        count (`ctx.pauses`). At the timeout it is cancelled; one that has not ended
        `CANCEL_GRACE_S` later (it caught the cancellation, or shields its
        work) is left to run on, watched in `_abandoned`, and reported as
        still running: it is not tried again. A tool that blocks the event
        loop itself cannot be stopped at all: plain functions belong in a
        thread or process (`Tool.runs_in`)."""
        call = asyncio.ensure_future(tool.fn(args, ctx))
        try:
            if await wait_unpaused(call, limit_s, ctx.pauses):
                return call.result()
            call.cancel()
            await asyncio.wait({call}, timeout=CANCEL_GRACE_S)
        except asyncio.CancelledError:
            call.cancel()  # Stop: the tool goes too (ending on its next turn)
            self._watch(tool, call, stubborn=False)
            raise
        if not call.done():
            self._watch(tool, call, stubborn=True)
            raise _StillRunning
        if not call.cancelled():
            call.exception()  # ended with an error of its own once cancelled
        raise TimeoutError

    def _watch(
        self, tool: AnyTool, call: asyncio.Future[Any], *, stubborn: bool
    ) -> None:
        """Keep a cancelled async call until it ends (`stubborn`: it already
        went on past its grace, which is logged)."""
        if call.done():
            return
        if stubborn:
            log.warning(
                "tool %s did not stop when cancelled; it runs on (not tried again)",
                tool.name,
            )
        self._abandoned.add(call)
        call.add_done_callback(self._abandoned_ended)

    def _abandoned_ended(self, call: asyncio.Future[Any]) -> None:
        self._abandoned.discard(call)
        if not call.cancelled() and call.exception() is not None:
            log.info("an abandoned tool call ended with %r", call.exception())

    async def _run(self, tool: AnyTool, args: BaseModel, ctx: ToolContext) -> Any:
        """Call a plain tool function where it belongs (`Tool.runs_in`)."""
        if tool.runs_in == "process":
            return await self._processes.run(tool.fn, args, ctx.detached())
        value = await self._threads.run(tool.fn, args, ctx)
        if inspect.isawaitable(value):  # a plain function wrapping an async one
            value = await value
        return value

    async def _side_effects(
        self,
        tool: AnyTool,
        args: BaseModel,
        result: Any,
        ctx: ToolContext,
        notes: list[str],
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
                notes.append(note)

    def _rate_message(self, tool: AnyTool, wait_s: float) -> str:
        calls, window = self._limiter.max_calls, self._limiter.window_s
        return (
            f"{tool.name} was not run: at most {calls} changing tool calls per "
            f"{window:g}s in a session; try again in {max(wait_s, 0.1):.1f}s "
            "or continue without it"
        )

    def _elapsed(self, started: float) -> float:
        return round((self._clock() - started) * 1000, 3)


class _StillRunning(Exception):
    """An async call went on after its timeout's cancellation."""


def _still_running(timeout: float) -> str:
    return (
        f"timed out after {timeout:g}s and may still be running; it was not tried again"
    )


def _refuse(
    name: str, tool: AnyTool | None, scope: CallScope
) -> tuple[ToolStatus, str] | None:
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


def _with_attempts(error: Any, attempts: int) -> str:
    return str(error) if attempts == 1 else f"{error} (after {attempts} attempts)"
