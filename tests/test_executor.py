"""Every ToolExecutor branch: outcomes, statuses, events, attempts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from backend.errors import ToolError
from backend.events import (
    ApprovalRequested,
    Event,
    ToolCompleted,
    ToolFailed,
    ToolStarted,
)
from backend.llm.base import ToolCall
from backend.tools.base import SideEffect, Tool, ToolContext, ToolEffect, ToolRegistry
from backend.tools.executor import CallScope, ExecutorConfig, ToolExecutor, ToolOutcome
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


@dataclass
class FakeApprover:
    decision: ApprovalDecision
    asked: list[tuple[str, float]] = field(default_factory=list)

    async def wait_for_approval(
        self, tool_call_id: str, limit_s: float, announce: Callable[[], None]
    ) -> ApprovalDecision:
        self.asked.append((tool_call_id, limit_s))
        announce()
        return self.decision


MUTATING = ToolEffect()


def tool(name: str, fn: Any, effect: ToolEffect = MUTATING, **extra: Any) -> Tool[Any]:
    return Tool(name, f"The {name} tool.", TextArgs, fn, effect, **extra)


class Harness:
    def __init__(
        self, *tools: Tool[Any], config: ExecutorConfig | None = None, **kw: Any
    ) -> None:
        self.registry = ToolRegistry(tools)
        self.events: list[Event] = []
        self.executor = ToolExecutor(
            self.registry, config or ExecutorConfig(retry_backoff_s=0), **kw
        )

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | str = "{}",
        *,
        read_only: bool = False,
        approver: FakeApprover | None = None,
        allowed: list[str] | None = None,
        session: str = "s1",
    ) -> ToolOutcome:
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        scope = CallScope(
            ctx=ToolContext(session, "r1", 3),
            emit=self.events.append,
            allowed=self.registry.names if allowed is None else allowed,
            read_only=read_only,
            approver=approver,
        )
        return await self.executor.run(
            ToolCall(id="c1", name=name, arguments=raw), scope
        )

    def kinds(self) -> list[str]:
        return [type(e).__name__ for e in self.events]


async def test_success_reports_start_then_complete() -> None:
    h = Harness(tool("echo", _echo, READ))
    outcome = await h.call("echo", {"text": "hi"})
    assert outcome.ok and outcome.result == {"echo": "hi", "session": "s1"}
    assert outcome.attempts == 1
    started, done = h.events
    assert started == ToolStarted("c1", "echo", {"text": "hi"}, 3)
    assert isinstance(done, ToolCompleted) and done.result == outcome.result
    assert done.duration_ms == outcome.duration_ms >= 0


async def test_unknown_tool() -> None:
    h = Harness(tool("echo", _echo, READ))
    outcome = await h.call("rm", {})
    assert (outcome.status, outcome.error) == (
        "failed",
        "there is no tool named 'rm' here; available tools: echo",
    )
    assert h.kinds() == ["ToolStarted", "ToolFailed"]


async def test_tool_not_offered_in_this_conversation() -> None:
    h = Harness(tool("echo", _echo, READ), tool("other", _echo, READ))
    outcome = await h.call("other", {}, allowed=["echo"])
    assert (
        outcome.error
        == "other is not enabled for this conversation; available tools: echo"
    )


async def test_invalid_arguments_are_explained() -> None:
    h = Harness(tool("echo", _echo, READ))
    outcome = await h.call("echo", {"text": 5})
    assert (
        outcome.error
        == "invalid arguments for echo: text: Input should be a valid string"
    )
    outcome = await h.call("echo", "[1, 2]")
    assert outcome.error == "arguments for echo are not a JSON object: '[1, 2]'"
    assert outcome.arguments == "[1, 2]"


async def test_mutating_tool_blocked_in_read_only_session() -> None:
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
    now = [0.0]
    limiter = RateLimiter(2, 60.0, clock=lambda: now[0])
    h = Harness(
        tool("write", Flaky([])), tool("read", _echo, READ), rate_limiter=limiter
    )
    statuses = [(await h.call("write")).status for _ in range(3)]
    assert statuses == [None, None, "rate_limited"]
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
    h = Harness(tool("hang", _forever, ToolEffect(timeout_s=0.05)))
    outcome = await h.call("hang")
    assert (outcome.status, outcome.error, outcome.attempts) == (
        "timeout",
        "timed out after 0.05s",
        1,
    )


async def test_idempotent_timeouts_are_retried_then_reported() -> None:
    h = Harness(tool("hang", _forever, ToolEffect(idempotent=True, timeout_s=0.02)))
    outcome = await h.call("hang")
    assert (outcome.status, outcome.error, outcome.attempts) == (
        "timeout",
        "timed out after 0.02s (after 3 attempts)",
        3,
    )


async def test_idempotent_retry_succeeds() -> None:
    flaky = Flaky(
        [ToolError("upstream busy", retryable=True), RuntimeError("socket reset")]
    )
    h = Harness(tool("fetch", flaky, READ))
    outcome = await h.call("fetch")
    assert outcome.ok and outcome.result == {"calls": 3} and outcome.attempts == 3
    assert h.kinds() == ["ToolStarted", "ToolCompleted"]


async def test_non_idempotent_failure_is_not_retried() -> None:
    flaky = Flaky([RuntimeError("socket reset")])
    h = Harness(tool("send", flaky, ToolEffect(idempotent=False)))
    outcome = await h.call("send")
    assert (outcome.status, outcome.error, flaky.calls) == (
        "failed",
        "the tool crashed (RuntimeError: socket reset)",
        1,
    )


async def test_deterministic_tool_errors_are_not_retried() -> None:
    flaky = Flaky([ToolError("division by zero")])
    h = Harness(tool("calc", flaky, READ))
    outcome = await h.call("calc")
    assert (outcome.error, flaky.calls) == ("division by zero", 1)


async def test_retries_are_bounded_by_max_attempts() -> None:
    flaky = Flaky([ToolError("busy", retryable=True)] * 5)
    h = Harness(
        tool("calc", flaky, READ),
        config=ExecutorConfig(max_attempts=2, retry_backoff_s=0),
    )
    outcome = await h.call("calc")
    assert (outcome.error, flaky.calls) == ("busy (after 2 attempts)", 2)


async def test_side_effect_notes_and_errors_do_not_fail_the_call() -> None:
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
    seen: list[int] = []

    async def count(args: Any, result: Any, ctx: ToolContext) -> None:
        seen.append(result["calls"])

    flaky = Flaky([ToolError("busy", retryable=True)])
    h = Harness(tool("fetch", flaky, READ, side_effects=(count,)))
    await h.call("fetch")
    assert seen == [2]


NEEDS_OK = ToolEffect(requires_approval=True)


async def test_approved_call_runs_after_asking() -> None:
    ran = Flaky([])
    h = Harness(tool("save", ran, NEEDS_OK))
    approver = FakeApprover(ApprovalDecision("approved"))
    outcome = await h.call("save", {"text": "milk"}, approver=approver)
    assert outcome.ok and ran.calls == 1
    assert approver.asked == [("c1", 300.0)]
    assert h.kinds() == ["ToolStarted", "ApprovalRequested", "ToolCompleted"]
    assert h.events[1] == ApprovalRequested(
        "c1", "save", {"text": "milk"}, "The save tool.", 3
    )


async def test_rejected_call_is_not_run() -> None:
    ran = Flaky([])
    h = Harness(tool("save", ran, NEEDS_OK))
    approver = FakeApprover(ApprovalDecision("rejected", "not now"))
    outcome = await h.call("save", approver=approver)
    assert (outcome.status, outcome.error, ran.calls) == (
        "rejected",
        "the user declined to run save (reason: not now)",
        0,
    )
    failed = h.events[-1]
    assert isinstance(failed, ToolFailed) and failed.status == "rejected"


async def test_approval_timeout_and_withdrawal() -> None:
    h = Harness(
        tool("save", Flaky([]), NEEDS_OK), config=ExecutorConfig(approval_timeout_s=7)
    )
    timed_out = await h.call("save", approver=FakeApprover(ApprovalDecision("timeout")))
    assert (timed_out.status, timed_out.error) == (
        "timeout",
        "no approval decision for save within 7s; it was not run",
    )
    withdrawn = await h.call(
        "save", approver=FakeApprover(ApprovalDecision("withdrawn"))
    )
    assert (withdrawn.status, withdrawn.error) == (
        "cancelled",
        "save was not run: the run is stopping",
    )


async def test_no_approver_means_no_approval_and_arguments_cannot_skip_it() -> None:
    ran = Flaky([])
    h = Harness(tool("save", ran, NEEDS_OK))
    outcome = await h.call("save", {"text": "x", "requires_approval": False})
    assert outcome.status == "rejected" and ran.calls == 0
    approver = FakeApprover(ApprovalDecision("rejected"))
    await h.call("save", {"text": "x", "requires_approval": False}, approver=approver)
    assert len(approver.asked) == 1 and ran.calls == 0


async def test_cancellation_is_reported_and_reraised() -> None:
    started = asyncio.Event()

    async def hang(args: TextArgs, ctx: ToolContext) -> None:
        started.set()
        await asyncio.Event().wait()

    h = Harness(tool("hang", hang))
    task = asyncio.ensure_future(h.call("hang"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    failed = h.events[-1]
    assert isinstance(failed, ToolFailed) and failed.status == "cancelled"
    assert (
        failed.error == "Cancelled: the user stopped the run before this tool finished."
    )


def test_outcome_for_model_is_bounded() -> None:
    outcome = ToolOutcome(
        ToolCall(id="c", name="big"), {}, None, result=list(range(2000))
    )
    text = outcome.for_model(300)
    assert len(text) < 400 and text.endswith("items]")
    failed = ToolOutcome(ToolCall(id="c", name="x"), {}, "failed", error="boom")
    assert failed.for_model(300) == "Error (failed): boom"
