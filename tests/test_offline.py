"""The offline model speaks the agent loop's protocol from structured requests.

Requests are built the way the loop builds them: a system prompt, the
history, then a system message with the phase instruction (whose wording the
model must not depend on).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from backend.agent.cutoffs import CANCELLED_NOTE, closed
from backend.llm.base import (
    Completion,
    LLMClient,
    Message,
    TextDelta,
    ToolCall,
    Usage,
)
from backend.llm.tokens import estimate_message_tokens, estimate_request_tokens
from backend.tools.base import ToolContext
from backend.tools.builtin import builtin_tools
from tests.offline_driver import (
    REGISTRY,
    REQUEST_INPUT,
    WORDS,
    Phases,
    call,
    failed,
    llm,
    request,
    split,
)

FIXED = datetime(2026, 11, 22, 13, 5, 42, tzinfo=UTC)
TOOLS = {tool.name: tool for tool in builtin_tools(clock=lambda: FIXED)}
BUILTIN_SPECS = tuple(tool.spec() for tool in TOOLS.values())
AGENT_TOOLS = (*BUILTIN_SPECS, REQUEST_INPUT)
PHASES_DRIVER = Phases(agent_tools=AGENT_TOOLS, final_tools=AGENT_TOOLS)
reason = PHASES_DRIVER.reason
act = PHASES_DRIVER.act
observe = PHASES_DRIVER.observe
final = PHASES_DRIVER.final
chat = PHASES_DRIVER.chat

MILES_TO = {"type": "string", "examples": ["km", "m", "ft", "mm"]}
"""The units the offline model suggests for 10 miles."""


async def result_of(tool_call: ToolCall) -> Message:
    """Run a built-in tool the way the executor would, as a tool message."""
    tool = TOOLS[tool_call.name]
    value = await tool(
        tool.args_model.model_validate_json(tool_call.arguments),
        ToolContext(session_id="s"),
    )
    content = json.dumps(value, indent=2, ensure_ascii=False)
    return Message.tool(tool_call.id, tool_call.name, content)


def reason_note(text: str) -> Message:
    """What the loop may keep of the reason phase; the model must ignore it."""
    return Message.assistant(text)


# --- identity ----------------------------------------------------------------------


async def test_identity_and_protocol() -> None:
    """The offline client names itself model `loopwire-offline`, provider `offline`."""
    client: LLMClient = llm
    assert (client.model, client.provider) == ("loopwire-offline", "offline")
    await client.aclose()


# --- the agent loop: reason -> act -> observe --------------------------------------


async def test_convert_without_target_unit_asks_then_converts() -> None:
    """A conversion missing its target unit asks for it, then converts to the answer."""
    history = [
        Message.user("hi"),
        Message.assistant(WORDS.greeting()),
        Message.user("convert 10 miles"),
    ]

    prose, control = await reason(history)
    assert prose == (
        "The request doesn't say which unit to convert 10 miles to, "
        "so I'll ask the user."
    )
    assert control == {
        "plan": (
            "Ask the user which unit to convert 10 miles to with request_input, "
            "then use convert_units."
        ),
        "tools_to_consider": ["request_input"],
        "finish": False,
        "final_answer": "",
        "ask_user": "What unit should I convert 10 miles to?",
    }

    history.append(reason_note(prose))
    asked = await act(history)
    ask = call(
        "call_1",
        "request_input",
        question="What unit should I convert 10 miles to?",
        answer_schema=MILES_TO,
    )
    assert asked.tool_calls == (ask,)
    assert asked.content == ""
    assert asked.finish_reason == "tool_calls"

    history += [
        Message.assistant(None, [ask]),
        Message.tool("call_1", "request_input", "km"),
    ]
    prose, control = await observe(history)
    assert control == {
        "observation": (
            "The user answered: “km”. "
            "Next: use the convert_units tool to convert 10 miles to km."
        ),
        "should_continue": True,
        "final_answer": "",
    }

    prose, control = await reason(history)
    assert prose == "I'll use the convert_units tool to convert 10 miles to km."
    assert control == {
        "plan": "Call convert_units to convert 10 miles to km.",
        "tools_to_consider": ["convert_units"],
        "finish": False,
        "final_answer": "",
    }

    history.append(reason_note(prose))
    converted = await act(history)
    conversion = call(
        "call_2", "convert_units", value=10, from_unit="miles", to_unit="km"
    )
    assert converted.tool_calls == (conversion,)

    history += [Message.assistant(None, [conversion]), await result_of(conversion)]
    prose, control = await observe(history)
    assert (
        prose == "The convert_units tool returned 16.0934 km. That answers the request."
    )
    assert control == {
        "observation": "The convert_units tool returned 16.0934 km.",
        "should_continue": False,
        "final_answer": "10 miles is **16.0934 km**",
    }
    assert await final(history) == "10 miles is **16.0934 km**"


async def test_answer_with_extra_words_names_the_unit() -> None:
    """A wordy answer to the unit question still gives `convert_units` the bare unit."""
    ask = call(
        "call_1",
        "request_input",
        question="What unit should I convert 10 miles to?",
        answer_schema=MILES_TO,
    )
    history = [
        Message.user("Convert 10 miles"),
        Message.assistant(None, [ask]),
        Message.tool("call_1", "request_input", "into kilometres please"),
    ]
    completion = await act(history)
    assert completion.tool_calls == (
        call(
            "call_2", "convert_units", value=10, from_unit="miles", to_unit="kilometres"
        ),
    )


async def test_greeting_finishes_in_reason() -> None:
    """A greeting needs no tools: reason finishes at once with the greeting."""
    prose, control = await reason([Message.user("Hello!")])
    assert prose == "I can answer this directly, without tools."
    assert control == {
        "plan": "Answer directly.",
        "tools_to_consider": [],
        "finish": True,
        "final_answer": (
            "Hello! I'm loopwire's built-in offline demo model. I can do arithmetic, "
            "tell the time in a timezone, convert units and keep notes — try "
            "“what is 2+2*3”, “what time is it in Tokyo?”, “convert 10 miles to km” "
            "or “remember that …”."
        ),
    }


@pytest.mark.parametrize("text", ["thanks a lot!", "what can you do?", "help"])
async def test_small_talk_finishes_in_reason(text: str) -> None:
    """Thanks and requests for help are answered in reason, without any tool."""
    _, control = await reason([Message.user(text)])
    assert control["finish"] is True
    assert control["final_answer"] == WORDS.small_talk(text)


async def test_help_names_capabilities_and_configuration() -> None:
    """The help text lists every offline skill and the settings for a real model."""
    assert WORDS.help() == (
        "I'm loopwire's built-in offline demo model (simple rules, no network).\n\n"
        "I can:\n"
        "- do arithmetic — “what is 2+2*3”, “sqrt(16) + 1”\n"
        "- tell the time in a timezone — “what time is it in Tokyo?”\n"
        "- convert units — “convert 10 miles to km”\n"
        "- ask you a clarifying question in agent mode — “convert 10 miles”\n"
        "- keep notes, with tools on — “remember that …”, “list my notes”, "
        "“forget note 1”\n\n"
        "To use a real model, set LOOPWIRE_LLM_BASE_URL, LOOPWIRE_LLM_API_KEY "
        "and LOOPWIRE_LLM_MODEL."
    )


async def test_arithmetic_in_one_step() -> None:
    """A sum takes one calculator call and is answered right after its result."""
    history = [Message.user("What is 2+2*3?")]
    prose, control = await reason(history)
    assert prose == "I'll use the calculator tool to calculate 2+2*3."
    assert control == {
        "plan": "Call calculator to calculate 2+2*3.",
        "tools_to_consider": ["calculator"],
        "finish": False,
        "final_answer": "",
    }

    completion = await act(history)
    calculation = call("call_1", "calculator", expression="2+2*3")
    assert completion.tool_calls == (calculation,)

    history += [Message.assistant(None, [calculation]), await result_of(calculation)]
    _, control = await observe(history)
    assert control == {
        "observation": "The calculator returned 8.",
        "should_continue": False,
        "final_answer": "2 + 2 \u00d7 3 = **8**",
    }


@pytest.mark.parametrize(
    ("text", "expression", "answer"),
    [
        ("calculate (4+5)/3", "(4+5)/3", "(4 + 5) ÷ 3 = **3**"),
        ("sqrt(16) + 1", "sqrt(16) + 1", "sqrt(16) + 1 = **5**"),
        ("12 times 7", "12 * 7", "12 × 7 = **84**"),  # noqa: RUF001
        ("what's 2^10?", "2^10", "2^10 = **1024**"),
        ("what is 7 divided by 2", "7 / 2", "7 ÷ 2 = **3.5**"),
    ],
)
async def test_arithmetic_phrasings(text: str, expression: str, answer: str) -> None:
    """Sums in words, brackets or powers become a calculator call and a tidy answer."""
    history = [Message.user(text)]
    calculation = call("call_1", "calculator", expression=expression)
    assert (await act(history)).tool_calls == (calculation,)
    history += [Message.assistant(None, [calculation]), await result_of(calculation)]
    _, control = await observe(history)
    assert control["final_answer"] == answer


async def test_time_question() -> None:
    """A time question calls `current_time` with the city's zone, giving local time."""
    history = [Message.user("What time is it in Paris?")]
    _, control = await reason(history)
    assert control["plan"] == "Call current_time to get the time in Europe/Paris."
    completion = await act(history)
    lookup = call("call_1", "current_time", timezone="Europe/Paris")
    assert completion.tool_calls == (lookup,)

    history += [Message.assistant(None, [lookup]), await result_of(lookup)]
    _, control = await observe(history)
    assert control == {
        "observation": "The current_time tool returned 2026-11-22T14:05:42+01:00.",
        "should_continue": False,
        "final_answer": "It's 14:05 on Sunday, 22 November 2026 in Europe/Paris.",
    }


