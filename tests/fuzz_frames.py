"""Hypothesis strategies for hostile client frames (used by `test_fuzz.py`).

Each `Fuzz` is one WebSocket frame (text, or binary, or raw bytes sent as
a text frame) and what the server must do with it:

- `invalid`: exactly one `error` frame, `invalid_message`;
- `answered`: at least one answer — an `error` of any kind, a
  `session_reset`, or a run (the frame may be valid);
- `close:1007`: a text frame that is not UTF-8 (uvicorn closes the socket);
- `close:1009`: a frame over the transport's limit (`ws_max_size`).

The size rules come first: over `WS_MAX_SIZE` bytes is a 1009 close, over
`MAX_MESSAGE_BYTES` an `invalid_message` error, whatever the content.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import strategies as st

MAX_MESSAGE_BYTES = 256 * 1024
"""The fuzzed server's `max_message_bytes`: large enough for JSON nested
100,000 deep to reach the parser, not just the size check."""
WS_MAX_SIZE = max(4 * MAX_MESSAGE_BYTES, 1 << 20)
"""What `python -m backend serve` gives uvicorn as `ws_max_size`."""

Expect = Literal["invalid", "answered", "close:1007", "close:1009"]
TYPES = ("chat", "agent_control", "agent_user_input", "tool_approval_response")
TYPES += ("reset_session",)


@dataclass(frozen=True)
class Fuzz:
    kind: str
    data: str | bytes
    text: bool
    """Sent as a text frame (bytes too: raw, possibly not UTF-8)."""
    expect: Expect

    def __repr__(self) -> str:  # Hypothesis prints failing examples: keep it short
        size = len(self.data.encode() if isinstance(self.data, str) else self.data)
        shown = repr(self.data[:120]) + ("…" if len(self.data) > 120 else "")
        frame = "text" if self.text else "binary"
        return f"Fuzz({self.kind}, {frame}, {size} bytes, {self.expect}: {shown})"


def _text(kind: str, data: str, expect: Expect) -> Fuzz:
    size = len(data.encode())
    if size > WS_MAX_SIZE:
        expect = "close:1009"
    elif size > MAX_MESSAGE_BYTES:
        expect = "invalid"
    return Fuzz(kind, data, True, expect)


def _raw_text(kind: str, data: bytes) -> Fuzz:
    if len(data) > WS_MAX_SIZE:
        return Fuzz(kind, data, True, "close:1009")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return Fuzz(kind, data, True, "close:1007")
    expect: Expect = "invalid" if len(data) > MAX_MESSAGE_BYTES else "answered"
    return Fuzz(kind, data, True, expect)


def _binary(kind: str, data: bytes) -> Fuzz:
    expect: Expect = "close:1009" if len(data) > WS_MAX_SIZE else "invalid"
    return Fuzz(kind, data, False, expect)


# ---------------------------------------------------------------- values

ids = st.text(
    st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20
)
words = st.text(min_size=1, max_size=40).filter(lambda s: s.strip())
GOOD: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "chat": {
        "content": words,
        "agent_mode": st.booleans(),
        "agent_max_steps": st.integers(1, 60),
        "selected_tools": st.lists(st.sampled_from(["calculator", "current_time"])),
        "loop_strategy": st.sampled_from(["react", "act", "plan_execute", "llm_only"]),
        "read_only": st.booleans(),
        "model": st.just("loopwire-offline"),
        "temperature": st.floats(0, 2),
        "save_chat": st.booleans(),
        "include_history": st.booleans(),
        "system_prompt": words,
        "replace_from": ids,
    },
    "agent_control": {
        "action": st.sampled_from(["stop", "stop_after_step", "grant_steps"]),
        "steps": st.integers(1, 100),
    },
    "agent_user_input": {"content": words, "question_id": ids},
    "tool_approval_response": {
        "tool_call_id": ids,
        "approved": st.booleans(),
        "reason": st.text(max_size=40),
    },
    "reset_session": {},
}
REQUIRED = {"chat": {"content"}, "agent_control": {"action"}}
REQUIRED |= {"agent_user_input": {"content"}}
REQUIRED |= {"tool_approval_response": {"tool_call_id", "approved"}}

hostile_values: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(["", " ", "5", "yes", "true", "null", "\x00", "\u202e", "😀"]),
    st.sampled_from([0, -1, 10**30, -(10**30), 1e308, -0.0, 5e-324]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["type", "content", "x"]) | st.text(), inner)
    ),
    max_leaves=20,
)


def _dumps(value: Any, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only, allow_nan=False)


# ---------------------------------------------------------------- frames


@st.composite
def message_like(draw: st.DrawFn) -> Fuzz:
    """A real frame type (mostly) with each field right, wrong or missing,
    and sometimes fields the protocol does not have."""
    kind = draw(st.sampled_from(TYPES) | st.text(max_size=20) | hostile_values)
    fields = GOOD.get(kind, {}) if isinstance(kind, str) else {}
    frame: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        frame["type"] = kind
    for name, good in fields.items():
        how = draw(st.sampled_from(["good", "good", "wrong", "missing"]))
        if how == "good":
            frame[name] = draw(good)
        elif how == "wrong":
            frame[name] = draw(hostile_values)
    extra = draw(st.dictionaries(st.text(max_size=20), hostile_values, max_size=2))
    unknown = {k: v for k, v in extra.items() if k not in fields and k != "type"}
    frame.update(unknown)
    clearly_invalid = bool(unknown) or "type" not in frame or kind not in TYPES
    expect: Expect = "invalid" if clearly_invalid else "answered"
    return _text("message_like", _dumps(frame, draw(st.booleans())), expect)


@st.composite
def valid_frame(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(TYPES))
    frame: dict[str, Any] = {"type": kind}
    for name, good in GOOD[kind].items():
        if name in REQUIRED.get(kind, ()) or draw(st.booleans()):
            frame[name] = draw(good)
    return _dumps(frame, draw(st.booleans()))


@st.composite
def truncated(draw: st.DrawFn) -> Fuzz:
    text = draw(valid_frame())
    return _text("truncated", text[: draw(st.integers(0, len(text) - 1))], "invalid")


@st.composite
def any_json(draw: st.DrawFn) -> Fuzz:
    value = draw(json_values)
    plausible = isinstance(value, dict) and value.get("type") in TYPES
    expect: Expect = "answered" if plausible else "invalid"
    return _text("any_json", _dumps(value, draw(st.booleans())), expect)


NUMBER_SLOTS = (
    '{"type": "chat", "content": "hi", "agent_max_steps": %s}',
    '{"type": "chat", "content": "hi", "temperature": %s}',
    '{"type": "agent_control", "action": "grant_steps", "steps": %s}',
    '{"type": "reset_session", "x": %s}',
    "[%s]",
    "%s",
)
ODD_NUMBERS = (
    "1e400", "-1e400", "1e-400", "1E999999999999", "-0", "0.5e-999", "1.0", "2.0000000000001",
    "NaN", "-NaN", "Infinity", "-Infinity", "01", "+1", ".5", "1.", "0x10", "1_000", "1e", "--1",
)  # fmt: skip


@st.composite
def huge_number(draw: st.DrawFn) -> Fuzz:
    """Long digit strings (past the 30-digit bound, and past the frame size),
    long fractions and exponents, and what JSON does not allow."""
    digits = st.integers(1, 300_000)
    number = draw(
        st.sampled_from(ODD_NUMBERS)
        | digits.map(lambda n: "9" * n)
        | st.integers(1, 40).map(lambda n: "-" + "1" * n)
        | st.tuples(digits, digits).map(lambda t: "1" * t[0] + "." + "5" * t[1])
        | st.integers(1, 20_000).map(lambda n: f"1e{'9' * n}")
    )
    return _text(
        "huge_number", draw(st.sampled_from(NUMBER_SLOTS)) % number, "answered"
    )


@st.composite
def deep(draw: st.DrawFn) -> Fuzz:
    """Nesting up to 100,000 deep, in every shape (and brackets in a string,
    which are not nesting)."""
    depth = draw(
        st.sampled_from([31, 32, 33, 1_000, 100_000]) | st.integers(1, 100_000)
    )
    shape = draw(
        st.sampled_from(["arrays", "objects", "open", "field", "mixed", "string"])
    )
    text = {
        "arrays": "[" * depth + "]" * depth,
        "objects": '{"":' * depth + "1" + "}" * depth,
        "open": "[" * depth,
        "field": '{"type": "chat", "content": "hi", "x": '
        + "[" * depth
        + "]" * depth
        + "}",
        "mixed": '[{"a":' * (depth // 2) + "0" + "}]" * (depth // 2),
        "string": '{"type": "chat", "content": "' + "[{" * depth + '"}',
    }[shape]
    return _text(f"deep_{shape}", text, "answered" if shape == "string" else "invalid")


STRING_SLOTS: dict[str, tuple[str, Expect]] = {
    "type": ('{"type": "%s"}', "invalid"),
    "content": ('{"type": "chat", "content": "%s"}', "answered"),
    "question_id": ('{"type": "agent_user_input", "content": "a", "question_id": "%s"}', "answered"),
    "model": ('{"type": "chat", "content": "hi", "model": "%s"}', "answered"),
    "key": ('{"type": "reset_session", "%s": 1}', "invalid"),
    "bare": ('"%s"', "invalid"),
}  # fmt: skip
UNITS = ("x", "é", "€", "😀", "\\\\", "\\u0000", '\\"', "\\ud83d\\ude00", " ")


@st.composite
def huge_string(draw: st.DrawFn) -> Fuzz:
    """Strings from empty to past the transport's limit, around both limits
    most often, in one- to four-byte characters and JSON escapes."""
    size = draw(
        st.integers(0, WS_MAX_SIZE + 100_000)
        | st.integers(MAX_MESSAGE_BYTES - 80, MAX_MESSAGE_BYTES + 80)
        | st.integers(WS_MAX_SIZE - 80, WS_MAX_SIZE + 80)
    )
    unit = draw(st.sampled_from(UNITS))
    slot, expect = STRING_SLOTS[draw(st.sampled_from(sorted(STRING_SLOTS)))]
    body = unit * max(0, (size - len(slot)) // len(unit.encode()))
    if slot.startswith('{"type": "chat"') and not body.strip():
        expect = "invalid"  # blank content
    return _text("huge_string", slot % body, expect)


@st.composite
def many_names(draw: st.DrawFn) -> Fuzz:
    """Many unknown fields, or many (unknown) tool names, each up to 300
    characters: the error must name a few, not echo them all."""
    count = draw(st.integers(1, 5_000))
    length = draw(st.integers(1, 300))
    names = [f"n{i}".rjust(length, "n") for i in range(count)]
    if draw(st.booleans()):
        fields = ", ".join(f'"{name}": 1' for name in names)
        text = '{"type": "chat", "content": "hi", ' + fields + "}"
        return _text("many_fields", text, "invalid")
    text = json.dumps({"type": "chat", "content": "hi", "selected_tools": names})
    return _text("many_tools", text, "answered")


@st.composite
def duplicate_keys(draw: st.DrawFn) -> Fuzz:
    keys = st.sampled_from(
        ["type", "content", "action", "approved", "tool_call_id", "x"]
    )
    values = st.sampled_from(TYPES) | hostile_values
    pairs = draw(st.lists(st.tuples(keys, values), min_size=2, max_size=8))
    pairs.append(draw(st.sampled_from(pairs)))  # at least one key twice
    text = (
        "{" + ", ".join(f"{json.dumps(k)}: {_dumps(v, True)}" for k, v in pairs) + "}"
    )
    return _text("duplicate_keys", text, "answered")


ODD_TEXT = (
    "", " ", "\n", "\ufeff{}", "{}", "[]", "null", '"type"', '{"type": null}', '{"type": "chat"}',
    '{"type": "chat", "content": ""}', '{"type": "chat", "content": "   "}',
    '{"type": "chat", "content": "hi"}garbage', '{"type": "chat", "content": "hi"}{}',
    '{"type": "chat", "content": "a\x00b"}', '{"type": "chat", "content": "\\ud800"}',
    '{"type": "chat", "content": "\\udfff\\ud800"}', '{"type": "agent_control", "action": "grant_steps"}',
    "\x00", "\ufeff", '{"type": "chat", "content": "hi", "agent_mode": "true"}',
    '{"type": "chat", "content": "hi", "agent_max_steps": "5"}', '{"type": "CHAT", "content": "hi"}',
    "{'type': 'chat'}", '{type: "chat"}', '{"type": "chat",}', '{"type": "chat" "content": "hi"}',
)  # fmt: skip


def odd_text() -> st.SearchStrategy[Fuzz]:
    return st.sampled_from(ODD_TEXT).map(lambda t: _text("odd_text", t, "answered"))


def random_text() -> st.SearchStrategy[Fuzz]:
    return st.text(max_size=300).map(lambda t: _text("random_text", t, "answered"))


def binary_frames() -> st.SearchStrategy[Fuzz]:
    small = st.binary(max_size=300)
    large = st.integers(0, WS_MAX_SIZE + 50_000).map(lambda n: b"\x00\xff" * (n // 2))
    return (small | large).map(lambda b: _binary("binary", b))


def raw_text_frames() -> st.SearchStrategy[Fuzz]:
    """Random bytes in a text frame: invalid UTF-8 most of the time."""
    odd = st.sampled_from([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b'{"type": "\xff"}'])
    return (st.binary(max_size=300) | odd).map(lambda b: _raw_text("raw_text", b))


def fuzz_frames() -> st.SearchStrategy[Fuzz]:
    return st.one_of(
        message_like(),
        message_like(),
        any_json(),
        truncated(),
        huge_number(),
        deep(),
        huge_string(),
        many_names(),
        duplicate_keys(),
        odd_text(),
        random_text(),
        binary_frames(),
        raw_text_frames(),
    )
