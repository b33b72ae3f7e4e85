"""The reply normaliser, shape by shape: thinking split from answers, tool
calls written as text in each format made real calls, JSON as models write
it, a stream filtered the same way whatever its chunks; control blocks
found in the shapes models write them; replies cut off at their length
limit told apart and asked for once more."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator

import pytest

from backend.agent.control import Parsed, cut_off, parse_control
from backend.llm.base import (
    Completion,
    LLMRequest,
    Message,
    StreamEvent,
    TextDelta,
    ToolCall,
)
from backend.llm.replies import cutoff, lenient, reasoning, text_calls
from backend.llm.replies.normaliser import ReplyStream, normalise
from backend.protocol import ReasonControl

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


CONTROLS = [
    ('I will add. {"plan": "add", "finish": false}', "I will add."),
    ('I will add.\n```javascript\n{"plan": "add"}\n```', "I will add."),
    ('I will add.\n```JSON\n{"plan": "add",}\n```', "I will add."),
    (
        'I will add.\n{\n "plan": "add",\n "tools_to_consider": ["add",],\n}',
        "I will add.",
    ),
    (
        "I will add. {'plan': 'add', 'finish': False, 'final_answer': None}",
        "I will add.",
    ),
    (
        'Draft: ```json\n{"plan": "draft", "finish": true}\n```\nI will add.\n'
        '```json\n{"plan": "add"}\n```',
        'Draft: ```json\n{"plan": "draft", "finish": true}\n```\nI will add.',
    ),
    (
        'I will add.\n```json\n{"plan": "add"}\n```\nSee {"x": 1}.',
        'I will add.\n\nSee {"x": 1}.',
    ),
]


@pytest.mark.parametrize(("text", "prose"), CONTROLS)
def test_a_control_block_is_found_in_the_shapes_models_write(
    text: str, prose: str
) -> None:
    """Unfenced, language-tagged, with trailing commas, single quotes or
    Python's constants, or twice: the last usable block is the control."""
    parsed = parse_control(text, ReasonControl)
    assert parsed.control is not None
    assert parsed.control.plan == "add" and not parsed.control.finish
    assert parsed.prose == prose


def test_a_control_block_cut_off_is_no_control() -> None:
    """A block the length limit cut off is prose, and is told apart as cut."""
    text = 'I will add.\n```json\n{"plan": "add", "fini'
    assert parse_control(text, ReasonControl) == Parsed(text, None)
    request = LLMRequest(messages=(Message.user("q"),), purpose="reason")
    cut = Completion(content=text, finish_reason="length")
    assert cut_off(request, cut)
    assert not cut_off(request, cut.model_copy(update={"finish_reason": "stop"}))
    whole = Completion(content='{"plan": "add"} and then', finish_reason="length")
    assert not cut_off(request, whole)


CUT_CALLS = [
    (Completion(tool_calls=(ToolCall(id="a", name="add", arguments='{"ex'),)), True),
    (Completion(tool_calls=(ToolCall(id="a", name="add", arguments="{}"),)), False),
    (Completion(content='<tool_call>{"name": "add", "argu'), True),
    (Completion(content='{"name": "add", "argu'), True),
    (Completion(content="The sum of two and three is"), False),
]


@pytest.mark.parametrize(("reply", "cut"), CUT_CALLS)
def test_a_tool_call_cut_off_at_the_length_limit_is_told(
    reply: Completion, cut: bool
) -> None:
    """Cut at the length limit, a call with broken arguments or a text call
    never closed is a cut call; a whole call, or prose, is not."""
    length = reply.model_copy(update={"finish_reason": "length"})
    assert cutoff.cut_call(length) is cut
    assert cutoff.cut_call(reply) is False


def test_a_shorter_request_keeps_the_latest_turn_and_asks_for_brevity() -> None:
    """The retry leaves out the conversation before the latest user message."""
    request = LLMRequest(
        messages=(
            Message.system("system"),
            Message.user("earlier question"),
            Message.assistant("earlier answer"),
            Message.user("question"),
            Message.system("phase prompt"),
        ),
        purpose="reason",
    )
    short = cutoff.shorter(request)
    assert [m.content for m in short.messages] == [
        "system",
        "question",
        "phase prompt",
        cutoff.BRIEF_NOTE,
    ]
    assert short.purpose == "reason"