@pytest.mark.parametrize(
    ("text", "zone"),
    [
        ("what time is it", "UTC"),
        ("time in Tokyo", "Asia/Tokyo"),
        ("What's the time in new york right now?", "America/New_York"),
        ("current time in London please", "Europe/London"),
        ("what time is it in Berlin", "Europe/Berlin"),
        ("time in sydney", "Australia/Sydney"),
        ("what time is it in Los Angeles?", "America/Los_Angeles"),
        ("what's the time in UTC", "UTC"),
        ("time in America/Chicago", "America/Chicago"),
        ("what's the date today?", "UTC"),
    ],
)
async def test_time_zones_from_places(text: str, zone: str) -> None:
    """City names, IANA names and no place at all map to the right time zone."""
    completion = await act([Message.user(text)])
    assert completion.tool_calls == (call("call_1", "current_time", timezone=zone),)


async def test_unknown_place_fails_honestly() -> None:
    """An unknown place is still looked up, and its error becomes the final answer."""
    lookup = call("call_1", "current_time", timezone="Narnia")
    history = [Message.user("what time is it in Narnia?")]
    assert (await act(history)).tool_calls == (lookup,)
    failure = "unknown timezone 'Narnia'; use an IANA name like 'Europe/Paris'"
    history += [
        Message.assistant(None, [lookup]),
        failed("call_1", "current_time", "failed", failure),
    ]
    _, control = await observe(history)
    assert control == {
        "observation": (
            "The current_time tool reported an error: unknown timezone 'Narnia'; "
            "use an IANA name like 'Europe/Paris'."
        ),
        "should_continue": False,
        "final_answer": (
            "I couldn't get the time in Narnia: unknown timezone 'Narnia'; "
            "use an IANA name like 'Europe/Paris'."
        ),
    }


