"""The offline model's notes demo: save (asks approval), list and delete notes.

Unit tests build requests the way the loop does (see tests/test_offline.py)
and feed back the real note tools' results; the end-to-end tests at the bottom
run the default app (offline model, real executor and approvals) over /ws.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from backend.agent.cutoffs import CANCELLED_NOTE, closed
from backend.llm.base import (
    Message,
    ToolCall,
    ToolStatus,
)
from backend.tools.base import ToolContext
from backend.tools.builtin import builtin_tools
from backend.tools.notes import MemoryNotebook, note_tools
from backend.transcript import EDITED_NOTE
from tests.conftest import StartServer
from tests.offline_driver import (
    REQUEST_INPUT,
    WORDS,
    Phases,
    call,
    failed,
    llm,
    request,
)
from tests.ws_client import labels

BUILTIN_SPECS = tuple(tool.spec() for tool in builtin_tools())
NOTE_SPECS = tuple(tool.spec() for tool in note_tools(MemoryNotebook()))
TOOL_MODE = (*BUILTIN_SPECS, *NOTE_SPECS)
AGENT_TOOLS = (*TOOL_MODE, REQUEST_INPUT)
DECLINED = "the user declined to run save_note (reason: not now)"
LOCKER = "my locker code is 4512"

PHASES_DRIVER = Phases(agent_tools=AGENT_TOOLS, final_tools=TOOL_MODE)
reason = PHASES_DRIVER.reason
act = PHASES_DRIVER.act
observe = PHASES_DRIVER.observe
final = PHASES_DRIVER.final
chat = PHASES_DRIVER.chat


class Notebook:
    """The real note tools over one owner's notebook, with a pinned clock."""

    def __init__(self, *texts: str) -> None:
        self.store = MemoryNotebook()
        clock = lambda: 1700000000.0  # noqa: E731
        self.tools = {tool.name: tool for tool in note_tools(self.store, clock)}
        self._texts = texts

    async def filled(self) -> Notebook:
        for text in self._texts:
            await self.store.add_note("local", text, 1700000000.0, limit=200)
        return self

    async def result_of(self, tool_call: ToolCall) -> Message:
        """The tool message the executor would add for a successful call."""
        tool = self.tools[tool_call.name]
        args = tool.args_model.model_validate_json(tool_call.arguments)
        value = await tool(args, ToolContext(session_id="s"))
        content = json.dumps(value, indent=2, ensure_ascii=False)
        return Message.tool(tool_call.id, tool_call.name, content)


def ran(tool_call: ToolCall, result: str | Message) -> list[Message]:
    """The call and its result (text: a successful call's result)."""
    if isinstance(result, str):
        result = Message.tool(tool_call.id, tool_call.name, result)
    return [Message.assistant(None, [tool_call]), result]


def refused(tool_call: ToolCall, status: ToolStatus, error: str) -> Message:
    return failed(tool_call.id, tool_call.name, status, error)


# --- save ------------------------------------------------------------------------


async def test_save_in_agent_mode() -> None:
    """An agent-mode “remember that …” calls `save_note`, then confirms the note."""
    history = [Message.user("Remember that my locker code is 4512.")]
    prose, control = await reason(history)
    assert prose == (
        "I'll use the save_note tool to save the note “my locker code is 4512”."
    )
    assert control == {
        "plan": "Call save_note to save the note “my locker code is 4512”.",
        "tools_to_consider": ["save_note"],
        "finish": False,
        "final_answer": "",
    }

    history.append(Message.assistant(prose))
    completion = await act(history)
    save = call("call_1", "save_note", text=LOCKER)
    assert completion.tool_calls == (save,)
    assert completion.tool_calls[0].arguments == '{"text": "my locker code is 4512"}'

    history += [Message.assistant(None, [save]), await Notebook().result_of(save)]
    prose, control = await observe(history)
    assert prose == "The save_note tool saved note #1. That answers the request."
    assert control == {
        "observation": "The save_note tool saved note #1.",
        "should_continue": False,
        "final_answer": "Saved note #1: “my locker code is 4512”.",
    }
    assert await final(history) == "Saved note #1: “my locker code is 4512”."


