"""Every ToolExecutor branch: checks, outcomes, statuses, attempts.

The executor neither waits for people nor reports; what the user sees of a
call is tested with the tool-call phase (`test_tool_calls.py`)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from backend.errors import ToolError
from backend.llm.base import Message, ToolCall
from backend.tools.base import SideEffect, Tool, ToolContext, ToolEffect, ToolRegistry
from backend.tools.config import ExecutorConfig
from backend.tools.executor import (
    CallScope,
    NeedsApproval,
    Ready,
    Refused,
    ToolExecutor,
)
from backend.tools.outcome import ToolOutcome
from backend.tools.policy import ApprovalDecision, RateLimiter

READ = ToolEffect(read_only=True, idempotent=True)


class TextArgs(BaseModel):
    text: str = "x"


@dataclass
class Flaky:
    """Fails with the given exceptions first, then returns its calls' count."""

    failures: list[BaseException]
    calls: int = 0

    async def __call__(self, args: TextArgs, ctx: ToolContext) -> dict[str, int]:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return {"calls": self.calls}


async def _forever(args: TextArgs, ctx: ToolContext) -> None:
    await asyncio.Event().wait()


async def _echo(args: TextArgs, ctx: ToolContext) -> dict[str, str]:
    return {"echo": args.text, "session": ctx.session_id}


MUTATING = ToolEffect(requires_approval=False)
"""Changes something, set not to ask (the scope here has read nothing untrusted)."""


def tool(name: str, fn: Any, effect: ToolEffect = MUTATING, **extra: Any) -> Tool[Any]:
    return Tool(name, f"The {name} tool.", TextArgs, fn, effect, **extra)


class Harness:
    def __init__(
        self, *tools: Tool[Any], config: ExecutorConfig | None = None, **kw: Any
    ) -> None:
        self.registry = ToolRegistry(tools)
        self.executor = ToolExecutor(
            self.registry, config or ExecutorConfig(retry_backoff_s=0), **kw
        )

    def check(
        self,
        name: str,
        arguments: dict[str, Any] | str = "{}",
        *,
        read_only: bool = False,
        allowed: list[str] | None = None,
        session: str = "s1",
        approved: bool = False,
    ) -> tuple[ToolCall, CallScope, Ready | NeedsApproval | Refused]:
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        call = ToolCall(id="c1", name=name, arguments=raw)
        scope = CallScope(
            ctx=ToolContext(session, "r1", 3),
            allowed=self.registry.names if allowed is None else allowed,
            read_only=read_only,
        )
        return call, scope, self.executor.check(call, scope, approved=approved)

    async def call(
        self, name: str, arguments: dict[str, Any] | str = "{}", **kw: Any
    ) -> ToolOutcome:
        """Check, then run a ready call; a refusal becomes its outcome."""
        call, scope, check = self.check(name, arguments, **kw)
        if isinstance(check, Refused):
            return ToolOutcome(
                call=call, arguments={}, status=check.status, error=check.error
            )
        assert isinstance(check, Ready), check
        return await self.executor.execute(check, call, scope.ctx)


async def test_success() -> None:
    """A tool runs once with its context and returns its result and parsed arguments."""
    h = Harness(tool("echo", _echo, READ))
    outcome = await h.call("echo", {"text": "hi"})
    assert outcome.ok and outcome.result == {"echo": "hi", "session": "s1"}
    assert (outcome.attempts, outcome.step, outcome.status) == (1, 3, "ok")
    assert outcome.arguments == {"text": "hi"} and outcome.duration_ms >= 0


async def test_unknown_tool() -> None:
    """A call to a tool not in the registry fails and lists the available tools."""
    h = Harness(tool("echo", _echo, READ))
    outcome = await h.call("rm", {})
    assert (outcome.status, outcome.error) == (
        "failed",
        "there is no tool named 'rm' here; available tools: echo",
    )


async def test_tool_not_offered_in_this_conversation() -> None:
    """A tool not enabled for the conversation is refused, naming the ones that are."""
    h = Harness(tool("echo", _echo, READ), tool("other", _echo, READ))
    outcome = await h.call("other", {}, allowed=["echo"])
    assert (
        outcome.error
        == "other is not enabled for this conversation; available tools: echo"
    )


async def test_invalid_arguments_are_explained() -> None:
    """Ill-typed arguments and non-object JSON are refused with a readable reason."""
    h = Harness(tool("echo", _echo, READ))
    outcome = await h.call("echo", {"text": 5})
    assert (
        outcome.error
        == "invalid arguments for echo: text: Input should be a valid string"
    )
    outcome = await h.call("echo", "[1, 2]")
    assert outcome.error == "arguments for echo are not a JSON object: '[1, 2]'"


