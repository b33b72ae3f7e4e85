"""One reply, whatever shape the server gave it, as the loop expects it.

`normalise` takes a `Completion` as read off the wire: the thinking goes
to `reasoning` (never into the content a control block is looked for in),
and, when tools were offered and the server returned no native call, a
call written as text (`text_calls`) becomes a real `ToolCall` with a fresh
id — only for a tool that was offered; its arguments are checked later, as
every call's are. `ReplyStream` does the same to a stream as it comes: the
user sees the answer's text, never the thinking or a call's JSON.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from backend.llm.base import Completion, ToolCall
from backend.llm.replies import reasoning, text_calls

log = logging.getLogger(__name__)


def normalise(
    reply: Completion, *, offered: frozenset[str], new_call_id: Callable[[], str]
) -> Completion:
    """`reply` with its thinking split out and its text calls made real."""
    thinking, content = reasoning.split(reply.content)
    if reply.reasoning:
        thinking = "\n\n".join(part for part in (reply.reasoning, thinking) if part)
    calls = reply.tool_calls
    if offered and not calls and content:
        found = text_calls.find(content, offered)
        if found is not None:
            log.debug("tool call(s) read from text (%s format)", found.format)
            calls = tuple(
                ToolCall(
                    id=new_call_id(),
                    name=call.name,
                    arguments=json.dumps(call.arguments, ensure_ascii=False),
                )
                for call in found.calls
            )
            content = (content[: found.start] + content[found.end :]).strip()
    if (thinking, content, calls) == (reply.reasoning, reply.content, reply.tool_calls):
        return reply
    return reply.model_copy(
        update={"content": content, "tool_calls": calls, "reasoning": thinking}
    )


@dataclass
class ReplyStream:
    """A streamed reply's text, filtered as it comes: `feed` returns what the
    user may see now. Thinking never shows; with tools offered, text from the
    first mark of a text call on (or the whole reply, when it opens with `{`
    or `[`) is held until `finish` knows whether it was one."""

    offered: frozenset[str]
    shown: list[str] = field(default_factory=list)
    _thinking: reasoning.ThinkingFilter = field(
        default_factory=reasoning.ThinkingFilter
    )
    _tail: str = ""
    _holding: bool = False

    def feed(self, text: str) -> str:
        visible = self._gate(self._thinking.feed(text))
        if visible:
            self.shown.append(visible)
        return visible

    def finish(
        self, reply: Completion, new_call_id: Callable[[], str]
    ) -> tuple[str, Completion]:
        """The whole reply normalised, and the rest of its answer the user has
        not seen yet (what was held back and turned out to be no call)."""
        final = normalise(reply, offered=self.offered, new_call_id=new_call_id)
        shown = "".join(self.shown)
        if final.content.startswith(shown):
            return final.content[len(shown) :], final
        return "", final

    def _gate(self, text: str) -> str:
        if self._holding or not text:
            return ""
        buffer = self._tail + text
        self._tail = ""
        if not self.shown:
            buffer = buffer.lstrip()
            if not buffer:
                return ""
            if self.offered and buffer[0] in "{[":
                self._holding = True
                return ""
        if not self.offered:
            return buffer
        marks = [
            at
            for form in text_calls.FORMATS
            if form.name != "bare"
            for marker in form.markers
            if (at := buffer.find(marker)) >= 0
        ]
        if marks:
            self._holding = True
            return buffer[: min(marks)]
        keep = _partial_marker(buffer)
        self._tail = buffer[len(buffer) - keep :]
        return buffer[: len(buffer) - keep]


_MARKERS = tuple(
    marker
    for form in text_calls.FORMATS
    if form.name != "bare"
    for marker in form.markers
)


def _partial_marker(text: str) -> int:
    """How many characters at the end of `text` may begin a marker."""
    for size in range(min(len(text), max(map(len, _MARKERS)) - 1), 0, -1):
        tail = text[-size:]
        if any(marker.startswith(tail) for marker in _MARKERS):
            return size
    return 0
