"""The token-bounded history window: what each LLM request carries of the past.

Unit tests of `History.window` (budget, the current request, tool call
groups, compaction of older tool output, a history left as it was, cached
costs), and a 200-message conversation run through a real `ChatService`
whose every request is checked by the same estimator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from backend.history import History
from backend.llm import tokens
from backend.llm.base import LLMRequest, Message, ToolCall
from backend.llm.tokens import estimate_message_tokens, estimate_text_tokens
from tests.conftest import make_settings
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry
from tests.service_harness import serving

WIDE = 1_000_000
"""A budget nothing here reaches."""


def asking(*ids: str) -> Message:
    """An assistant message calling `add` once per id."""
    return Message.assistant(
        None,
        [ToolCall(id=i, name="add", arguments='{"expression": "1+1"}') for i in ids],
    )


def result(call_id: str, content: str = "2") -> Message:
    return Message.tool(call_id, "add", content)


def cost(messages: Sequence[Message]) -> int:
    return sum(estimate_message_tokens(m) for m in messages)


def omitted(content: str, kept: int) -> str:
    """A compacted tool output as the model receives it."""
    return f"{content[:kept]}\n… [{len(content) - kept} chars omitted]"


def assert_whole_groups(window: Sequence[Message]) -> None:
    """Every tool result follows its call in the window, and every call in the
    window has its result there."""
    called: set[str] = set()
    for message in window:
        if message.role == "tool":
            assert message.tool_call_id in called, message
        called |= {call.id for call in message.tool_calls}
    answered = {m.tool_call_id for m in window if m.role == "tool"}
    assert called == answered


# ------------------------------------------------------------ the estimator


def test_the_estimate_is_utf8_bytes_over_four_rounded_up() -> None:
    """Non-ASCII text is costed by its encoded bytes, so `€€€€` costs three tokens."""
    assert [estimate_text_tokens(t) for t in ("", "abcd", "abcde", "é", "€€€€")] == [
        0,
        1,
        2,
        1,
        3,
    ]


def test_a_message_costs_its_text_an_overhead_and_its_tool_calls() -> None:
    """A message costs 4 tokens plus its text; a tool call 4 plus name and arguments."""
    assert estimate_message_tokens(Message.user("abcd")) == 4 + 1
    assert estimate_message_tokens(Message.assistant(None)) == 4
    call = ToolCall(id="c1", name="add", arguments='{"a":1}')  # 3 and 7 bytes
    assert estimate_message_tokens(Message.assistant("abcd", [call])) == (
        4 + 1 + 4 + 1 + 2
    )
    assert estimate_message_tokens(result("c1", "x" * 9)) == 4 + 3


# ------------------------------------------------------------ the window


def turns(count: int) -> list[Message]:
    """`count` user/assistant pairs, then the current question; 13 tokens each."""
    text = "x" * 36
    assert estimate_message_tokens(Message.user(text)) == 13
    pairs = [
        m for _ in range(count) for m in (Message.user(text), Message.assistant(text))
    ]
    return [*pairs, Message.user(text)]


def test_the_window_is_the_newest_messages_that_fit_the_budget() -> None:
    """The window keeps the longest recent tail within budget, even from an answer."""
    messages = turns(10)
    history = History(messages)

    assert history.window(65, tool_output_chars=100) == messages[16:]
    assert history.window(64, tool_output_chars=100) == messages[17:]
    assert messages[17].role == "assistant"  # a window may start at an answer
    assert history.window(WIDE, tool_output_chars=100) == messages
    assert History().window(WIDE, tool_output_chars=100) == []


def test_the_current_request_is_kept_even_over_budget() -> None:
    """The current question and its tool work are sent whole even when over budget."""
    messages = [
        Message.user("earlier"),
        Message.assistant("sure"),
        Message.user("now this"),
        asking("c1"),
        result("c1", "y" * 4000),
        Message.assistant("done"),
    ]
    history = History(messages)

    assert cost(messages[2:]) > 1000
    assert history.window(10, tool_output_chars=100) == messages[2:]
    assert history.window(cost(messages[2:]), tool_output_chars=100) == messages[2:]
    assert history.window(cost(messages), tool_output_chars=100) == messages


GROUPED = [
    Message.user("first"),
    Message.assistant("an answer"),
    Message.user("second"),
    asking("c1", "c2", "c3"),
    result("c1"),
    Message.system("A side effect: the team was told."),
    result("c2"),
    result("c3"),
    Message.system("Another side effect, after the group."),
    Message.assistant("all three are 2"),
    Message.user("third"),
]


def safe_start(messages: Sequence[Message], start: int) -> bool:
    """A user or assistant message with every later result's call after it."""
    if messages[start].role not in ("user", "assistant"):
        return False
    calls_after = {c.id for m in messages[start:] for c in m.tool_calls}
    return all(
        m.tool_call_id in calls_after for m in messages[start:] if m.role == "tool"
    )