@pytest.mark.parametrize(
    ("text", "arguments", "answer"),
    [
        (
            "how many kg is 5 lb",
            {"value": 5, "from_unit": "lb", "to_unit": "kg"},
            "5 lb is **2.26796 kg**",
        ),
        (
            "10 miles in kilometers",
            {"value": 10, "from_unit": "miles", "to_unit": "kilometers"},
            "10 miles is **16.0934 km**",
        ),
        (
            "Convert 100°F to celsius.",
            {"value": 100, "from_unit": "°F", "to_unit": "celsius"},
            "100 °F is **37.7778 °C**",
        ),
        (
            "how many feet in a mile?",
            {"value": 1, "from_unit": "mile", "to_unit": "feet"},
            "1 mile is **5280 ft**",
        ),
        (
            "convert 2.5 kg to pounds please",
            {"value": 2.5, "from_unit": "kg", "to_unit": "pounds"},
            "2.5 kg is **5.51156 lb**",
        ),
    ],
)
async def test_conversions(text: str, arguments: dict[str, Any], answer: str) -> None:
    """Varied conversion phrasings call `convert_units` and end with the result."""
    history = [Message.user(text)]
    conversion = call("call_1", "convert_units", **arguments)
    assert (await act(history)).tool_calls == (conversion,)
    history += [Message.assistant(None, [conversion]), await result_of(conversion)]
    _, control = await observe(history)
    assert control["final_answer"] == answer
    assert control["should_continue"] is False


