"""A session's conversation: the messages every LLM call is built from."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from backend.llm.tokens import estimate_message_tokens
from backend.transcript import Message

STARTS = ("user", "assistant")
"""The roles a window may start with: not a tool result, and not a system
note (a side effect's, which would lose the result it is about)."""


class History:
    """Ordered messages: user, assistant (with tool calls), tool results, and
    system notes (a tool's side effects).

    Alongside the messages it keeps, computed once on append, what `window`
    needs on every LLM call: each message's estimated token cost and, for a
    tool result, where the assistant message that asked for it is.
    """

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._messages: list[Message] = []
        self._tokens: list[int] = []
        """Each message's `estimate_message_tokens`."""
        self._before: list[int] = []
        """Per message, the sum of the costs of the messages before it (where
        it lies in the history, in tokens: `window` blocks are cut by it)."""
        self._owners: list[int] = []
        """Per message, the index a window must reach back to so as to hold
        it: a tool result's assistant call; any other message's own index (a
        tool result whose call is not in the history, too)."""
        self._calls: dict[str, int] = {}
        """Tool call id → the index of the assistant message that made it
        (the latest, should ids repeat across runs)."""
        self._compacted: dict[tuple[int, int], tuple[Message, int]] = {}
        """(index, kept chars) → a long tool result's compacted copy, its cost."""
        for message in messages:
            self.append(message)

    def append(self, message: Message) -> None:
        index = len(self._messages)
        self._messages.append(message)
        self._before.append(self._before[-1] + self._tokens[-1] if index else 0)
        self._tokens.append(estimate_message_tokens(message))
        owner = index
        if message.role == "tool" and message.tool_call_id is not None:
            owner = self._calls.get(message.tool_call_id, index)
        self._owners.append(owner)
        for call in message.tool_calls:
            self._calls[call.id] = index

    def clear(self) -> None:
        self.truncate(0)

    def truncate(self, length: int) -> None:
        """Keep the first `length` messages only (an edit cut the rest).

        The caches follow: a call id made only by a cut message is forgotten
        (a result appended later with that id has no call in the history, as
        if the call had never been made); one made again earlier points back
        to the latest kept message that made it.
        """
        length = min(max(length, 0), len(self._messages))
        del self._messages[length:]
        del self._tokens[length:]
        del self._before[length:]
        del self._owners[length:]
        cut = {call_id for call_id, index in self._calls.items() if index >= length}
        for call_id in cut:
            del self._calls[call_id]
        if cut:
            for index, message in enumerate(self._messages):
                for call in message.tool_calls:
                    if call.id in cut:
                        self._calls[call.id] = index
        for key in [key for key in self._compacted if key[0] >= length]:
            del self._compacted[key]

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    def __getitem__(self, index: int) -> Message:
        return self._messages[index]

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    # ------------------------------------------------------------ the window

    def window(
        self,
        budget_tokens: int,
        *,
        tool_output_chars: int,
        since: int = 0,
        current_tool_chars: int | None = None,
        whole_current: bool = True,
        block_tokens: int = 0,
    ) -> list[Message]:
        """The newest messages (from `since` on) that fit `budget_tokens`.

        The budget bounds these messages only, as `backend.llm.tokens`
        estimates them; the system prompt, the tools offered and the phase
        prompt a request adds come on top of it.

        - The current request — the last user message and everything after it
          — is always kept, even when it alone is over budget. (An answer to
          a question a strategy asked in words is a user message, so it
          starts the current request; answers to `request_input` are tool
          results and do not.)
        - The window is a suffix of the history that starts at a user or
          assistant message and holds every tool result's assistant call: a
          tool call is never separated from its results (a cut inside a call
          group, or at a tool result, would orphan results, which providers
          reject). It need not start at a user message.
        - Older tool results (before the current request) longer than
          `tool_output_chars` are sent as their head and a note of how much
          was omitted; the current request's are sent whole, or shortened
          the same way to `current_tool_chars` when that is given.

        A model's context window may not hold even the current request
        (`ModelCalls` fits each request to it): with `whole_current` false
        the window is the current user message followed by the newest of
        what came after it that fits the budget (whole call groups only),
        so older steps of a long run are left out.

        With `block_tokens`, older history is left out in whole blocks (cut
        at fixed costs, which appends do not move), so the window's start —
        and the prompt prefix a provider caches — stays put while a run
        grows; up to a block more than needed is left out (`_block_start`).

        The history itself is never changed: compacted messages are copies.
        Costs were estimated on append, so a call looks at the messages it
        returns and the few before them, not the whole history.
        """
        since = min(max(since, 0), len(self._messages))
        current = self._last_user_index(since)
        limits = _Limits(current, tool_output_chars, current_tool_chars)
        if not whole_current and current < len(self._messages):
            return self._tight(budget_tokens, limits)
        start = self._window_start(budget_tokens, limits, since)
        if block_tokens > 0:
            start = self._block_start(start, current, block_tokens, since)
        shown = range(start, len(self._messages))
        return [self._shown(i, limits)[0] for i in shown]

    def _window_start(self, budget: int, limits: _Limits, since: int) -> int:
        """Walk back from the end, adding costs, and take the earliest safe
        start whose suffix fits (the latest safe one at or before `current`
        when even that does not fit)."""
        current = limits.current
        start, total, reach = len(self._messages), 0, len(self._messages)
        for i in range(len(self._messages) - 1, since - 1, -1):
            total += self._shown(i, limits)[1]
            reach = min(reach, self._owners[i])
            if start <= current and total > budget:
                break
            if i <= current and reach == i and self._messages[i].role in STARTS:
                start = i
        # Only a history that is malformed already (a tool result before its
        # call, or its call before `since`) has no safe start at all.
        return min(start, current)

    def _block_start(self, start: int, current: int, block: int, since: int) -> int:
        """The first safe start from `start` on that is the first safe start
        of its block, else `current`; `start` itself when no safe start
        comes before it (nothing was left out) or there is no current
        request."""
        safe = self._safe_starts(since, start, current)
        if not safe or safe[0] >= start:
            return start
        for previous, candidate in itertools.pairwise(safe):
            if self._before[previous] // block != self._before[candidate] // block:
                return candidate
        return current if current < len(self._messages) else start

    def _safe_starts(self, since: int, start: int, current: int) -> list[int]:
        """The safe starts (see `window`) from `start` to `current`, after the
        last one before `start` if there is one; ascending."""
        reach, found = len(self._messages), []
        for i in range(len(self._messages) - 1, since - 1, -1):
            reach = min(reach, self._owners[i])
            if i <= current and reach == i and self._messages[i].role in STARTS:
                found.append(i)
                if i < start:
                    break
        return found[::-1]

    def _tight(self, budget: int, limits: _Limits) -> list[Message]:
        """The current user message and the newest safe suffix after it
        that fits `budget` with it (possibly none)."""
        current = limits.current
        first, total = self._shown(current, limits)
        start, reach = len(self._messages), len(self._messages)
        for i in range(len(self._messages) - 1, current, -1):
            total += self._shown(i, limits)[1]
            reach = min(reach, self._owners[i])
            if total > budget:
                break
            if reach == i and self._messages[i].role in STARTS:
                start = i
        rest = range(start, len(self._messages))
        return [first, *(self._shown(i, limits)[0] for i in rest)]

    def _shown(self, index: int, limits: _Limits) -> tuple[Message, int]:
        """The message as the model gets it in a window, and its cost."""
        message = self._messages[index]
        content = message.content or ""
        chars = limits.chars(index)
        if chars is None or message.role != "tool" or len(content) <= chars:
            return message, self._tokens[index]
        key = (index, chars)
        if key not in self._compacted:
            note = f"\n… [{len(content) - chars} chars omitted]"
            short = message.model_copy(update={"content": content[:chars] + note})
            self._compacted[key] = (short, estimate_message_tokens(short))
        return self._compacted[key]

    def _last_user_index(self, since: int) -> int:
        """The last user message at or after `since`; the end if none."""
        for i in range(len(self._messages) - 1, since - 1, -1):
            if self._messages[i].role == "user":
                return i
        return len(self._messages)

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
                    self.append(cut)
                    closed.append(call.id)
        return closed


@dataclass(frozen=True, slots=True)
class _Limits:
    """How long a window's tool results may be: `older` characters before
    the current request (which starts at `current`), `current` ones after
    (None: whole)."""

    current: int
    older: int
    in_current: int | None

    def chars(self, index: int) -> int | None:
        return self.older if index < self.current else self.in_current
