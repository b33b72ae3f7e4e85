"""A reasoning model's thinking, told apart from its answer.

Servers hand it over in one of three ways: in a field of its own
(`reasoning_content` or `reasoning`, read by `openai_compat`), or inside the
content between tags — `<think>…</think>` (Qwen3, DeepSeek-R1 and their
distills), `<thinking>` or `<reasoning>` — or with only the closing tag, when
the chat template wrote the opening one into the prompt. `split` takes the
thinking out of a whole reply; `ThinkingFilter` does it as a stream comes,
so none of it reaches the user as the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TAGS = ("think", "thinking", "reasoning")
_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)
_LONGEST_TAG = max(len(f"</{tag}>") for tag in TAGS)


def split(text: str) -> tuple[str, str]:
    """(thinking, answer) of a whole reply. Every tagged section is thinking;
    an opening tag never closed makes the rest thinking (a reply cut short
    while it thought); a closing tag with no opening one before it makes
    everything before it thinking."""
    thoughts: list[str] = []
    answer: list[str] = []
    position = 0
    close = _CLOSE.search(text)
    first_open = _OPEN.search(text)
    if close is not None and (first_open is None or close.start() < first_open.start()):
        thoughts.append(text[: close.start()])
        position = close.end()
    while (opened := _OPEN.search(text, position)) is not None:
        answer.append(text[position : opened.start()])
        closed = _CLOSE.search(text, opened.end())
        if closed is None:
            thoughts.append(text[opened.end() :])
            position = len(text)
            break
        thoughts.append(text[opened.end() : closed.start()])
        position = closed.end()
    answer.append(text[position:])
    return _joined(thoughts), "".join(answer).strip()


def _joined(parts: list[str]) -> str:
    return "\n\n".join(part.strip() for part in parts if part.strip())


@dataclass
class ThinkingFilter:
    """Feeds a streamed reply's text through, keeping tagged thinking back.

    `feed` returns the text that is answer so far; a piece that may be the
    start of a tag waits for the next one (at most a tag's length).
    `thinking` collects what was inside the tags.
    """

    thinking: list[str] = field(default_factory=list)
    _pending: str = ""
    _inside: bool = False

    def feed(self, text: str) -> str:
        """The answer text among `text` and what was held back before it."""
        buffer = self._pending + text
        self._pending = ""
        shown: list[str] = []
        while buffer:
            pattern = _CLOSE if self._inside else _OPEN
            found = pattern.search(buffer)
            if found is not None:
                self._take(buffer[: found.start()], shown)
                self._inside = not self._inside
                buffer = buffer[found.end() :]
                continue
            keep = _partial_tag(buffer)
            self._take(buffer[: len(buffer) - keep], shown)
            self._pending = buffer[len(buffer) - keep :]
            break
        return "".join(shown)

    def flush(self) -> str:
        """The end of the stream: what was held back, as what it was."""
        pending, self._pending = self._pending, ""
        if self._inside:
            self.thinking.append(pending)
            return ""
        return pending

    def _take(self, text: str, shown: list[str]) -> None:
        if not text:
            return
        if self._inside:
            self.thinking.append(text)
        else:
            shown.append(text)


def _partial_tag(text: str) -> int:
    """How many characters at the end of `text` may begin a tag."""
    start = text.rfind("<", max(0, len(text) - _LONGEST_TAG))
    if start < 0:
        return 0
    tail = text[start:].lower()
    candidates = [f"<{tag}>" for tag in TAGS] + [f"</{tag}>" for tag in TAGS]
    return len(tail) if any(c.startswith(tail) for c in candidates) else 0