async def test_a_save_approved_with_other_arguments_reads_its_result() -> None:
    """The note an approval with edited arguments adds to the result does not
    hide the result from the offline model; it answers with the saved text."""
    history = [Message.user("Remember that my locker code is 4512.")]
    save = call("call_1", "save_note", text="my locker code is 4513")
    saved = await Notebook().result_of(save)
    note = f'{EDITED_NOTE}{{"text": "my locker code is 4513"}})'
    edited = Message.tool(save.id, save.name, (saved.content or "") + note)
    history += [Message.assistant(None, [save]), edited]
    _prose, control = await observe(history)
    assert control["final_answer"] == "Saved note #1: “my locker code is 4513”."


async def test_save_declined_stops_with_an_honest_answer() -> None:
    """A declined `save_note` ends the run saying the note was not saved."""
    save = call("call_1", "save_note", text=LOCKER)
    history = [
        Message.user("remember that my locker code is 4512"),
        *ran(save, refused(save, "rejected", DECLINED)),
    ]

    prose, control = await observe(history)
    assert prose == (
        "The user declined to run save_note (reason: not now). I won't try it again."
    )
    assert control == {
        "observation": "The user declined to run save_note (reason: not now).",
        "should_continue": False,
        "final_answer": "OK — I didn't save the note “my locker code is 4512”, since you declined.",
    }
    prose, control = await reason(history)
    assert prose == "The user declined the tool call, so I won't try it again."
    assert control == {
        "plan": "Tell the user what was not done.",
        "tools_to_consider": [],
        "finish": True,
        "final_answer": "OK — I didn't save the note “my locker code is 4512”, since you declined.",
    }
    assert (await act(history)).content == "No action needed."
    # The loop stops on a rejection and forces the final answer (tool_choice none).
    assert (
        await final(history)
        == "OK — I didn't save the note “my locker code is 4512”, since you declined."
    )


async def test_declined_without_a_reason_and_with_the_continue_note() -> None:
    """A decline with no reason and a “continue without it” hint still stops unsaved."""
    save = call("call_1", "save_note", text="buy milk")
    content = (
        "Error (rejected): the user declined to run save_note\n"
        "Do not call it again; continue without it."
    )
    result = Message.tool(
        save.id, save.name, content, "rejected", "the user declined to run save_note"
    )
    _, control = await observe([Message.user("remember: buy milk"), *ran(save, result)])
    assert control == {
        "observation": "The user declined to run save_note.",
        "should_continue": False,
        "final_answer": "OK — I didn't save the note “buy milk”, since you declined.",
    }


SAVE = call("call_1", "save_note", text="buy milk")


@pytest.mark.parametrize(
    ("result", "answer"),
    [
        (
            refused(
                SAVE,
                "timeout",
                "no approval decision for save_note within 300s; it was not run",
            ),
            "I couldn't save the note “buy milk”: no approval decision for save_note within "
            "300s; it was not run.",
        ),
        (
            refused(
                SAVE, "failed", "this session already has 200 notes; delete some first"
            ),
            "I couldn't save the note “buy milk”: this session already has 200 notes; "
            "delete some first.",
        ),
        (
            refused(
                SAVE,
                "blocked",
                "save_note changes data and this session is read-only; "
                "answer without it or ask the user to turn read-only off",
            ),
            "I couldn't save the note “buy milk”: this session is read-only. "
            "Turn read-only off and ask again.",
        ),
        (
            closed(SAVE, CANCELLED_NOTE, "cancelled"),
            "I couldn't save the note “buy milk”: the user stopped the run before this tool "
            "finished.",
        ),
    ],
)
async def test_save_errors_are_reported_honestly(result: Message, answer: str) -> None:
    """Timeout, quota, read-only and cancelled saves each end naming their cause."""
    save = SAVE
    history = [Message.user("remember: buy milk"), *ran(save, result)]
    _, control = await observe(history)
    assert control["should_continue"] is False
    assert control["final_answer"] == answer
    assert await final(history) == answer


