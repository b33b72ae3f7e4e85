"""Tool calls written as text, in the formats models use when the server has
no tool-call parser for them.

Each format is one small parser: a `name`, the `markers` that start a call
in it (a stream is held back from there), and `find`, which returns the
calls and the span of text they took, or None. `FORMATS` is the order they
are tried in; a new format is one more class here.

| format    | what the model writes                                        |
| --------- | ------------------------------------------------------------ |
| `hermes`  | `<tool_call>{"name": …, "arguments": {…}}</tool_call>`, once |
|           | or more (Qwen, Hermes, many fine-tunes)                      |
| `mistral` | `[TOOL_CALLS][{"name": …, "arguments": {…}}]`, or            |
|           | `[TOOL_CALLS]name[ARGS]{…}` (newer tokenizers)               |
| `llama`   | `<|python_tag|>{"name": …, "parameters": {…}}`, several      |
|           | separated by `;`                                             |
| `function`| `<function=name>{…}</function>` (Llama 3.1's own)            |
| `fenced`  | a ```json (or ```tool_call) block holding a call, or a list   |
| `bare`    | the whole reply is a call object, or a list of them          |

A call object is `{"name": …, "arguments": …}`, with `parameters` (or
`args`, `input`) for `arguments`, or the OpenAI shape `{"type": "function",
"function": {…}}`; arguments may be an object or a JSON string of one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from backend.llm.replies import lenient


@dataclass(frozen=True, slots=True)
class TextCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Found:
    """Calls found in a reply, and the span of the reply they took."""

    format: str
    calls: tuple[TextCall, ...]
    start: int
    end: int


class TextCallFormat(Protocol):
    name: str
    markers: tuple[str, ...]

    def find(self, text: str) -> Found | None: ...


_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


def call_of(value: object) -> TextCall | None:
    """A call object (see the module docstring) as a `TextCall`, else None."""
    if not isinstance(value, dict):
        return None
    function = value.get("function")
    if isinstance(function, dict) and value.get("type", "function") == "function":
        value = function
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    extra = set(value) - {"name", "type", "id", *_ARGUMENT_KEYS}
    if extra:
        return None  # an object that merely has a "name": not a call
    raw: object = next((value[key] for key in _ARGUMENT_KEYS if key in value), {})
    if isinstance(raw, str):
        try:
            raw = lenient.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            return None
    if not isinstance(raw, dict):
        return None
    return TextCall(name=name.strip(), arguments=raw)


def calls_of(value: object) -> tuple[TextCall, ...] | None:
    """One call object or a non-empty list of them; None if anything is not one."""
    items = value if isinstance(value, list) else [value]
    calls = [call_of(item) for item in items]
    if not calls or any(call is None for call in calls):
        return None
    return tuple(call for call in calls if call is not None)


def _decode(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value that starts at `start` (after blanks) and where it
    ends; None if there is none. Strict JSON first, then the forgiving kind
    up to the matching bracket."""
    while start < len(text) and text[start].isspace():
        start += 1
    if start >= len(text) or text[start] not in "{[":
        return None
    try:
        return json.JSONDecoder(strict=False).raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    end = _matching(text, start)
    if end is None:
        return None
    try:
        return lenient.loads(text[start:end]), end
    except (ValueError, RecursionError):
        return None


def _matching(text: str, start: int) -> int | None:
    """The end of the bracketed span opened at `start` (either quote kind
    delimits strings), None if it never closes."""
    depth, quote, index = 0, "", start
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


class Tagged:
    """`<open>{call}</close>` sections, one call each; the closing tag may be
    missing at the end of the reply."""

    def __init__(self, name: str, opening: str, closing: str) -> None:
        self.name = name
        self.markers: tuple[str, ...] = (opening,)
        self._opening = opening
        self._closing = closing

    def find(self, text: str) -> Found | None:
        calls: list[TextCall] = []
        first = text.find(self._opening)
        position = first
        while position >= 0:
            decoded = _decode(text, position + len(self._opening))
            if decoded is None:
                return None
            found = calls_of(decoded[0])
            if found is None:
                return None
            calls.extend(found)
            end = decoded[1]
            rest = text[end:].lstrip()
            if rest.startswith(self._closing):
                end = len(text) - len(rest) + len(self._closing)
            last_end = end
            position = text.find(self._opening, end)
        if not calls:
            return None
        return Found(self.name, tuple(calls), first, last_end)


