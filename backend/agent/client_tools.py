"""Client tools: tools a client declares for one run (`ChatMessage.
client_tools`, an AG-UI client's frontend tools) and runs itself.

The model sees them next to the server's tools. The tool-call phase hands a
call of one here, never to the executor: `ask` turns it into `AwaitInput`
(a `PendingQuestion` naming the tool, so the wait is durable like any
question: it is checkpointed, survives a restart, and is answered through
whichever instance the client reaches), and the driver sends it as a
`client_tool_call` frame. The client's `tool_result` ends the wait, and
`outcome` makes it the call's result: `ok`, `failed` when the client says
the call failed, `timeout` when no result came in time.
"""

from __future__ import annotations

from backend.agent.loop import AgentContext, AwaitInput, Decision
from backend.agent.state import Answered, PendingQuestion, WaitOutcome
from backend.llm.base import ToolCall, ToolSpec
from backend.protocol import ClientTool
from backend.tools.outcome import ToolOutcome, parse_arguments

NO_RESULT = "no result came from the client within {limit} seconds"


def specs(tools: list[ClientTool] | None) -> tuple[ToolSpec, ...]:
    """What the model sees of the client's tools."""
    return tuple(
        ToolSpec(
            name=tool.name, description=tool.description, parameters=tool.parameters
        )
        for tool in tools or ()
    )


def is_client_tool(ctx: AgentContext, call: ToolCall) -> bool:
    return any(spec.name == call.name for spec in ctx.state.request.client_tools)


def counted_as(ctx: AgentContext, call: ToolCall) -> str:
    """The call's tool as a metric label: a client's own tools, each client
    naming its own, count as one (`client_tool`)."""
    return "client_tool" if is_client_tool(ctx, call) else call.name


def ask(ctx: AgentContext, call: ToolCall, timeout_s: float, now: float) -> Decision:
    """Wait for the client's result of `call` (already announced)."""
    return AwaitInput(
        PendingQuestion(
            question_id=call.id,
            question=f"the result of {call.name}",
            step=ctx.state.step,
            timeout_s=timeout_s,
            deadline=now + timeout_s,
            tool_call_id=call.id,
            client_tool=call.name,
            arguments=parse_arguments(call.arguments),
        )
    )


def outcome(
    ctx: AgentContext,
    call: ToolCall,
    pending: PendingQuestion,
    resolution: WaitOutcome | None,
) -> ToolOutcome:
    """The call's outcome from the wait's: the client's result, its
    failure, or none in time. The caller times it and settles it."""
    ctx.state.pending_question = None
    arguments = parse_arguments(call.arguments)
    step = ctx.state.step
    match resolution:
        case Answered(content=content, error=False):
            return ToolOutcome(
                call=call, arguments=arguments, result=content, step=step
            )
        case Answered(content=content):
            return ToolOutcome(
                call=call,
                arguments=arguments,
                status="failed",
                error=content,
                step=step,
            )
        case _:
            error = NO_RESULT.format(limit=f"{pending.timeout_s:g}")
            return ToolOutcome(
                call=call, arguments=arguments, status="timeout", error=error, step=step
            )