async def test_failed_save_observation() -> None:
    """A failed save's observation quotes the error and says the user will be told."""
    save = call("call_1", "save_note", text="buy milk")
    result = refused(
        save, "failed", "this session already has 200 notes; delete some first"
    )
    prose, _ = await observe([Message.user("note: buy milk"), *ran(save, result)])
    assert prose == (
        "The save_note tool reported an error: this session already has 200 notes; "
        "delete some first. I'll tell the user what went wrong."
    )


@pytest.mark.parametrize(
    ("text", "note"),
    [
        ("remember that my locker code is 4512", LOCKER),
        ("remember: buy milk", "buy milk"),
        ("Remember to buy milk, please.", "buy milk"),
        ("remember this: the gate code is 1234#", "the gate code is 1234#"),
        ("remember tomorrow is a holiday", "tomorrow is a holiday"),
        ("note that the wifi password is abc-123", "the wifi password is abc-123"),
        ("Note: dentist on Friday", "dentist on Friday"),
        ("note down the plate number XK-512", "the plate number XK-512"),
        ("note to self: water the plants", "water the plants"),
        ("save a note: call mom", "call mom"),
        ("make a note to renew the passport", "renew the passport"),
        ("make a note of the meeting room: B2", "the meeting room: B2"),
        ("take a note that the oven is 220°C", "the oven is 220°C"),
        ("add a note saying hello", "hello"),
        ("jot down 555-1234", "555-1234"),
        ("Please remember “parking level 3”!", "parking level 3"),
        ("Could you remember that I parked on level 3?", "I parked on level 3"),
        ("remember: is the shop open on Sunday?", "is the shop open on Sunday?"),
    ],
)
async def test_save_phrasings(text: str, note: str) -> None:
    """Many phrasings of “remember …” call `save_note` with only the text to keep."""
    completion = await act([Message.user(text)])
    assert completion.tool_calls == (call("call_1", "save_note", text=note),)


async def test_save_needs_the_tool_offered() -> None:
    """With `save_note` not offered, no call is made and the answer says it is off."""
    history = [Message.user("remember: buy milk")]
    completion = await act(history, tools=(*BUILTIN_SPECS, REQUEST_INPUT))
    assert (completion.content, completion.tool_calls) == (
        "The save_note tool is not available.",
        (),
    )
    history.append(Message.assistant(completion.content))
    ending = await llm.complete(
        request("final", history, (*BUILTIN_SPECS, REQUEST_INPUT), "none")
    )
    assert ending.content == (
        "I couldn't finish: I needed the save_note tool to save the note "
        "“buy milk”, but it isn't enabled for this session."
    )


async def test_long_notes_are_shortened_in_the_plan_only() -> None:
    """A long note is cut with an ellipsis in the plan but saved in full."""
    text = "the quick brown fox jumps over the lazy dog " * 3
    history = [Message.user(f"remember that {text}")]
    _, control = await reason(history)
    assert control["plan"] == (
        "Call save_note to save the note "
        "“the quick brown fox jumps over the lazy dog the quick brown…”."
    )
    assert (await act(history)).tool_calls == (
        call("call_1", "save_note", text=text.strip()),
    )


# --- a bare "remember": ask what to remember -------------------------------------


async def test_bare_remember_asks_then_saves() -> None:
    """A bare “make a note” asks what to remember, then saves the user's answer."""
    history = [Message.user("make a note")]
    prose, control = await reason(history)
    assert prose == "The request doesn't say what to remember, so I'll ask the user."
    assert control["plan"] == (
        "Ask the user what to remember with request_input, then use save_note."
    )
    ask = call("call_1", "request_input", question="What should I remember?")
    assert (await act(history)).tool_calls == (ask,)

    history += ran(ask, "my bike lock is 0451")
    _, control = await observe(history)
    assert control == {
        "observation": (
            "The user answered: “my bike lock is 0451”. "
            "Next: use the save_note tool to save the note “my bike lock is 0451”."
        ),
        "should_continue": True,
        "final_answer": "",
    }
    assert (await act(history)).tool_calls == (
        call("call_2", "save_note", text="my bike lock is 0451"),
    )