async def test_tool_not_offered() -> None:
    """A request needing a tool not offered ends unfinished, naming the missing tool."""
    history = [Message.user("what is 2+2*3")]
    completion = await act(
        history, tools=(TOOLS["convert_units"].spec(), REQUEST_INPUT)
    )
    assert completion.tool_calls == ()
    assert completion.content == "The calculator tool is not available."
    assert completion.finish_reason == "stop"

    history.append(Message.assistant(completion.content))
    _, control = await observe(history)
    unfinished = (
        "I couldn't finish: I needed the calculator tool to calculate 2+2*3, "
        "but it isn't enabled for this session."
    )
    assert control == {
        "observation": "Nothing was done in this step that answers the request.",
        "should_continue": False,
        "final_answer": unfinished,
    }
    offered = (TOOLS["convert_units"].spec(), REQUEST_INPUT)
    ending = await llm.complete(request("final", history, offered, "none"))
    assert ending.content == unfinished


async def test_a_run_cut_short_says_so_and_continue_carries_on() -> None:
    """Two parts, a budget of one step: the final answer gives the first and
    says the run ended before the second (the tool was there); "continue"
    goes on with the same request, from its results so far."""
    history = [Message.user("what is 2+2*3 and convert 10 miles to km")]
    first = (await act(history)).tool_calls
    assert first == (call("call_1", "calculator", expression="2+2*3"),)
    history += [Message.assistant(None, list(first)), await result_of(first[0])]
    answer = await final(history)
    assert answer == (
        "2 + 2 \u00d7 3 = **8**\n\n"
        "I couldn't finish: the run ended before I could use the convert_units "
        "tool to convert 10 miles to km. Ask me to continue and I'll carry on "
        "from there."
    )

    history += [Message.assistant(answer), Message.user("Continue.")]
    second = (await act(history)).tool_calls
    conversion = call(
        "call_2", "convert_units", value=10, from_unit="miles", to_unit="km"
    )
    assert second == (conversion,)
    history += [Message.assistant(None, [conversion]), await result_of(conversion)]
    _, control = await observe(history)
    assert control["should_continue"] is False
    assert control["final_answer"] == (
        "2 + 2 \u00d7 3 = **8**\n\n10 miles is **16.0934 km**"
    )


async def test_request_input_not_offered_asks_in_text() -> None:
    """Without `request_input`, the clarifying question is asked in the reply text."""
    completion = await act([Message.user("convert 10 miles")], tools=BUILTIN_SPECS)
    assert completion.tool_calls == ()
    assert completion.content == (
        "I need more information: What unit should I convert 10 miles to?"
    )


async def test_failed_tool_result() -> None:
    """A failed calculation ends the run with the tool's error as the final answer."""
    calculation = call("call_1", "calculator", expression="1/0")
    history = [
        Message.user("what is 1/0"),
        Message.assistant(None, [calculation]),
        failed("call_1", "calculator", "failed", "division by zero"),
    ]
    prose, control = await observe(history)
    assert prose == (
        "The calculator tool reported an error: division by zero. "
        "I'll tell the user what went wrong."
    )
    assert control == {
        "observation": "The calculator tool reported an error: division by zero.",
        "should_continue": False,
        "final_answer": "I couldn't calculate 1/0: division by zero.",
    }
    _, control = await reason(history)
    assert control["finish"] is True
    assert control["final_answer"] == "I couldn't calculate 1/0: division by zero."
    assert (await act(history)).content == "No action needed."


