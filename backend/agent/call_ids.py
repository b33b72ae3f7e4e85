"""Tool call ids a run can tell apart: a call's id names its result and
its effect's key (`run:call`), so no two calls of a run may share one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from backend.llm.base import Message, ToolCall


def fresh_ids(
    calls: Sequence[ToolCall], history: Iterable[Message]
) -> tuple[ToolCall, ...]:
    """`calls` with ids no earlier call in `history` or in `calls` has: some
    servers number each reply's calls from `call_0`, or give two calls one
    id. A call's id names its result and its effect's key (`run:call`), so
    an id taken again gets a suffix (`call_0~2`)."""
    taken = {
        call.id
        for message in history
        if message.tool_calls
        for call in message.tool_calls
    }
    fresh: list[ToolCall] = []
    for call in calls:
        call_id, n = call.id, 1
        while call_id in taken:
            n += 1
            call_id = f"{call.id}~{n}"
        taken.add(call_id)
        fresh.append(
            call if call_id == call.id else call.model_copy(update={"id": call_id})
        )
    return tuple(fresh)
