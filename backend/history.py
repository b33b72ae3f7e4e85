"""A session's conversation: the messages every LLM call is built from."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from backend.llm.base import Message


class History:
    """Ordered messages: user, assistant (with tool calls), tool results."""

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._messages: list[Message] = list(messages)

    def append(self, message: Message) -> None:
        self._messages.append(message)

    def clear(self) -> None:
        self._messages.clear()

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    def __getitem__(self, index: int) -> Message:
        return self._messages[index]

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    def window(self, max_messages: int) -> list[Message]:
        """The most recent messages, starting at a user message.

        Cutting elsewhere could orphan tool results from the assistant message
        that requested them, which providers reject. The latest user message
        is always kept, even when its run alone is longer than the window.
        """
        start = max(0, len(self._messages) - max_messages)
        for i in range(start, len(self._messages)):
            if self._messages[i].role == "user":
                return self._messages[i:]
        last_user = self._last_user_index()
        return self._messages[last_user:] if last_user is not None else []

    def _last_user_index(self) -> int | None:
        for i in range(len(self._messages) - 1, -1, -1):
            if self._messages[i].role == "user":
                return i
        return None

    def close_dangling_tool_calls(self, note: str) -> list[str]:
        """Give every unanswered tool call a result (`note`); return their ids.

        After a stop the last assistant message may have requested tools that
        never ran; providers reject such a history, so each gets a result.
        """
        answered = {m.tool_call_id for m in self._messages if m.role == "tool"}
        closed: list[str] = []
        for message in list(self._messages):
            for call in message.tool_calls:
                if call.id not in answered:
                    reason = note.split(": ", 1)[-1].rstrip(".")
                    cut = Message.tool(call.id, call.name, note, "cancelled", reason)
                    self._messages.append(cut)
                    closed.append(call.id)
        return closed