async def test_unanswered_question() -> None:
    """A timed-out `request_input` ends the run saying the question went unanswered."""
    ask = call(
        "call_1",
        "request_input",
        question="What unit should I convert 10 miles to?",
        answer_schema=MILES_TO,
    )
    history = [
        Message.user("convert 10 miles"),
        Message.assistant(None, [ask]),
        failed("call_1", "request_input", "timeout", "no answer within 300 s"),
    ]
    _, control = await observe(history)
    assert control == {
        "observation": "The question went unanswered: no answer within 300 s.",
        "should_continue": False,
        "final_answer": (
            "I couldn't convert 10 miles: I asked which unit to convert 10 miles to, "
            "but got no answer (no answer within 300 s)."
        ),
    }


async def test_question_the_loop_gave_up_on() -> None:
    """The loop's own note for an unanswered question is a failure, not a unit."""
    ask = call(
        "call_1",
        "request_input",
        question="What unit should I convert 10 miles to?",
        answer_schema=MILES_TO,
    )
    history = [
        Message.user("convert 10 miles"),
        Message.assistant(None, [ask]),
        closed(ask, "No answer: the user did not reply within 300 seconds.", "timeout"),
    ]
    assert await final(history) == (
        "I couldn't convert 10 miles: I asked which unit to convert 10 miles to, "
        "but got no answer (the user did not reply within 300 seconds)."
    )


async def test_failed_conversion() -> None:
    """An unknown target unit yields the converter's error, listing units it knows."""
    ask = call(
        "call_1",
        "request_input",
        question="What unit should I convert 10 miles to?",
        answer_schema=MILES_TO,
    )
    history = [
        Message.user("convert 10 miles"),
        Message.assistant(None, [ask]),
        Message.tool("call_1", "request_input", "bananas"),
    ]
    conversion = call(
        "call_2", "convert_units", value=10, from_unit="miles", to_unit="bananas"
    )
    assert (await act(history)).tool_calls == (conversion,)
    with pytest.raises(Exception) as caught:
        await result_of(conversion)
    history += [
        Message.assistant(None, [conversion]),
        failed("call_2", "convert_units", "failed", str(caught.value)),
    ]
    _, control = await observe(history)
    assert control["final_answer"] == (
        "I couldn't convert 10 miles to bananas: unknown unit 'bananas'; "
        "supported length units: mm, cm, m, km, in, ft, yd, mi."
    )


async def test_cancelled_tool_is_reported() -> None:
    """A tool call closed by the user's stop is reported as stopped before finishing."""
    calculation = call("call_1", "calculator", expression="2+2")
    history = [
        Message.user("2+2"),
        Message.assistant(None, [calculation]),
        closed(calculation, CANCELLED_NOTE, "cancelled"),
    ]
    assert await final(history) == (
        "I couldn't calculate 2+2: the user stopped the run before this tool finished."
    )


async def test_results_already_present_finish_in_reason_and_skip_act() -> None:
    """With the tool result already in history, reason answers and act does nothing."""
    calculation = call("call_1", "calculator", expression="6*7")
    history = [Message.user("what is 6*7"), Message.assistant(None, [calculation])]
    history.append(await result_of(calculation))
    _, control = await reason(history)
    assert control == {
        "plan": "Answer from the tool results.",
        "tools_to_consider": [],
        "finish": True,
        "final_answer": "6 × 7 = **42**",  # noqa: RUF001
    }
    completion = await act(history)
    assert (completion.content, completion.tool_calls) == ("No action needed.", ())


async def test_only_this_runs_results_count_and_ids_keep_counting() -> None:
    """An earlier turn's result does not answer a new question, and call ids go on."""
    first = call("call_1", "calculator", expression="1+1")
    history = [
        Message.user("what is 1+1"),
        Message.assistant(None, [first]),
        await result_of(first),
        Message.assistant("1 + 1 = **2**"),
        Message.user("and what is 2+3?"),
    ]
    assert (await act(history)).tool_calls == (
        call("call_2", "calculator", expression="2+3"),
    )


async def test_unknown_request_in_agent_mode_finishes_honestly() -> None:
    """An out-of-scope request in agent mode finishes with the offline introduction."""
    _, control = await reason([Message.user("Write me a poem about the sea")])
    assert control["finish"] is True
    assert control["final_answer"] == WORDS.introduction()


async def test_final_without_results() -> None:
    """A final answer with no results yet says which unit it still needs to know."""
    assert await final([Message.user("convert 10 miles")]) == (
        "I couldn't finish: I still need to know which unit to convert 10 miles to. "
        "Reply with it and I'll carry on."
    )