async def test_bare_remember_unanswered() -> None:
    """An unanswered “What should I remember?” ends naming the timeout."""
    ask = call("call_1", "request_input", question="What should I remember?")
    history = [
        Message.user("remember"),
        *ran(
            ask,
            closed(
                ask, "No answer: the user did not reply within 300 seconds.", "timeout"
            ),
        ),
    ]
    assert await final(history) == (
        "I couldn't save a note: I asked what to remember, but got no answer "
        "(the user did not reply within 300 seconds)."
    )


async def test_bare_remember_in_tool_mode_takes_the_next_message() -> None:
    """In tool mode a bare “remember” asks in prose and saves the next user message."""
    history = [Message.user("remember")]
    question = await chat(history, TOOL_MODE)
    assert (question.content, question.tool_calls) == ("What should I remember?", ())
    history += [Message.assistant(question.content), Message.user("45-12")]
    completion = await chat(history, TOOL_MODE)
    assert completion.tool_calls == (call("call_1", "save_note", text="45-12"),)


@pytest.mark.parametrize(
    ("reply", "tool", "arguments"),
    [
        ("what time is it in Tokyo?", "current_time", {"timezone": "Asia/Tokyo"}),
        ("list my notes", "list_notes", {}),
    ],
)
async def test_a_new_request_is_not_taken_as_the_note(
    reply: str, tool: str, arguments: dict[str, Any]
) -> None:
    """A fresh request sent after “What should I remember?” runs its own tool."""
    history = [
        Message.user("remember"),
        Message.assistant("What should I remember?"),
        Message.user(reply),
    ]
    assert (await chat(history, TOOL_MODE)).tool_calls == (
        call("call_1", tool, **arguments),
    )


async def test_a_finished_note_request_is_not_completed_later() -> None:
    """Once a note is saved, a later unrelated message gets the introduction."""
    ask = call("call_1", "request_input", question="What should I remember?")
    save = call("call_2", "save_note", text="buy milk")
    history = [
        Message.user("remember"),
        *ran(ask, "buy milk"),
        Message.assistant(None, [save]),
        await Notebook().result_of(save),
        Message.assistant("Saved note #1: “buy milk”."),
        Message.user("tell me a joke"),
    ]
    assert (await chat(history)).content == WORDS.introduction()


# --- list ------------------------------------------------------------------------


async def test_list_with_no_notes() -> None:
    """Listing an empty notebook calls `list_notes` and says there are no notes yet."""
    history = [Message.user("What do you remember?")]
    prose, control = await reason(history)
    assert prose == "I'll use the list_notes tool to list your notes."
    assert control["tools_to_consider"] == ["list_notes"]
    listing = call("call_1", "list_notes")
    completion = await act(history)
    assert completion.tool_calls == (listing,)
    assert completion.tool_calls[0].arguments == "{}"

    history += [Message.assistant(None, [listing]), await Notebook().result_of(listing)]
    prose, control = await observe(history)
    assert prose == "The list_notes tool returned no notes. That answers the request."
    assert control == {
        "observation": "The list_notes tool returned no notes.",
        "should_continue": False,
        "final_answer": "You have no notes yet.",
    }


async def test_list_shows_each_notes_own_number() -> None:
    """A listing keeps each note's id after a deletion and joins multi-line notes."""
    notebook = await Notebook(LOCKER, "call mom", "buy milk\n  and eggs").filled()
    await notebook.store.delete_note("local", 2)
    listing = call("call_1", "list_notes")
    history = [
        Message.user("list my notes"),
        Message.assistant(None, [listing]),
        await notebook.result_of(listing),
    ]
    _, control = await observe(history)
    assert control == {
        "observation": "The list_notes tool returned 2 notes.",
        "should_continue": False,
        "final_answer": (
            "You have 2 notes:\n- #1: my locker code is 4512\n- #3: buy milk and eggs"
        ),
    }


async def test_list_with_one_note() -> None:
    """A one-note listing says “1 note”, in the singular."""
    listing = call("call_1", "list_notes")
    history = [
        Message.user("show notes"),
        Message.assistant(None, [listing]),
        await (await Notebook("buy milk").filled()).result_of(listing),
    ]
    assert await final(history) == "You have 1 note:\n- #1: buy milk"


