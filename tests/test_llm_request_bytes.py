"""The bytes of a chat completions request: `wire.body` puts them together
with each tool's JSON encoded once (`openai_compat/fragments.py`), and they
are `json.dumps` of the dict form (`wire.payload`), compact, byte for byte —
for any request and every profile, a profile with a parameter refused,
streamed or not, and whether the tools were encoded by this request or an
earlier one. Prompt caches depend on those exact bytes
(`tests/test_prompt_cache.py`)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.llm.base import LLMRequest, Message, ToolCall, ToolSpec
from backend.llm.openai_compat import wire
from backend.llm.openai_compat.fragments import Fragments
from backend.llm.openai_compat.profiles import DROPPABLE, PROFILES, Profile

ALL_PROFILES = [
    *PROFILES.values(),
    *(p.without(parameter) for p in PROFILES.values() for parameter in DROPPABLE),
    *(
        Profile("back", "reasoning back", reasoning_back=True, parallel_tool_calls=b)
        for b in (True, False)
    ),
]
"""Every profile, each less every parameter a server can refuse, and the
thinking sent back with and without `parallel_tool_calls`."""

TEXT = st.text(max_size=40)  # any code point: JSON escapes, non-ASCII as is
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3)
    ),
    max_leaves=8,
)
CALLS = st.builds(ToolCall, id=TEXT, name=TEXT, arguments=TEXT)
MESSAGES = st.one_of(
    st.builds(Message.system, TEXT),
    st.builds(Message.user, TEXT),
    st.builds(Message.interjection, TEXT),
    st.builds(
        Message.assistant,
        st.none() | TEXT,
        st.lists(CALLS, max_size=2),
        st.none() | TEXT,
    ),
    st.builds(Message.tool, TEXT, TEXT, TEXT),
    st.builds(Message, role=st.just("assistant"), content=TEXT, name=TEXT),
)
SPECS = st.builds(
    ToolSpec,
    name=TEXT,
    description=TEXT,
    parameters=st.dictionaries(TEXT, JSON_VALUES, max_size=4),
)
REQUESTS = st.builds(
    LLMRequest,
    messages=st.lists(MESSAGES, max_size=6).map(tuple),
    tools=st.lists(SPECS, max_size=3).map(tuple),
    tool_choice=st.sampled_from([None, "auto", "none", "required"]),
    model=st.none() | TEXT,
    temperature=st.none() | st.floats(0, 2),
    max_tokens=st.none() | st.integers(1, 10**6),
)


def dumped(body: dict[str, Any]) -> bytes:
    """The dict form as JSON, the way the body is meant to read."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def assert_same_bytes(request: LLMRequest, profile: Profile, stream: bool) -> None:
    """`wire.body` of `request` is `json.dumps` of its `wire.payload`, and
    names the payload's fields in order."""
    kwargs: dict[str, Any] = {"default_model": "m", "profile": profile}
    expected = wire.payload(request, **kwargs, stream=stream)
    sent, fields = wire.body(request, **kwargs, stream=stream)
    assert sent == dumped(expected)
    assert fields == list(expected)


@settings(max_examples=300, deadline=None)
@given(
    request=REQUESTS,
    profile=st.sampled_from(ALL_PROFILES),
    stream=st.booleans(),
)
def test_the_bytes_are_the_dict_form_dumped(
    request: LLMRequest, profile: Profile, stream: bool
) -> None:
    """Any request, any profile: the same bytes as `json.dumps` of the dict
    form, the first time its tools are encoded and again from them."""
    assert_same_bytes(request, profile, stream)
    assert_same_bytes(request, profile, stream)  # from the fragments kept


def test_a_kept_tool_serves_every_profile_and_position() -> None:
    """The same tool and messages, sent again in other requests — in another
    order, with their thinking sent back, under another profile, offered or
    not — still make the dict form's bytes."""
    call = ToolCall(id="c1", name="look", arguments='{"q": "é"}')
    spec = ToolSpec(name="look", description="Looks.", parameters={"type": "object"})
    turns = (
        Message.system("Be brief."),
        Message.user("find é"),
        Message.assistant(None, (call,), "Look first."),
        Message.tool("c1", "look", "found"),
    )
    shuffled = (turns[0], turns[3], turns[1], turns[2])
    for messages in (turns, turns[1:], shuffled, turns):
        for choice in ("auto", "none"):
            request = LLMRequest(messages=messages, tools=(spec,), tool_choice=choice)
            for profile in ALL_PROFILES:
                assert_same_bytes(request, profile, stream=True)


def test_fragments_encode_each_value_once_while_kept() -> None:
    """A value used again is not encoded again; another value with the same
    contents is its own entry."""
    encoded: list[str] = []

    def encode(value: list[str]) -> bytes:
        encoded.append(value[0])
        return value[0].encode()

    fragments = Fragments[list[str]](encode, max_bytes=1_000)
    first, twin = ["abc"], ["abc"]
    assert [fragments(first), fragments(first), fragments(twin)] == [b"abc"] * 3
    assert encoded == ["abc", "abc"]
    assert (len(fragments), fragments.size) == (2, 6)


def test_fragments_keep_the_most_recently_used_within_their_bytes() -> None:
    """Over `max_bytes`, the least recently used encodings go first; one
    over a sixteenth of the bound is never kept."""
    encoded: list[str] = []

    def encode(value: list[str]) -> bytes:
        encoded.append(value[0])
        return value[0].encode()

    fragments = Fragments[list[str]](encode, max_bytes=160)
    a, b, big = ["a" * 10], ["b" * 10], ["c" * 11]
    for value in (a, b, a):
        fragments(value)
    for n in range(15):  # one over the bound: b, used least lately, goes
        fragments([f"{n:x>10}"])
    assert (len(fragments), fragments.size) == (16, 160)
    for value in (a, b, big, big):
        fragments(value)
    assert [encoded.count(value[0]) for value in (a, b, big)] == [1, 2, 2]
    assert (len(fragments), fragments.size) == (16, 160)