async def test_tolerates_unreadable_results() -> None:
    """A truncated, non-JSON tool result is passed on verbatim as the answer."""
    calculation = call("call_1", "calculator", expression="2+2")
    history = [
        Message.user("what is 2+2"),
        Message.assistant(None, [calculation]),
        Message.tool("call_1", "calculator", '{"expression": "2+2", "res… [truncated]'),
    ]
    _, control = await observe(history)
    assert control["should_continue"] is False
    assert control["final_answer"] == (
        'The calculator tool returned:\n\n{"expression": "2+2", "res… [truncated]'
    )


# --- plain chat and tool mode ----------------------------------------------------


async def test_chat_greeting_and_local_arithmetic() -> None:
    """Plain chat greets, and does arithmetic and reports its errors without tools."""
    hello = await chat([Message.user("hey there")])
    assert (hello.content, hello.tool_calls) == (WORDS.greeting(), ())
    sum_ = await chat([Message.user("what is 12 times 7?")])
    assert sum_.content == "12 × 7 = **84**"  # noqa: RUF001
    broken = await chat([Message.user("what is 5/0")])
    assert broken.content == "I couldn't calculate 5/0: division by zero."


async def test_chat_unknown_is_honest_about_being_offline() -> None:
    """Plain chat answers an out-of-scope request with the offline introduction."""
    completion = await chat([Message.user("Tell me a joke")])
    assert completion.content == WORDS.introduction()
    assert WORDS.introduction() == (
        "I'm loopwire's built-in offline demo model: simple rules, no network and "
        "no AI, so I can't answer that one.\n\n"
        "I can:\n"
        "- do arithmetic — “what is 2+2*3”, “sqrt(16) + 1”\n"
        "- tell the time in a timezone — “what time is it in Tokyo?”\n"
        "- convert units — “convert 10 miles to km”\n"
        "- ask you a clarifying question in agent mode — “convert 10 miles”\n"
        "- keep notes, with tools on — “remember that …”, “list my notes”, "
        "“forget note 1”\n\n"
        "To use a real model, set LOOPWIRE_LLM_BASE_URL, LOOPWIRE_LLM_API_KEY "
        "and LOOPWIRE_LLM_MODEL."
    )


async def test_chat_without_tools_says_which_tool_it_needs() -> None:
    """Plain chat names the tool a request needs and says to turn tools on."""
    completion = await chat([Message.user("What time is it in Tokyo?")])
    assert completion.tool_calls == ()
    assert completion.content.startswith(
        "I'm loopwire's built-in offline demo model, and to get the time "
        "in Asia/Tokyo I need the current_time tool — turn on tools or agent mode "
        "and ask again.\n\nI can:\n"
    )
    assert completion.content.endswith("LOOPWIRE_LLM_MODEL.")


async def test_tool_mode_calls_then_answers() -> None:
    """In tool mode, chat calls the tool and then answers from its result."""
    history = [Message.user("convert 5 lb to kg")]
    completion = await chat(history, BUILTIN_SPECS)
    conversion = call("call_1", "convert_units", value=5, from_unit="lb", to_unit="kg")
    assert completion.tool_calls == (conversion,)
    history += [Message.assistant(None, [conversion]), await result_of(conversion)]
    answer = await chat(history, BUILTIN_SPECS)
    assert (answer.content, answer.tool_calls) == ("5 lb is **2.26796 kg**", ())


async def test_tool_mode_asks_in_text_and_takes_the_unit_next_turn() -> None:
    """Tool mode asks for a missing unit in text and uses the user's next message."""
    history = [Message.user("convert 10 miles")]
    question = await chat(history, BUILTIN_SPECS)
    assert (question.content, question.tool_calls) == (
        "What unit should I convert 10 miles to?",
        (),
    )
    history += [Message.assistant(question.content), Message.user("km")]
    completion = await chat(history, BUILTIN_SPECS)
    assert completion.tool_calls == (
        call("call_1", "convert_units", value=10, from_unit="miles", to_unit="km"),
    )


