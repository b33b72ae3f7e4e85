"""`Instructions`: what a user wrote once for every run to follow.

A user's own instructions apply to all their conversations; a
conversation's add to them. Both are stored (`Store.user_instructions`,
`conversations.settings["instructions"]`), read together in one statement
when a run starts and kept in its `RunRequest` (so a run
continued after a restart or on another instance follows what it started
with), and sent after the server's fixed system prompt, the user's first
(`ModelCalls.request`). Empty text clears them; longer than
`instructions_max_chars` is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from backend.agent.state import START, RunState
from backend.errors import InvalidMessage
from backend.store.base import Store


class Instructions:
    def __init__(
        self,
        store: Store | None,
        *,
        max_chars: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Without a store there are none (nothing could keep them)."""
        self.store = store
        self.max_chars = max_chars
        self._clock = clock

    def checked(self, text: str) -> str:
        """`text` as kept (blank: empty), or refused when too long."""
        if len(text) > self.max_chars:
            raise InvalidMessage(
                f"instructions are {len(text)} characters; the limit is "
                f"{self.max_chars} (LOOPWIRE_INSTRUCTIONS_MAX_CHARS)"
            )
        return text if text.strip() else ""

    async def of_user(self, user: str) -> str:
        return await self.store.user_instructions(user) if self.store else ""

    async def set_user(self, user: str, text: str) -> str:
        text = self.checked(text)
        if self.store is not None:
            await self.store.set_user_instructions(user, text, self._clock())
        return text

    async def set_conversation(self, conversation_id: str, text: str) -> bool:
        """False: there is no such conversation."""
        text = self.checked(text)
        if self.store is None:
            return False
        return await self.store.set_conversation_instructions(conversation_id, text)

    async def apply(self, state: RunState) -> None:
        """A run about to start takes its user's and conversation's."""
        if self.store is None or state.phase != START:
            return
        own, here = await self.store.run_instructions(state.owner, state.session_id)
        request = state.request
        if (own, here) != (
            request.user_instructions,
            request.conversation_instructions,
        ):
            update = {"user_instructions": own, "conversation_instructions": here}
            state.request = request.model_copy(update=update)