async def test_a_truncated_list_is_passed_on_as_is() -> None:
    """A truncated `list_notes` result reaches the user verbatim."""
    listing = call("call_1", "list_notes")
    content = '{\n  "count": 90,\n  "notes": [\n    {\n      "id": 1,\n… [truncated]'
    _, control = await observe([Message.user("show notes"), *ran(listing, content)])
    assert control["final_answer"] == f"The list_notes tool returned:\n\n{content}"


@pytest.mark.parametrize(
    "text",
    [
        "what do you remember?",
        "What did I ask you to remember?",
        "list my notes",
        "show notes",
        "show me all of my notes",
        "can I see my saved notes?",
        "what notes do I have",
        "do I have any notes?",
        "how many notes do I have?",
        "my notes",
        "Notes?",
    ],
)
async def test_list_phrasings(text: str) -> None:
    """Each way of asking which notes exist calls `list_notes` with no arguments."""
    completion = await act([Message.user(text)])
    assert completion.tool_calls == (call("call_1", "list_notes"),)


# --- delete ----------------------------------------------------------------------


async def test_delete_a_note() -> None:
    """“forget note 2” calls `delete_note` with id 2 and confirms the deleted text."""
    history = [Message.user("forget note 2")]
    prose, control = await reason(history)
    assert prose == "I'll use the delete_note tool to delete note #2."
    assert control["plan"] == "Call delete_note to delete note #2."
    delete = call("call_1", "delete_note", id=2)
    completion = await act(history)
    assert completion.tool_calls == (delete,)
    assert completion.tool_calls[0].arguments == '{"id": 2}'

    notebook = await Notebook(LOCKER, "buy milk").filled()
    history += [Message.assistant(None, [delete]), await notebook.result_of(delete)]
    prose, control = await observe(history)
    assert prose == "The delete_note tool deleted note #2. That answers the request."
    assert control == {
        "observation": "The delete_note tool deleted note #2.",
        "should_continue": False,
        "final_answer": "Deleted note #2: “buy milk”.",
    }


async def test_delete_a_missing_note() -> None:
    """Deleting an absent note ends with the tool's error, which lists the real ids."""
    delete = call("call_1", "delete_note", id=2)
    result = refused(delete, "failed", "there is no note #2; existing notes: 1, 3")
    history = [Message.user("delete note #2"), *ran(delete, result)]
    prose, control = await observe(history)
    assert prose == (
        "The delete_note tool reported an error: there is no note #2; "
        "existing notes: 1, 3. I'll tell the user what went wrong."
    )
    assert control == {
        "observation": (
            "The delete_note tool reported an error: there is no note #2; "
            "existing notes: 1, 3."
        ),
        "should_continue": False,
        "final_answer": (
            "I couldn't delete note #2: there is no note #2; existing notes: 1, 3."
        ),
    }


@pytest.mark.parametrize(
    ("text", "note_id"),
    [
        ("forget note 2", 2),
        ("delete note #2", 2),
        ("remove note 2", 2),
        ("Please delete note number 12.", 12),
        ("erase the note #7", 7),
        ("forget about note 5", 5),
        ("delete #4", 4),
    ],
)
async def test_delete_phrasings(text: str, note_id: int) -> None:
    """Each phrasing of a delete request calls `delete_note` with the number given."""
    completion = await act([Message.user(text)])
    assert completion.tool_calls == (call("call_1", "delete_note", id=note_id),)


async def test_delete_without_a_number_asks_which() -> None:
    """A delete with no number asks which note, then deletes the number answered."""
    history = [Message.user("delete the note about milk")]
    ask = call(
        "call_1",
        "request_input",
        question="Which note should I delete? Tell me its number.",
    )
    assert (await act(history)).tool_calls == (ask,)
    history += ran(ask, "number 3")
    assert (await act(history)).tool_calls == (call("call_2", "delete_note", id=3),)


