"""Read-only calls of one reply, run at once.

When the head of the queue is a read-only tool that passed its checks
without asking, `ToolCalls` looks at the calls after it (`followers`): each
that is read-only too and passes its checks as `Ready` — not a question,
not a client tool, not a call made before in the run or in the batch, not
one that asks first — joins it, up to `LoopConfig.parallel_tool_calls` in
all, stopping at the first that does not fit. Their `tool_start` frames go
out in order in the phase that announces the head, `state.batch` names them
(the head, `state.in_flight`, first) and the driver checkpoints; the next
phase runs them all at once (`run_at_once`, inside a task group: a stop
cancels every one of them) and settles each in the model's order, so they
leave the queue in the phase that ran them, like a single call.

A checkpoint taken in between has them all in flight. After a restart they
simply run again: each was read-only, so nothing it did can have changed
anything (a tool gone from the registry is reported as interrupted). The
executor's timeouts and retries stay per call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from backend.agent import client_tools, elicitations
from backend.agent.cutoffs import INTERRUPTED_NOTE
from backend.agent.loop import AgentContext
from backend.agent.request_input import is_request_input
from backend.agent.rules import ToolCallRules, call_key
from backend.agent.tool_spans import executed
from backend.llm.base import ToolCall
from backend.protocol import ToolStart
from backend.tools.base import ToolContext, ToolRegistry
from backend.tools.executor import CallScope, Ready, Refused, ToolExecutor
from backend.tools.outcome import ToolOutcome, parse_arguments


def tool_context(
    ctx: AgentContext, call: ToolCall | None = None, *, asking_s: float | None = None
) -> ToolContext:
    """What `call` (default: the head of the queue) may know about its run;
    with `asking_s`, a way to ask the person mid-call (within that long)."""
    state = ctx.state
    if call is None and state.queue:
        call = state.queue[0]
    ask = None
    if call is not None and asking_s is not None:
        ask = elicitations.asker(ctx, call, asking_s)
    return ToolContext(
        state.session_id,
        state.run_id,
        state.step,
        state.owner,
        data_sources=state.request.data_sources,
        idempotency_key=f"{state.run_id}:{call.id}" if call else None,
        epoch=ctx.epoch,
        ask=ask,
        pauses=ctx.pauses,
    )


def announce(ctx: AgentContext, call: ToolCall) -> None:
    """The call's `tool_start` frame."""
    ctx.emit(
        ToolStart(
            tool_call_id=call.id,
            tool_name=call.name,
            arguments=parse_arguments(call.arguments),
            step=ctx.state.step,
        )
    )


def followers(
    ctx: AgentContext,
    *,
    registry: ToolRegistry,
    executor: ToolExecutor,
    rules: ToolCallRules,
    scope: CallScope,
    limit: int,
) -> list[ToolCall]:
    """The calls after the head (a read-only call that is `Ready`) that run
    with it: up to `limit` in all, up to the first that does not fit."""
    queue = ctx.state.queue
    keys = {call_key(queue[0])}
    found: list[ToolCall] = []
    for call in queue[1:limit]:
        if not _fits(ctx, call, registry, executor, rules, scope, keys):
            break
        keys.add(call_key(call))
        found.append(call)
    return found


def _fits(
    ctx: AgentContext,
    call: ToolCall,
    registry: ToolRegistry,
    executor: ToolExecutor,
    rules: ToolCallRules,
    scope: CallScope,
    keys: set[str],
) -> bool:
    """`call` is read-only, runs without asking and was not made before."""
    tool = registry.get(call.name)
    if tool is None or not tool.effect.read_only:
        return False
    if is_request_input(ctx, call) or client_tools.is_client_tool(ctx, call):
        return False
    if call_key(call) in keys or rules.earlier(ctx.state, call) is not None:
        return False
    return isinstance(executor.check(call, scope), Ready)


async def run_at_once(
    ctx: AgentContext,
    calls: list[ToolCall],
    *,
    registry: ToolRegistry,
    executor: ToolExecutor,
    scope: CallScope,
    clock: Callable[[], float],
    asking_s: float,
) -> list[ToolOutcome]:
    """Run the batch `calls` at once; their outcomes in the same order, each
    timed from the batch's announcement to its own end.

    Each is checked again as approved (as a single call is); after a restart
    (`ctx.resumed`) a call whose tool is gone is reported as interrupted."""
    flight = ctx.state.in_flight
    started = flight.started_at if flight is not None else clock()

    async def one(call: ToolCall) -> ToolOutcome:
        outcome = await _outcome(ctx, call, registry, executor, scope, asking_s)
        elapsed = round(max(clock() - started, 0.0) * 1000, 3)
        return outcome.model_copy(update={"duration_ms": elapsed})

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(call)) for call in calls]
    except BaseExceptionGroup as failed:  # the executor raises only what ends the run
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


async def _outcome(
    ctx: AgentContext,
    call: ToolCall,
    registry: ToolRegistry,
    executor: ToolExecutor,
    scope: CallScope,
    asking_s: float,
) -> ToolOutcome:
    if ctx.resumed and registry.get(call.name) is None:
        gone = Refused("cancelled", INTERRUPTED_NOTE.format(name=call.name))
        return _refused(ctx, call, gone)
    check = executor.check(call, scope, approved=True)
    if isinstance(check, Refused):
        return _refused(ctx, call, check)
    assert isinstance(check, Ready)
    context = tool_context(ctx, call, asking_s=asking_s)
    return await executed(ctx, executor, check, call, context)


def _refused(ctx: AgentContext, call: ToolCall, refused: Refused) -> ToolOutcome:
    return ToolOutcome(
        call=call,
        arguments=parse_arguments(call.arguments),
        status=refused.status,
        error=refused.error,
        step=ctx.state.step,
    )