def expected_start(messages: Sequence[Message], budget: int) -> int:
    """The rule, by brute force: the earliest safe start whose suffix fits,
    else the latest safe start at or before the current question."""
    current = max(i for i, m in enumerate(messages) if m.role == "user")
    safe = [s for s in range(current + 1) if safe_start(messages, s)]
    fitting = [s for s in safe if cost(messages[s:]) <= budget]
    return fitting[0] if fitting else safe[-1]


def test_a_tool_call_is_never_separated_from_its_results() -> None:
    """At any budget the window never opens on a note or splits a call from a result."""
    history = History(GROUPED)
    # Enough for everything from the first result on, yet the window cannot
    # start there, at the note between results, or at a note at all.
    assert history.window(cost(GROUPED[4:]), tool_output_chars=100) == GROUPED[9:]
    assert history.window(cost(GROUPED[8:]), tool_output_chars=100) == GROUPED[9:]
    assert history.window(cost(GROUPED[3:]), tool_output_chars=100) == GROUPED[3:]

    for budget in range(cost(GROUPED) + 2):
        window = history.window(budget, tool_output_chars=100)
        assert window == GROUPED[expected_start(GROUPED, budget) :], budget
        assert_whole_groups(window)
        assert cost(window) <= budget or window[0] == GROUPED[-1]


def test_older_long_tool_outputs_are_compacted_and_the_history_is_not() -> None:
    """Old long tool outputs are cut when sent, not stored, and budgeted as cut."""
    long_old, long_now = "a" * 3000, "b" * 3000
    messages = [
        Message.user("q1"),
        asking("c1", "c2"),
        result("c1", long_old),
        result("c2", "short"),
        Message.assistant("answer"),
        Message.user("q2"),
        asking("c3"),
        result("c3", long_now),
    ]
    history = History(messages)

    window = history.window(WIDE, tool_output_chars=100)
    compacted = messages[2].model_copy(update={"content": omitted(long_old, 100)})
    assert window == [*messages[:2], compacted, *messages[3:]]
    assert window[2].content == "a" * 100 + "\n… [2900 chars omitted]"
    assert (window[2].tool_call_id, window[2].meta) == ("c1", messages[2].meta)
    assert window[7].content == long_now  # the current request's is whole
    assert history.messages == tuple(messages)
    assert history[2] is messages[2] and history[2].content == long_old

    # The budget counts what is sent: the compacted output, not the stored one.
    sent = cost(window)
    assert sent == cost(messages) - cost(messages[2:3]) + cost([compacted])
    assert sent < cost(messages)
    assert history.window(sent, tool_output_chars=100) == window
    assert history.window(sent - 1, tool_output_chars=100) == window[1:]


def test_since_leaves_out_what_came_before() -> None:
    """A `since` index drops every earlier message from the window."""
    messages = turns(3)
    history = History(messages)
    assert history.window(WIDE, tool_output_chars=100, since=6) == messages[6:]
    assert history.window(WIDE, tool_output_chars=100, since=3) == messages[3:]


def test_costs_are_estimated_on_append_not_on_every_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over a long history a window re-encodes nothing it has seen, and looks
    at no more than its own messages and the one that did not fit."""
    messages = turns(100)
    history = History(messages)
    estimated: list[Message] = []
    shown: list[int] = []

    def counting(message: Message) -> int:
        estimated.append(message)
        return tokens.estimate_message_tokens(message)

    original = History._shown

    def looked_at(self: History, index: int, *args: Any) -> tuple[Message, int]:
        shown.append(index)
        return original(self, index, *args)

    monkeypatch.setattr("backend.history.estimate_message_tokens", counting)
    monkeypatch.setattr(History, "_shown", looked_at)
    window = history.window(13 * 20, tool_output_chars=100)
    assert window == messages[-20:]
    assert estimated == []
    assert len(shown) == 2 * 20 + 1

    history.append(Message.assistant("one more"))
    assert estimated == [Message.assistant("one more")]


def test_the_window_settings_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Window settings default to 8000 and 2000, come from env, and have minimums."""
    assert make_settings().history_window_tokens == 8000
    assert make_settings().history_tool_output_chars == 2000
    monkeypatch.setenv("LOOPWIRE_HISTORY_WINDOW_TOKENS", "3000")
    monkeypatch.setenv("LOOPWIRE_HISTORY_TOOL_OUTPUT_CHARS", "500")
    settings = make_settings()
    assert (settings.history_window_tokens, settings.history_tool_output_chars) == (
        3000,
        500,
    )
    with pytest.raises(ValidationError, match="history_window_tokens"):
        make_settings(history_window_tokens=255)
    with pytest.raises(ValidationError, match="history_tool_output_chars"):
        make_settings(history_tool_output_chars=99)