async def test_mutating_tool_blocked_in_read_only_session() -> None:
    """A read-only session blocks a mutating tool without running it."""
    ran = Flaky([])
    h = Harness(tool("write", ran))
    outcome = await h.call("write", {}, read_only=True, allowed=[])
    assert outcome.status == "blocked"
    assert outcome.error == (
        "write changes data and this session is read-only; "
        "answer without it or ask the user to turn read-only off"
    )
    assert ran.calls == 0


async def test_rate_limit_applies_to_mutating_tools_per_session() -> None:
    """Mutating calls are limited per session and window, while reads never are."""
    now = [0.0]
    limiter = RateLimiter(2, 60.0, clock=lambda: now[0])
    h = Harness(
        tool("write", Flaky([])), tool("read", _echo, READ), rate_limiter=limiter
    )
    statuses = [(await h.call("write")).status for _ in range(3)]
    assert statuses == ["ok", "ok", "rate_limited"]
    limited = await h.call("write")
    assert limited.error == (
        "write was not run: at most 2 changing tool calls per 60s in a session; "
        "try again in 60.0s or continue without it"
    )
    assert (
        await h.call("write", session="s2")
    ).ok  # another session has its own budget
    assert all([(await h.call("read")).ok for _ in range(5)])  # reads are never limited
    now[0] = 61.0
    assert (await h.call("write")).ok


async def test_timeout_of_a_non_idempotent_tool_is_not_retried() -> None:
    """A non-idempotent tool that times out is tried once and reported as a timeout."""
    h = Harness(
        tool("hang", _forever, ToolEffect(requires_approval=False, timeout_s=0.05))
    )
    outcome = await h.call("hang")
    assert (outcome.status, outcome.error, outcome.attempts) == (
        "timeout",
        "timed out after 0.05s",
        1,
    )


async def test_idempotent_timeouts_are_retried_then_reported() -> None:
    """An idempotent tool that keeps timing out is tried three times, then reported."""
    h = Harness(
        tool(
            "hang",
            _forever,
            ToolEffect(requires_approval=False, idempotent=True, timeout_s=0.02),
        )
    )
    outcome = await h.call("hang")
    assert (outcome.status, outcome.error, outcome.attempts) == (
        "timeout",
        "timed out after 0.02s (after 3 attempts)",
        3,
    )


async def test_idempotent_retry_succeeds() -> None:
    """An idempotent tool succeeds on try three after a retryable error and a crash."""
    flaky = Flaky(
        [ToolError("upstream busy", retryable=True), RuntimeError("socket reset")]
    )
    h = Harness(tool("fetch", flaky, READ))
    outcome = await h.call("fetch")
    assert outcome.ok and outcome.result == {"calls": 3} and outcome.attempts == 3


async def test_non_idempotent_failure_is_not_retried() -> None:
    """A crash in a non-idempotent tool fails the call after one attempt."""
    flaky = Flaky([RuntimeError("socket reset")])
    h = Harness(tool("send", flaky, ToolEffect(requires_approval=False)))
    outcome = await h.call("send")
    assert (outcome.status, outcome.error, flaky.calls) == (
        "failed",
        "the tool crashed (RuntimeError: socket reset)",
        1,
    )


async def test_deterministic_tool_errors_are_not_retried() -> None:
    """A non-retryable `ToolError` fails even an idempotent call after one attempt."""
    flaky = Flaky([ToolError("division by zero")])
    h = Harness(tool("calc", flaky, READ))
    outcome = await h.call("calc")
    assert (outcome.error, flaky.calls) == ("division by zero", 1)


async def test_retries_are_bounded_by_max_attempts() -> None:
    """Retryable errors are tried no more than `max_attempts` times in all."""
    flaky = Flaky([ToolError("busy", retryable=True)] * 5)
    h = Harness(
        tool("calc", flaky, READ),
        config=ExecutorConfig(max_attempts=2, retry_backoff_s=0),
    )
    outcome = await h.call("calc")
    assert (outcome.error, flaky.calls) == ("busy (after 2 attempts)", 2)


async def test_side_effect_notes_and_errors_do_not_fail_the_call() -> None:
    """Side-effect notes are kept; a failing side effect is a note, not a failure."""

    async def audit(args: Any, result: Any, ctx: ToolContext) -> str:
        return f"audit: {args.text} -> {result['echo']}"

    async def broken(args: Any, result: Any, ctx: ToolContext) -> str | None:
        raise RuntimeError("audit log unavailable")

    async def silent(args: Any, result: Any, ctx: ToolContext) -> None:
        return None

    hooks: tuple[SideEffect, ...] = (audit, broken, silent)
    h = Harness(tool("echo", _echo, READ, side_effects=hooks))
    outcome = await h.call("echo", {"text": "hi"})
    assert outcome.ok
    assert outcome.notes == (
        "audit: hi -> hi",
        "Side effect 'broken' of echo failed: audit log unavailable",
    )


