"""A tool call as it runs: its `execute_tool` span (OpenTelemetry's GenAI
conventions: the tool's name and call id, how it ended), with its
idempotency key and how long a person took to approve it first."""

from __future__ import annotations

import json

from backend.agent.loop import AgentContext
from backend.llm.base import ToolCall
from backend.tools.base import ToolContext
from backend.tools.executor import Ready, ToolExecutor
from backend.tools.outcome import ToolOutcome


async def executed(
    ctx: AgentContext,
    executor: ToolExecutor,
    check: Ready,
    call: ToolCall,
    context: ToolContext,
) -> ToolOutcome:
    """`executor.execute`, inside the call's span."""
    tracing = ctx.telemetry.tracing
    if not tracing.enabled:
        return await executor.execute(check, call, context)
    attributes: dict[str, str | int | float] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "loopwire.step": ctx.state.step,
    }
    if context.idempotency_key:
        attributes["loopwire.tool.idempotency_key"] = context.idempotency_key
    waited = ctx.waited_s.pop(call.id, None)
    if waited is not None:
        attributes["loopwire.tool.approval_wait_s"] = round(waited, 6)
    if tracing.capture_content:
        attributes["gen_ai.tool.call.arguments"] = call.arguments
    with tracing.span(f"execute_tool {call.name}", attributes) as span:
        outcome = await executor.execute(check, call, context)
        span.set("loopwire.tool.status", outcome.status)
        if not outcome.ok:
            span.fail(outcome.status, outcome.error or "")
        elif tracing.capture_content:
            result = json.dumps(outcome.result, ensure_ascii=False, default=str)
            span.set("gen_ai.tool.call.result", result)
        return outcome