class Replies:
    """An LLM that replies with the given completions, in order, streamed
    in two pieces of text each."""

    def __init__(self, *replies: Completion) -> None:
        self.replies = list(replies)
        self.requests: list[LLMRequest] = []
        self.model, self.provider = "m", "p"

    async def complete(self, request: LLMRequest) -> Completion:
        self.requests.append(request)
        return self.replies.pop(0)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        reply = await self.complete(request)
        half = len(reply.content) // 2
        for piece in (reply.content[:half], reply.content[half:]):
            if piece:
                yield TextDelta(text=piece)
        yield reply

    async def aclose(self) -> None:
        return None


CUT = Completion(content='I will add. {"plan": ', finish_reason="length")
WHOLE = Completion(content='I will add. {"plan": "add"}', finish_reason="stop")
REASON = LLMRequest(messages=(Message.user("q"),), purpose="reason")


async def test_a_cut_off_reply_is_asked_for_once_more_shorter() -> None:
    """Cut once: the retry's reply is the reply, both calls counted."""
    llm = Replies(CUT, WHOLE)
    reply = await cutoff.RetryCutOff(llm, cut_off).complete(REASON)
    assert reply.content == WHOLE.content
    assert reply.usage.llm_calls == 2
    assert [r.messages[-1].content for r in llm.requests] == ["q", cutoff.BRIEF_NOTE]


async def test_a_reply_cut_off_twice_fails_saying_so() -> None:
    """Cut twice: `ReplyCutOff`, naming the length limit and the control block."""
    llm = Replies(CUT, CUT)
    with pytest.raises(cutoff.ReplyCutOff, match="length limit before its control"):
        await cutoff.RetryCutOff(llm, cut_off).complete(REASON)
    assert len(llm.requests) == 2


async def test_a_retried_stream_does_not_show_its_start_twice() -> None:
    """The text the user saw before the cut is not sent again by the retry."""
    llm = Replies(CUT, WHOLE)
    events = [e async for e in cutoff.RetryCutOff(llm, cut_off).stream(REASON)]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == WHOLE.content
    assert events[-1] == WHOLE.model_copy(update={"usage": CUT.usage + WHOLE.usage})


async def test_a_reply_that_is_not_cut_off_passes_untouched() -> None:
    """A whole reply, or one cut where nothing needed it, is not asked again."""
    prose = Completion(content="A long answer", finish_reason="length")
    llm = Replies(WHOLE, prose)
    wrapped = cutoff.RetryCutOff(llm, cut_off)
    assert await wrapped.complete(REASON) is WHOLE
    chat = LLMRequest(messages=(Message.user("q"),), purpose="chat")
    assert await wrapped.complete(chat) is prose
    assert len(llm.requests) == 2


def test_a_streamed_call_cut_off_is_never_shown() -> None:
    """A text call the length limit cut off stays held back at the end."""
    stream = ReplyStream(offered=OFFERED)
    text = 'Let me see. <tool_call>{"name": "calculator", "argu'
    shown = stream.feed(text)
    rest, final = stream.finish(
        Completion(content=text, finish_reason="length"), lambda: "id"
    )
    assert (shown, rest, final.tool_calls) == ("Let me see. ", "", ())


def test_a_control_block_written_while_thinking_is_no_control_block() -> None:
    """Thinking is split out before the control block is looked for: a block
    only inside `<think>` is no control, one after it is the control."""
    draft = '<think>Maybe {"plan": "draft", "finish": true}</think>'
    alone = normalise(
        Completion(content=draft + "\nI will add."),
        offered=frozenset(),
        new_call_id=str,
    )
    assert parse_control(alone.content, ReasonControl) == Parsed("I will add.", None)
    both = normalise(
        Completion(content=draft + '\nI will add. {"plan": "add"}'),
        offered=frozenset(),
        new_call_id=str,
    )
    assert parse_control(both.content, ReasonControl) == Parsed(
        "I will add.", ReasonControl(plan="add")
    )
    assert "draft" in both.reasoning
