"""`ToolGrants`: the tools a user allowed to run without asking.

A "yes" to an approval may be remembered (`tool_approval_response.
remember`): for the rest of the conversation, or for every conversation of
the user. A run starts with the tools granted to its user and conversation
(`RunState.granted`), and one remembered during the run is added to it at
once. A grant never covers a call the run asks about because it read what
the user did not write (`RunState.untrusted`: the request may be an
injected one), nor a call in doubt.

Grants are stored (`Store.tool_grants`) and listed and revoked by their
user (`GET/DELETE /api/tool-grants`). Each instance keeps a user's grants
for `ttl_s` seconds, so a grant or revocation made on another instance is
seen within that time; the instance that made it sees it at once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from backend.store.base import Store
from backend.store.user_records import ToolGrantRecord

TTL_S = 5.0


class ToolGrants:
    def __init__(
        self,
        store: Store | None,
        *,
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """Without a store, grants live as long as the process."""
        self.store = store
        self.ttl_s = ttl_s
        self._clock = clock
        self._monotonic = monotonic
        self._known: dict[str, tuple[float, list[ToolGrantRecord]]] = {}

    async def of(self, user: str) -> list[ToolGrantRecord]:
        """The user's grants, oldest first."""
        known = self._known.get(user)
        if known is not None and (
            self.store is None or self._monotonic() - known[0] < self.ttl_s
        ):
            return list(known[1])
        grants = await self.store.tool_grants(user) if self.store else []
        self._known[user] = (self._monotonic(), grants)
        return list(grants)

    async def allowed(self, user: str, conversation_id: str) -> list[str]:
        """The tools that run without asking in this conversation, sorted."""
        return sorted(
            {
                grant.tool
                for grant in await self.of(user)
                if grant.conversation_id in (None, conversation_id)
            }
        )

    async def grant(
        self, user: str, tool: str, conversation_id: str | None
    ) -> ToolGrantRecord:
        """Allow `tool` for `user` (in one conversation, or in all with
        None); the same grant again is the one made before."""
        grants = await self.of(user)
        for grant in grants:
            if (grant.tool, grant.conversation_id) == (tool, conversation_id):
                return grant
        record = ToolGrantRecord(
            id=uuid.uuid4().hex,
            user=user,
            tool=tool,
            conversation_id=conversation_id,
            created_at=self._clock(),
        )
        if self.store is not None:
            await self.store.add_tool_grant(record)
        self._known[user] = (self._monotonic(), [*grants, record])
        return record

    async def revoke(self, user: str, grant_id: str) -> ToolGrantRecord | None:
        """Take back one of the user's grants; None if they have none so named."""
        if self.store is not None:
            revoked = await self.store.revoke_tool_grant(user, grant_id)
        else:
            revoked = next((g for g in await self.of(user) if g.id == grant_id), None)
        if revoked is not None:
            grants = [g for g in await self.of(user) if g.id != grant_id]
            self._known[user] = (self._monotonic(), grants)
        return revoked