async def test_tool_mode_without_the_tool() -> None:
    """Tool mode does sums itself but says a conversion needs the missing tool."""
    only_time = (TOOLS["current_time"].spec(),)
    local = await chat([Message.user("sqrt(16) + 1")], only_time)
    assert (local.content, local.tool_calls) == ("sqrt(16) + 1 = **5**", ())
    missing = await chat([Message.user("convert 3 ft to cm")], only_time)
    assert missing.content == (
        "The convert_units tool is not available, so I can't convert 3 ft to cm."
    )


async def test_tool_choice_none_never_calls() -> None:
    """A request with tool choice `none` gets no tool call even when a tool fits."""
    req = request("chat", [Message.user("what time is it")], BUILTIN_SPECS, "none")
    completion = await llm.complete(req)
    assert completion.tool_calls == ()


# --- streaming and usage -----------------------------------------------------------


async def test_stream_yields_word_deltas_then_the_completion() -> None:
    """Streaming sends one text delta per word, then the completion `complete` gives."""
    req = request("observe", [Message.user("what can you do?")])
    expected = await llm.complete(req)
    events = [event async for event in llm.stream(req)]
    *deltas, last = events
    assert last == expected
    assert all(isinstance(d, TextDelta) for d in deltas)
    texts = [d.text for d in deltas if isinstance(d, TextDelta)]
    assert "".join(texts) == expected.content
    assert len(texts) == len(expected.content.split())
    assert texts[:3] == ["No ", "tools ", "were "]


async def test_stream_of_a_tool_call_has_no_text() -> None:
    """A streamed tool call yields only the completion, with no text deltas."""
    req = request("act", [Message.user("what is 2+2")], AGENT_TOOLS, "auto")
    events = [event async for event in llm.stream(req)]
    assert events == [await llm.complete(req)]
    assert isinstance(events[0], Completion)
    assert events[0].tool_calls == (call("call_1", "calculator", expression="2+2"),)


async def test_usage_is_the_estimate_marked_as_one() -> None:
    """Usage records one LLM call per completion, its tokens estimated from
    the request and the reply as for any server that reports none, and says so."""
    asked = request("chat", [Message.user("hello")])
    completion = await llm.complete(asked)
    prompt = estimate_request_tokens(asked.messages, asked.tools)
    reply = estimate_message_tokens(Message.assistant(completion.content))
    assert completion.usage == Usage(
        prompt_tokens=prompt,
        completion_tokens=reply,
        total_tokens=prompt + reply,
        llm_calls=1,
        estimated_calls=1,
    )
    assert prompt > 0 and reply > 0


# --- several parts in one request ------------------------------------------------


async def test_two_conversions_take_one_step_each() -> None:
    """Two conversions in one request run one step each and are answered together."""
    history = [Message.user("convert 10 miles to km and 5 kg to lb")]
    _, control = await reason(history)
    assert control["plan"] == "Call convert_units to convert 10 miles to km."
    first = call("call_1", "convert_units", value=10, from_unit="miles", to_unit="km")
    assert (await act(history)).tool_calls == (first,)

    history += [Message.assistant(None, [first]), await result_of(first)]
    _, control = await observe(history)
    assert control == {
        "observation": (
            "The convert_units tool returned 16.0934 km. "
            "Next: use the convert_units tool to convert 5 kg to lb."
        ),
        "should_continue": True,
        "final_answer": "",
    }
    _, control = await reason(history)
    assert control["plan"] == "Call convert_units to convert 5 kg to lb."
    second = call("call_2", "convert_units", value=5, from_unit="kg", to_unit="lb")
    assert (await act(history)).tool_calls == (second,)

    history += [Message.assistant(None, [second]), await result_of(second)]
    _, control = await observe(history)
    answer = "10 miles is **16.0934 km**\n\n5 kg is **11.0231 lb**"
    assert control == {
        "observation": (
            "The convert_units tool returned 16.0934 km. "
            "The convert_units tool returned 11.0231 lb."
        ),
        "should_continue": False,
        "final_answer": answer,
    }
    assert await final(history) == answer