class Mistral:
    """`[TOOL_CALLS]` then a list of call objects, or `name[ARGS]{…}` (or
    `name{…}`) once or more."""

    name: str = "mistral"
    markers: tuple[str, ...] = ("[TOOL_CALLS]",)
    _NAMED = re.compile(r"\s*([A-Za-z0-9_.\-]+)\s*(?:\[ARGS\])?\s*(?=\{)")

    def find(self, text: str) -> Found | None:
        first = text.find("[TOOL_CALLS]")
        if first < 0:
            return None
        calls: list[TextCall] = []
        position = first
        end = first
        while text.startswith("[TOOL_CALLS]", position):
            position += len("[TOOL_CALLS]")
            named = self._NAMED.match(text, position)
            decoded = _decode(text, named.end() if named else position)
            if decoded is None:
                return None
            value, end = decoded
            if named is not None:
                value = {"name": named.group(1), "arguments": value}
            found = calls_of(value)
            if found is None:
                return None
            calls.extend(found)
            position = end
            while position < len(text) and text[position].isspace():
                position += 1
        return Found(self.name, tuple(calls), first, end)


class Llama:
    """`<|python_tag|>` then call objects separated by `;`, up to an end token."""

    name: str = "llama"
    markers: tuple[str, ...] = ("<|python_tag|>",)
    _ENDS = ("<|eom_id|>", "<|eot_id|>")

    def find(self, text: str) -> Found | None:
        first = text.find("<|python_tag|>")
        if first < 0:
            return None
        calls: list[TextCall] = []
        position = first + len("<|python_tag|>")
        while True:
            decoded = _decode(text, position)
            if decoded is None:
                break
            found = calls_of(decoded[0])
            if found is None:
                return None
            calls.extend(found)
            position = decoded[1]
            rest = text[position:].lstrip()
            if not rest.startswith(";"):
                break
            position = len(text) - len(rest) + 1
        if not calls:
            return None
        rest = text[position:].lstrip()
        for end_token in self._ENDS:
            if rest.startswith(end_token):
                position = len(text) - len(rest) + len(end_token)
        return Found(self.name, tuple(calls), first, position)


class Function:
    """`<function=name>{…}</function>`, once or more."""

    name: str = "function"
    markers: tuple[str, ...] = ("<function=",)
    _TAG = re.compile(r"<function=([A-Za-z0-9_.\-]+)>")

    def find(self, text: str) -> Found | None:
        calls: list[TextCall] = []
        start = end = -1
        for tag in self._TAG.finditer(text):
            if tag.start() < end:
                continue
            decoded = _decode(text, tag.end())
            if decoded is None:
                return None
            call = call_of({"name": tag.group(1), "arguments": decoded[0]})
            if call is None:
                return None
            calls.append(call)
            start = tag.start() if start < 0 else start
            end = decoded[1]
            rest = text[end:].lstrip()
            if rest.startswith("</function>"):
                end = len(text) - len(rest) + len("</function>")
        if not calls:
            return None
        return Found(self.name, tuple(calls), start, end)


class Fenced:
    """A fenced code block (```json, ```tool_call, ```tool or none) that holds
    a call object or a list of them: the last such block."""

    name: str = "fenced"
    markers: tuple[str, ...] = ("```",)
    _FENCE = re.compile(
        r"```(?:json|tool_call|tool_calls|tool)?[ \t]*\n?(.*?)```",
        re.DOTALL | re.IGNORECASE,
    )

    def find(self, text: str) -> Found | None:
        for fence in reversed(list(self._FENCE.finditer(text))):
            body = fence.group(1).strip()
            decoded = _decode(body, 0)
            if decoded is None or body[decoded[1] :].strip():
                continue
            calls = calls_of(decoded[0])
            if calls is not None:
                return Found(self.name, calls, fence.start(), fence.end())
        return None


class Bare:
    """The whole reply is a call object or a list of them."""

    name: str = "bare"
    markers: tuple[str, ...] = ("{", "[")

    def find(self, text: str) -> Found | None:
        stripped = text.strip()
        decoded = _decode(stripped, 0)
        if decoded is None or stripped[decoded[1] :].strip():
            return None
        calls = calls_of(decoded[0])
        if calls is None:
            return None
        start = text.find(stripped[:1])
        return Found(self.name, calls, start, len(text))


FORMATS: tuple[TextCallFormat, ...] = (
    Tagged("hermes", "<tool_call>", "</tool_call>"),
    Mistral(),
    Llama(),
    Function(),
    Fenced(),
    Bare(),
)
"""The formats, tried in this order (the most specific markers first)."""


def find(text: str, offered: frozenset[str]) -> Found | None:
    """The first format whose calls are all of `offered` tools; None when no
    format finds any (a call of a tool not offered is left as text)."""
    for form in FORMATS:
        found = form.find(text)
        if found is not None and all(call.name in offered for call in found.calls):
            return found
    return None
