"""The reply normaliser, shape by shape: thinking split from answers, tool
calls written as text in each format made real calls, JSON as models write
it, and a stream filtered the same way whatever its chunks."""

from __future__ import annotations

import itertools
import json

import pytest

from backend.llm.base import Completion, ToolCall
from backend.llm.replies import lenient, reasoning, text_calls
from backend.llm.replies.normaliser import ReplyStream, normalise

OFFERED = frozenset({"calculator", "get_time"})
CALC = text_calls.TextCall("calculator", {"expression": "2+2"})
TIME = text_calls.TextCall("get_time", {})

TEXT_CALLS = [
    (
        "hermes",
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n'
        "</tool_call>",
        "",
        (CALC,),
    ),
    (
        "hermes",
        'Let me work it out.\n<tool_call>{"name": "calculator", "arguments": '
        '"{\\"expression\\": \\"2+2\\"}"}</tool_call>\n<tool_call>{"name": '
        '"get_time", "arguments": {}}</tool_call>',
        "Let me work it out.",
        (CALC, TIME),
    ),
    (
        "hermes",  # cut off before its closing tag
        '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}',
        "",
        (CALC,),
    ),
    (
        "mistral",
        '[TOOL_CALLS][{"name": "calculator", "arguments": {"expression": "2+2"}}, '
        '{"name": "get_time", "arguments": {}}]',
        "",
        (CALC, TIME),
    ),
    (
        "mistral",
        '[TOOL_CALLS]calculator[ARGS]{"expression": "2+2"}',
        "",
        (CALC,),
    ),
    (
        "llama",
        '<|python_tag|>{"name": "calculator", "parameters": {"expression": "2+2"}}; '
        '{"name": "get_time", "parameters": {}}<|eom_id|>',
        "",
        (CALC, TIME),
    ),
    (
        "function",
        'I will compute. <function=calculator>{"expression": "2+2"}</function>',
        "I will compute.",
        (CALC,),
    ),
    (
        "fenced",
        'Calling the tool:\n```json\n{"name": "calculator", "arguments": '
        '{"expression": "2+2"}}\n```',
        "Calling the tool:",
        (CALC,),
    ),
    (
        "fenced",
        '```tool_call\n[{"type": "function", "function": {"name": "get_time", '
        '"arguments": "{}"}}]\n```',
        "",
        (TIME,),
    ),
    (
        "bare",
        '{"name": "calculator", "parameters": {"expression": "2+2"}}',
        "",
        (CALC,),
    ),
    (
        "bare",
        "  {'name': 'calculator', 'arguments': {'expression': '2+2',},}\n",
        "",
        (CALC,),
    ),
]


@pytest.mark.parametrize(
    ("form", "text", "left", "calls"),
    TEXT_CALLS,
    ids=[f"{t[0]}-{i}" for i, t in enumerate(TEXT_CALLS)],
)
def test_a_text_call_in_each_format_is_found(
    form: str, text: str, left: str, calls: tuple[text_calls.TextCall, ...]
) -> None:
    """Each format's calls are read with their arguments, and the prose around
    them is what remains."""
    found = text_calls.find(text, OFFERED)
    assert found is not None
    assert (found.format, found.calls) == (form, calls)
    assert (text[: found.start] + text[found.end :]).strip() == left


NOT_CALLS = [
    "The answer is 4.",
    '{"name": "Alice", "age": 31}',  # an object with a name is no call
    '<tool_call>{"name": "format_disk", "arguments": {}}</tool_call>',  # not offered
    '```json\n{"result": 4}\n```',
    '```python\nprint("calculator")\n```',
    '{"name": "calculator", "arguments": {"expression": "2+2"}} and then more',
    "[TOOL_CALLS] nothing parsable",
    "<|python_tag|>print('hi')",
]


@pytest.mark.parametrize("text", NOT_CALLS)
def test_text_that_is_no_call_of_an_offered_tool_stays_text(text: str) -> None:
    """Prose, data, a call of a tool not offered and a broken call are no calls."""
    assert text_calls.find(text, OFFERED) is None


def test_every_format_is_covered_by_the_table() -> None:
    """The table above names a case for every format the parser knows."""
    assert {form.name for form in text_calls.FORMATS} == {t[0] for t in TEXT_CALLS}


REASONING = [
    ("<think>2+2 is 4.</think>\n\nIt is 4.", "2+2 is 4.", "It is 4."),
    ("<THINKING>\nsum\n</THINKING>It is 4.", "sum", "It is 4."),
    ("<reasoning>a</reasoning>It is <think>b</think>4.", "a\n\nb", "It is 4."),
    ("the template opened it</think>It is 4.", "the template opened it", "It is 4."),
    ("<think>cut off while thinking", "cut off while thinking", ""),
    ("It is 4.", "", "It is 4."),
    ("Use <b>bold</b>, not <thinker>.", "", "Use <b>bold</b>, not <thinker>."),
]