async def test_a_sum_and_a_time_in_tool_mode() -> None:
    """Tool mode runs a sum and a time lookup in turn and joins both answers."""
    history = [Message.user("3*7 and the time in London")]
    calculation = call("call_1", "calculator", expression="3*7")
    assert (await chat(history, BUILTIN_SPECS)).tool_calls == (calculation,)
    history += [Message.assistant(None, [calculation]), await result_of(calculation)]
    lookup = call("call_2", "current_time", timezone="Europe/London")
    assert (await chat(history, BUILTIN_SPECS)).tool_calls == (lookup,)
    history += [Message.assistant(None, [lookup]), await result_of(lookup)]
    answer = await chat(history, BUILTIN_SPECS)
    assert answer.content == (
        "3 × 7 = **21**\n\nIt's 13:05 on Sunday, 22 November 2026 in Europe/London."  # noqa: RUF001
    )


async def test_a_plan_has_one_step_per_action() -> None:
    """A plan for a multi-part request lists one step per action, the question first."""
    history = [Message.user("convert 10 miles and 3*7")]
    completion = await llm.complete(request("plan", history))
    prose, control = split(completion)
    assert prose == "One step per thing to do."
    assert control == {
        "steps": [
            "Ask the user which unit to convert 10 miles to with request_input.",
            "Call convert_units to convert 10 miles.",
            "Call calculator to calculate 3*7.",
        ],
        "final_answer": "",
    }


async def test_a_plan_for_small_talk_is_the_answer() -> None:
    """Planning small talk gives no steps and the greeting as the final answer."""
    _, control = split(await llm.complete(request("plan", [Message.user("hi")])))
    assert control == {"steps": [], "final_answer": WORDS.greeting()}


async def test_a_part_with_a_question_asks_then_goes_on() -> None:
    """A part that needs a question asks first, converts, then does the next part."""
    history = [Message.user("convert 10 miles and 3*7")]
    _, control = await reason(history)
    assert control["ask_user"] == "What unit should I convert 10 miles to?"
    ask = call(
        "call_1",
        "request_input",
        question="What unit should I convert 10 miles to?",
        answer_schema=MILES_TO,
    )
    assert (await act(history)).tool_calls == (ask,)
    history += [
        Message.assistant(None, [ask]),
        Message.tool("call_1", "request_input", "km"),
    ]
    conversion = call(
        "call_2", "convert_units", value=10, from_unit="miles", to_unit="km"
    )
    assert (await act(history)).tool_calls == (conversion,)
    history += [Message.assistant(None, [conversion]), await result_of(conversion)]
    assert (await act(history)).tool_calls == (
        call("call_3", "calculator", expression="3*7"),
    )


async def test_an_answer_in_words_completes_every_part_of_the_request() -> None:
    """In tool mode, a unit given as a chat reply lets every part of the request run."""
    history = [Message.user("convert 10 miles and 3*7")]
    question = await chat(history, BUILTIN_SPECS)
    assert question.content == "What unit should I convert 10 miles to?"
    history += [Message.assistant(question.content), Message.user("km")]
    conversion = call(
        "call_1", "convert_units", value=10, from_unit="miles", to_unit="km"
    )
    assert (await chat(history, BUILTIN_SPECS)).tool_calls == (conversion,)
    history += [Message.assistant(None, [conversion]), await result_of(conversion)]
    assert (await chat(history, BUILTIN_SPECS)).tool_calls == (
        call("call_2", "calculator", expression="3*7"),
    )


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        (
            "remember that I like salt and pepper",
            (call("call_1", "save_note", text="I like salt and pepper"),),
        ),
        (
            "what time is it in London and Paris",
            (call("call_1", "current_time", timezone="Europe/London"),),
        ),
        ("what is 2 and 3", ()),
    ],
)
async def test_a_request_is_split_only_when_every_piece_is_a_request(
    text: str, calls: tuple[ToolCall, ...]
) -> None:
    """An `and` splits a request only when each piece is a request of its own."""
    every_tool = (*(tool.spec() for tool in REGISTRY), REQUEST_INPUT)
    assert (await act([Message.user(text)], tools=every_tool)).tool_calls == calls


async def test_plain_chat_answers_the_parts_it_can_and_says_what_it_cannot() -> None:
    """Plain chat answers the sum itself and says the time needs a tool."""
    completion = await chat([Message.user("3*7 and the time in London")])
    head, _, rest = completion.content.partition("\n\n")
    assert head == "3 × 7 = **21**"  # noqa: RUF001
    assert rest.startswith(
        "I'm loopwire's built-in offline demo model, and to get the time in "
        "Europe/London I need the current_time tool"
    )
