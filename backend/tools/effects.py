"""What a tool that changes data passes to the store to do it once.

Each tool call has an idempotency key (`ToolContext.idempotency_key`,
`<run id>:<tool call id>`), the same however often and wherever the call
runs, and the fencing epoch its conversation is owned at by the instance
running it (`ToolContext.epoch`). Together they make an `EffectKey`: the
store applies a change under a key at most once (a second execution gets
the first one's result) and refuses it from an instance that no longer owns
the conversation. `reconcile` functions read the same records back.
"""

from __future__ import annotations

from backend.store.base import EffectKey
from backend.tools.base import ToolContext


def effect_key(ctx: ToolContext, tool_name: str) -> EffectKey | None:
    """The call's key and fence for the store, when it has both (a run of a
    stored conversation); None: the change is made as a plain one."""
    if ctx.idempotency_key is None or ctx.epoch is None:
        return None
    return EffectKey(ctx.idempotency_key, ctx.session_id, ctx.epoch, tool_name)