async def test_side_effects_run_once_even_after_retries() -> None:
    """Side effects run once, on the result of the attempt that succeeded."""
    seen: list[int] = []

    async def count(args: Any, result: Any, ctx: ToolContext) -> None:
        seen.append(result["calls"])

    flaky = Flaky([ToolError("busy", retryable=True)])
    h = Harness(tool("fetch", flaky, READ, side_effects=(count,)))
    await h.call("fetch")
    assert seen == [2]


NEEDS_OK = ToolEffect(requires_approval=True)


def test_a_tool_that_asks_first_needs_approval_and_runs_once_approved() -> None:
    """A tool that requires approval needs it first and is ready once approved."""
    h = Harness(tool("save", Flaky([]), NEEDS_OK))
    _, _, check = h.check("save", {"text": "milk"})
    assert isinstance(check, NeedsApproval) and check.tool.name == "save"
    _, _, approved = h.check("save", {"text": "milk"}, approved=True)
    assert isinstance(approved, Ready)


def test_approval_counts_once_against_the_rate_limit() -> None:
    """A call uses a rate-limit slot when it asks for approval, none when approved."""
    limiter = RateLimiter(1, 60.0, clock=lambda: 0.0)
    h = Harness(tool("save", Flaky([]), NEEDS_OK), rate_limiter=limiter)
    assert isinstance(h.check("save")[2], NeedsApproval)
    assert isinstance(h.check("save", approved=True)[2], Ready)  # not counted again
    assert isinstance(h.check("save")[2], Refused)


def test_arguments_cannot_skip_approval_and_checks_still_apply_once_approved() -> None:
    """Arguments cannot waive approval; an approved call with bad arguments fails."""
    h = Harness(tool("save", Flaky([]), NEEDS_OK))
    _, _, check = h.check("save", {"text": "x", "requires_approval": False})
    assert isinstance(check, NeedsApproval)
    _, _, late = h.check("save", {"text": 5}, approved=True)
    assert late == Refused(
        "failed", "invalid arguments for save: text: Input should be a valid string"
    )


def test_declined_approvals_explain_themselves() -> None:
    """Rejected, timed-out and withdrawn approvals become refusals that say why."""
    h = Harness()
    assert h.executor.declined(
        "save", ApprovalDecision("rejected", "not now"), waited_s=7
    ) == (Refused("rejected", "the user declined to run save (reason: not now)"))
    assert h.executor.declined(
        "save", ApprovalDecision("rejected"), waited_s=7
    ) == Refused("rejected", "the user declined to run save")
    assert h.executor.declined(
        "save", ApprovalDecision("timeout"), waited_s=7
    ) == Refused("timeout", "no approval decision for save within 7s; it was not run")
    assert h.executor.declined(
        "save", ApprovalDecision("withdrawn"), waited_s=7
    ) == Refused("cancelled", "save was not run: the run is stopping")


async def test_cancellation_propagates() -> None:
    """Cancelling a running call cancels the tool and re-raises `CancelledError`."""
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hang(args: TextArgs, ctx: ToolContext) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    h = Harness(tool("hang", hang))
    task = asyncio.ensure_future(h.call("hang"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


def test_outcome_for_model_is_bounded_and_its_message_carries_the_status() -> None:
    """A big result is cut to the model's budget; a tool message carries the status."""
    outcome = ToolOutcome(
        call=ToolCall(id="c", name="big"), arguments={}, result=list(range(2000))
    )
    text = outcome.for_model(300)
    assert len(text) < 400 and text.endswith("items]")
    failed = ToolOutcome(
        call=ToolCall(id="c", name="x"), arguments={}, status="failed", error="boom"
    )
    assert failed.for_model(300) == "Error (failed): boom"
    assert failed.message(300) == Message.tool(
        "c", "x", "Error (failed): boom", "failed", "boom"
    )
    assert failed.message(300).status == "failed"
    assert outcome.message(300).status == "ok"


def test_outcome_round_trips_through_json() -> None:
    """A `ToolOutcome` survives a JSON dump and reload unchanged."""
    outcome = ToolOutcome(
        call=ToolCall(id="c", name="x", arguments='{"a": 1}'),
        arguments={"a": 1},
        result={"n": [1, 2]},
        duration_ms=1.5,
        attempts=2,
        step=4,
        notes=("saved",),
    )
    assert ToolOutcome.model_validate_json(outcome.model_dump_json()) == outcome
