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
import re
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
    calls, form = reply.tool_calls, reply.text_call_format
    if offered and not calls and content:
        found = text_calls.find(content, offered)
        if found is not None:
            log.debug("tool call(s) read from text (%s format)", found.format)
            form = found.format
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
    changed = {"content": content, "tool_calls": calls, "reasoning": thinking}
    return reply.model_copy(update={**changed, "text_call_format": form})


def arguments_text(value: object) -> str:
    """A call's arguments as JSON text, as the loop keeps them: a string as
    the server sent it; an object (some servers send one instead of a
    string) serialised; anything else "" (no arguments)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return ""


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
        not seen yet (what was held back and turned out to be no call; kept
        back still when the reply was cut off at its length limit, as the
        start of a call that never ended)."""
        final = normalise(reply, offered=self.offered, new_call_id=new_call_id)
        if self._holding and reply.finish_reason == "length" and not final.tool_calls:
            return "", final  # a call cut off at the length limit: never shown
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
        mark = _MARK.search(buffer)
        if mark is not None:
            self._holding = True
            return buffer[: mark.start()]
        keep = _partial_marker(buffer)
        self._tail = buffer[len(buffer) - keep :]
        return buffer[: len(buffer) - keep]


_MARKERS = tuple(
    marker
    for form in text_calls.FORMATS
    if form.name != "bare"
    for marker in form.markers
)
_MARK = re.compile("|".join(map(re.escape, _MARKERS)))
_PREFIXES = frozenset(
    marker[:size] for marker in _MARKERS for size in range(1, len(marker))
)
_FIRSTS = frozenset(marker[0] for marker in _MARKERS)
_LONGEST = max(map(len, _MARKERS)) - 1


def _partial_marker(text: str) -> int:
    """How many characters at the end of `text` may begin a marker (checked
    from the first character that can start one: a few per chunk at most)."""
    for start in range(max(0, len(text) - _LONGEST), len(text)):
        if text[start] in _FIRSTS and text[start:] in _PREFIXES:
            return len(text) - start
    return 0