async def test_delete_answer_without_a_number() -> None:
    """An answer with no note number ends the run with advice on how to delete."""
    ask = call(
        "call_1",
        "request_input",
        question="Which note should I delete? Tell me its number.",
    )
    history = [Message.user("delete a note"), *ran(ask, "the milk one")]
    _, control = await observe(history)
    assert control == {
        "observation": "The user's answer has no note number in it.",
        "should_continue": False,
        "final_answer": (
            "I couldn't delete a note: “the milk one” has no note number. "
            "Ask me to “list my notes”, then “forget note 2”, for example."
        ),
    }


async def test_delete_number_in_the_next_message_in_tool_mode() -> None:
    """In tool mode a numberless delete asks which note, then uses the reply's id."""
    history = [Message.user("remove a note")]
    question = await chat(history, TOOL_MODE)
    assert question.content == "Which note should I delete? Tell me its number."
    history += [Message.assistant(question.content), Message.user("#2")]
    assert (await chat(history, TOOL_MODE)).tool_calls == (
        call("call_1", "delete_note", id=2),
    )


# --- plain chat and tool mode ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "explanation"),
    [
        (
            "remember that my locker code is 4512",
            "I'm loopwire's built-in offline demo model, and to save the note "
            "“my locker code is 4512” I need the save_note tool — turn on tools "
            "or agent mode and ask again.",
        ),
        (
            "list my notes",
            "I'm loopwire's built-in offline demo model, and to list your notes "
            "I need the list_notes tool — turn on tools or agent mode and ask again.",
        ),
        (
            "forget note 2",
            "I'm loopwire's built-in offline demo model, and to delete note #2 "
            "I need the delete_note tool — turn on tools or agent mode and ask again.",
        ),
        (
            "remember",
            "I'm loopwire's built-in offline demo model, and to save a note "
            "I need the save_note tool — turn on tools or agent mode and ask again.",
        ),
    ],
)
async def test_plain_chat_explains_that_notes_need_tools(
    text: str, explanation: str
) -> None:
    """In plain chat a note request names the tool it needs and says to enable tools."""
    completion = await chat([Message.user(text)])
    assert completion.tool_calls == ()
    head, _, rest = completion.content.partition("\n\n")
    assert head == explanation
    assert "- keep notes, with tools on — “remember that …”, “list my notes”" in rest


async def test_tool_mode_saves_then_answers() -> None:
    """In tool mode a save request calls `save_note`, then confirms the saved note."""
    history = [Message.user("remember that my locker code is 4512")]
    completion = await chat(history, TOOL_MODE)
    save = call("call_1", "save_note", text=LOCKER)
    assert (completion.content, completion.tool_calls) == ("", (save,))
    assert completion.finish_reason == "tool_calls"

    history += [Message.assistant(None, [save]), await Notebook().result_of(save)]
    answer = await chat(history, TOOL_MODE)
    assert (answer.content, answer.tool_calls) == (
        "Saved note #1: “my locker code is 4512”.",
        (),
    )


async def test_tool_mode_lists_then_answers() -> None:
    """In tool mode a list request calls `list_notes`, then answers with every note."""
    history = [Message.user("what notes do I have?")]
    listing = call("call_1", "list_notes")
    assert (await chat(history, TOOL_MODE)).tool_calls == (listing,)
    notebook = await Notebook(LOCKER, "buy milk").filled()
    history += [Message.assistant(None, [listing]), await notebook.result_of(listing)]
    answer = await chat(history, TOOL_MODE)
    assert answer.content == (
        "You have 2 notes:\n- #1: my locker code is 4512\n- #2: buy milk"
    )


async def test_tool_mode_after_a_declined_save() -> None:
    """In tool mode the tools-off answer after a declined save says it wasn't saved."""
    save = call("call_1", "save_note", text=LOCKER)
    history = [
        Message.user("remember that my locker code is 4512"),
        *ran(save, refused(save, "rejected", DECLINED)),
    ]
    # The chat rounds end on a rejection with one more call, tools off.
    answer = await chat(history, TOOL_MODE, tool_choice="none")
    assert (answer.content, answer.tool_calls) == (
        "OK — I didn't save the note “my locker code is 4512”, since you declined.",
        (),
    )


