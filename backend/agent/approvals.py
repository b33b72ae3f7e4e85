"""The approval requests the tool-call phase makes.

A request names the call, what the tool does and what the run had read
that the user did not write. When the head of the queue asks, the later
calls of the same reply that will ask too come with it (`also`): a person
sees them together and may decide each at once. Their decisions wait in
`RunState.decided_ahead` until each call's turn (`ahead_of`); one left
undecided is asked when its turn comes, as before.
"""

from __future__ import annotations

from backend.agent import client_tools
from backend.agent.loop import AgentContext
from backend.agent.request_input import is_request_input
from backend.agent.rules import ToolCallRules, call_key
from backend.agent.state import Approved, Declined, PendingApproval, RunState
from backend.llm.base import ToolCall
from backend.protocol import UpcomingApproval
from backend.tools.base import AnyTool
from backend.tools.executor import CallScope, ToolExecutor
from backend.tools.outcome import parse_arguments

IN_DOUBT = (
    "{name} was running when the server running it stopped, and it cannot "
    "tell whether it took effect. Run it again?"
)


def request(
    ctx: AgentContext,
    call: ToolCall,
    tool: AnyTool,
    deadline: float,
    *,
    in_doubt: bool = False,
    also: tuple[UpcomingApproval, ...] = (),
) -> PendingApproval:
    state = ctx.state
    return PendingApproval(
        tool_call_id=call.id,
        tool_name=tool.name,
        arguments=parse_arguments(call.arguments),
        description=IN_DOUBT.format(name=tool.name)
        if in_doubt
        else tool.people_summary,
        step=state.step,
        deadline=deadline,
        in_doubt=in_doubt,
        untrusted_sources=tuple(state.untrusted),
        also=also,
    )


def granted(state: RunState, tool: str) -> bool:
    """The user allowed `tool` to run without asking, and nothing the run
    read could have asked for this call instead of them."""
    return tool in state.granted and not state.untrusted


def upcoming(
    ctx: AgentContext,
    *,
    executor: ToolExecutor,
    rules: ToolCallRules,
    scope: CallScope,
) -> tuple[UpcomingApproval, ...]:
    """The queued calls after the head that would ask were they made now,
    in order (not a question, a client tool, a repeat, nor allowed)."""
    state = ctx.state
    keys = {call_key(state.queue[0])}
    found: list[UpcomingApproval] = []
    for call in state.queue[1:]:
        key = call_key(call)
        if key in keys or rules.earlier(state, call) is not None:
            continue
        keys.add(key)
        if is_request_input(ctx, call) or client_tools.is_client_tool(ctx, call):
            continue
        tool = executor.would_ask(call, scope)
        if tool is None or granted(state, tool.name):
            continue
        found.append(
            UpcomingApproval(
                tool_call_id=call.id,
                tool_name=tool.name,
                arguments=parse_arguments(call.arguments),
                description=tool.people_summary,
            )
        )
    return tuple(found)


def ahead_of(state: RunState, call: ToolCall) -> Approved | Declined | None:
    """The decision a person took on `call` before its turn, once."""
    return state.decided_ahead.pop(call.id, None)