@pytest.mark.parametrize(("text", "thinking", "answer"), REASONING)
def test_thinking_is_split_from_the_answer(
    text: str, thinking: str, answer: str
) -> None:
    """Tagged thinking, in any of its tags and forms, is apart from the answer."""
    assert reasoning.split(text) == (thinking, answer)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("{'a': 'it\\'s \"x\"'}", {"a": 'it\'s "x"'}),
        ('{"a": [1, 2,], "b": true,}', {"a": [1, 2], "b": True}),
        ("{'finish': True, 'plan': None}", {"finish": True, "plan": None}),
        ('{"a": "line\nbreak"}', {"a": "line\nbreak"}),
    ],
)
def test_json_as_models_write_it_is_read(text: str, value: object) -> None:
    """Single quotes, trailing commas, Python constants, raw newlines are forgiven."""
    assert lenient.loads(text) == value


@pytest.mark.parametrize("text", ["{nope}", "{'a': }", "", "[1, 2"])
def test_json_that_is_not_json_is_refused(text: str) -> None:
    """What is broken beyond the usual slips is a ValueError."""
    with pytest.raises(ValueError):
        lenient.loads(text)


def ids() -> itertools.count[int]:
    return itertools.count(1)


def test_a_text_call_becomes_a_native_call_with_a_fresh_id() -> None:
    """A Hermes call after thinking: thinking in `reasoning`, a real call, no text."""
    counter = ids()
    reply = Completion(
        content='<think>I need the calculator.</think>\n<tool_call>{"name": '
        '"calculator", "arguments": {"expression": "2+2"}}</tool_call>',
        finish_reason="stop",
    )
    done = normalise(reply, offered=OFFERED, new_call_id=lambda: f"t{next(counter)}")
    assert done.content == ""
    assert done.reasoning == "I need the calculator."
    assert done.tool_calls == (
        ToolCall(id="t1", name="calculator", arguments='{"expression": "2+2"}'),
    )


def test_native_calls_are_kept_and_text_is_not_read_for_more() -> None:
    """A reply with native calls keeps them; JSON in its text stays text."""
    native = ToolCall(id="c1", name="get_time", arguments="{}")
    reply = Completion(content='{"name": "calculator"}', tool_calls=(native,))
    done = normalise(reply, offered=OFFERED, new_call_id=lambda: "x")
    assert (done.content, done.tool_calls) == ('{"name": "calculator"}', (native,))


def test_without_tools_offered_no_text_is_taken_for_a_call() -> None:
    """A reply to a request without tools is never turned into a call."""
    reply = Completion(content='{"name": "calculator", "arguments": {}}')
    assert normalise(reply, offered=frozenset(), new_call_id=lambda: "x") is reply


def test_reasoning_from_its_own_field_comes_first() -> None:
    """Thinking the server sent apart is joined with tagged thinking, in order."""
    reply = Completion(content="<think>second</think>Answer", reasoning="first")
    done = normalise(reply, offered=frozenset(), new_call_id=lambda: "x")
    assert (done.reasoning, done.content) == ("first\n\nsecond", "Answer")


STREAMS = [
    (frozenset(), "<think>hmm, 2+2</think>\n\nIt is 4.", "It is 4.", ()),
    (
        OFFERED,
        "Let me see.<tool_call>"
        + json.dumps({"name": "get_time", "arguments": {}})
        + "</tool_call>",
        "Let me see.",
        ("get_time",),
    ),
    (
        OFFERED,
        '{"name": "calculator", "arguments": {"expression": "1"}}',
        "",
        ("calculator",),
    ),
    (OFFERED, "[TOOL_CALLS]get_time[ARGS]{}", "", ("get_time",)),
    (
        OFFERED,
        "No tool needed: 4 < 5 and {braces} are fine.",
        "No tool needed: 4 < 5 and {braces} are fine.",
        (),
    ),
    (OFFERED, "Code:\n```python\nx = 1\n```", "Code:\n```python\nx = 1\n```", ()),
]


@pytest.mark.parametrize(("offered", "text", "seen", "called"), STREAMS)
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_a_stream_shows_only_the_answer_whatever_its_chunks(
    offered: frozenset[str], text: str, seen: str, called: tuple[str, ...], size: int
) -> None:
    """Cut into chunks of any size, a stream shows the user exactly the answer
    (what was held and was no call comes at the end), never thinking or a call."""
    stream = ReplyStream(offered=offered)
    shown = "".join(stream.feed(text[i : i + size]) for i in range(0, len(text), size))
    rest, final = stream.finish(Completion(content=text), lambda: "id")
    assert shown + rest == seen == final.content
    assert tuple(call.name for call in final.tool_calls) == called