async def test_tool_mode_without_the_note_tools() -> None:
    """In tool mode without the note tools, a list request says the tool is missing."""
    completion = await chat([Message.user("list my notes")], BUILTIN_SPECS)
    assert completion.content == (
        "The list_notes tool is not available, so I can't list your notes."
    )


# --- which request wins ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tool", "arguments"),
    [
        ("remember that 2+2 is 4", "save_note", {"text": "2+2 is 4"}),
        ("what is 2+2", "calculator", {"expression": "2+2"}),
        ("note that 10 miles is 16 km", "save_note", {"text": "10 miles is 16 km"}),
        (
            "convert 10 miles to km",
            "convert_units",
            {"value": 10, "from_unit": "miles", "to_unit": "km"},
        ),
        (
            "remember: the time in Tokyo is 9 hours ahead",
            "save_note",
            {"text": "the time in Tokyo is 9 hours ahead"},
        ),
        ("do you remember what time it is?", "current_time", {"timezone": "UTC"}),
        ("remember to delete note 2", "save_note", {"text": "delete note 2"}),
        ("delete note 2", "delete_note", {"id": 2}),
        ("remember that I have 3 notes", "save_note", {"text": "I have 3 notes"}),
        ("how many notes do I have, 2 or 3?", "list_notes", {}),
    ],
)
async def test_precedence(text: str, tool: str, arguments: dict[str, Any]) -> None:
    """A message mixing note words with maths, units or time picks the right tool."""
    completion = await act([Message.user(text)])
    assert completion.tool_calls == (call("call_1", tool, **arguments),)


@pytest.mark.parametrize(
    "text", ["forget it", "I took notes in class", "notebook prices", "tell me a joke"]
)
async def test_not_note_requests(text: str) -> None:
    """Messages that merely mention forgetting or notes get the introduction."""
    assert (await chat([Message.user(text)])).content == WORDS.introduction()


# --- end to end: the default app, real executor and approvals --------------------

END = ["chat_response", "agent_completion", "response_complete"]


async def test_agent_saves_after_approval_then_lists(start_server: StartServer) -> None:
    """Over /ws an approved agent save stores the note and a later listing shows it."""
    harness = await start_server(llm_provider="offline")
    client, _ = await harness.ready_client()
    await client.send(
        type="chat", content="Remember that my locker code is 4512", agent_mode=True
    )
    before = await client.until_label("tool_approval_request:save_note")
    assert before[-1]["arguments"] == {"text": LOCKER}
    await client.send(
        type="tool_approval_response",
        tool_call_id=before[-1]["tool_call_id"],
        approved=True,
    )
    rest = await client.run()
    assert labels(rest) == ["tool_complete:save_note", "agent_observe", *END]
    assert rest[-3]["message"] == "Saved note #1: “my locker code is 4512”."

    frames = await client.chat("what do you remember?", agent_mode=True)
    assert "tool_complete:list_notes" in labels(frames)
    assert frames[-3]["message"] == "You have 1 note:\n- #1: my locker code is 4512"


async def test_agent_save_declined(start_server: StartServer) -> None:
    """Over /ws a declined agent save ends as rejected with a “didn't save” answer."""
    harness = await start_server(llm_provider="offline")
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="remember: buy milk", agent_mode=True)
    before = await client.until_label("tool_approval_request:save_note")
    await client.send(
        type="tool_approval_response",
        tool_call_id=before[-1]["tool_call_id"],
        approved=False,
        reason="not now",
    )
    rest = await client.run()
    assert labels(rest)[0] == "tool_error:save_note:rejected"
    assert labels(rest)[-3:] == END
    assert (
        rest[-3]["message"]
        == "OK — I didn't save the note “buy milk”, since you declined."
    )
    assert rest[-2]["reason"] == "rejected"


async def test_tool_mode_over_websocket(start_server: StartServer) -> None:
    """Over /ws, tool mode with only `list_notes` selected lists an empty notebook."""
    harness = await start_server(llm_provider="offline")
    client, _ = await harness.ready_client()
    frames = await client.chat("list my notes", selected_tools=["list_notes"])
    assert "tool_complete:list_notes" in labels(frames)
    assert frames[-2]["message"] == "You have no notes yet."