# ------------------------------------------------------------ through the service

BUDGET = 2000
KEPT_CHARS = 500
QUESTION = "And what is 2+3?"
OUTPUT = "".join(f"line {n}: some long tool output\n" for n in range(100))


def conversation(size: int = 200) -> list[Message]:
    """`size` messages of earlier turns: plain ones, and ones with one or two
    tool calls (with a side effect's note between two results)."""
    messages: list[Message] = []
    turn = 0
    while len(messages) < size:
        turn += 1
        question = Message.user(f"question {turn}: " + "words " * 20)
        answer = Message.assistant(f"answer {turn}: " + "words " * 30)
        one, two = f"h{turn}a", f"h{turn}b"
        match turn % 3:
            case 0:
                body = [question, asking(one), result(one, OUTPUT), answer]
            case 1:
                note = Message.system(f"note {turn}: the team was told.")
                pair = [result(one, OUTPUT), note, result(two, "4")]
                body = [question, asking(one, two), *pair, answer]
            case _:
                body = [question, answer]
        messages.extend(body)
    assert len(messages) == size
    return messages


def history_part(request: LLMRequest) -> list[Message]:
    """The request without its system prompt and its phase prompt (the earlier
    conversation never ends in a system note, so a last one is the prompt)."""
    part = list(request.messages[1:])
    return part[:-1] if part and part[-1].role == "system" else part


def as_stored(sent: Message, stored: Message) -> bool:
    """`sent` is `stored`, or `stored` compacted the way the window does it."""
    compacted = stored.model_copy(
        update={"content": omitted(stored.content or "", KEPT_CHARS)}
    )
    return sent == stored or (stored.role == "tool" and sent == compacted)


AGENT = {"agent_mode": True}
AGENT_SCRIPT = [
    reason("Add the numbers with add.", tools=["add"]),
    calls(("add", {"expression": "2+3"})),
    observe("2+3 is 5.", should_continue=False, final="2 + 3 = 5"),
]


@pytest.mark.parametrize(
    ("fields", "script", "purposes"),
    [
        ({}, ["2 + 3 = 5"], ["chat"]),
        (AGENT, AGENT_SCRIPT, ["reason", "act", "observe"]),
    ],
    ids=["plain", "agent"],
)
async def test_every_request_of_a_long_conversation_fits_the_budget(
    fields: dict[str, Any], script: list[Any], purposes: list[str]
) -> None:
    """Every request over 200 old messages fits the budget with tool groups whole."""
    earlier = conversation()
    llm = ScriptedLLM(*script)
    async with serving(
        llm,
        test_registry(),
        history_window_tokens=BUDGET,
        history_tool_output_chars=KEPT_CHARS,
    ) as client:
        for message in earlier:
            client.session.history.append(message)
        await client.chat(QUESTION, **fields)
        stored = client.session.history.messages

    assert llm.purposes == purposes
    assert stored[:200] == tuple(earlier)  # windowing changed nothing
    assert stored[200] == Message.user(QUESTION)
    assert stored[-1] == Message.assistant("2 + 3 = 5")
    for request in llm.requests:
        part = history_part(request)
        assert cost(part) <= BUDGET
        assert_whole_groups(part)
        asked = part.index(Message.user(QUESTION))
        assert 0 < asked < len(part) and asked < 200
        assert part[asked:] == list(stored[200 : 200 + len(part) - asked])
        before = stored[200 - asked : 200]
        assert all(as_stored(s, m) for s, m in zip(part[:asked], before, strict=True))
        assert any(m.content == omitted(OUTPUT, KEPT_CHARS) for m in part[:asked])
