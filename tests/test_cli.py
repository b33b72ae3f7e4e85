"""`loopwire chat` in process, against a live server on the offline model.

(The command end to end, as a process against a server process, is in
`tests/test_cli_process.py`.)
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import re
from argparse import Namespace
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import pytest
from pydantic import ValidationError

from backend.cli import (
    _chat,
    conversations_command,
    grants_command,
    server_url,
    settings_problem,
)
from backend.protocol import ToolApprovalRequest, server_message_adapter
from loopwire.answers import CHOICES, Answers
from loopwire.client import Decision
from loopwire.exit_codes import ExitCode, for_reason
from loopwire.terminal import Terminal
from loopwire.transcript import describe
from tests.conftest import StartServer, make_settings
from tests.fakes import Saver, ScriptedLLM, approval_registry, calls, observe, reason
from tests.ws_client import label


def _args(url: str, message: str, **extra: object) -> argparse.Namespace:
    values: dict[str, object] = {
        "url": url,
        "message": message,
        "agent": True,
        "strategy": None,
        "max_steps": None,
        "json": False,
        "token": None,
        "answer": None,
        "approve": None,
        "no_input": False,
        "session": None,
        "system": None,
    }
    values.update(extra)
    return argparse.Namespace(**values)


@contextmanager
def piped(text: str) -> Iterator[TextIO]:
    """A stdin that is a pipe holding `text`, then its end."""
    read, write = os.pipe()
    os.write(write, text.encode())
    os.close(write)
    with os.fdopen(read) as stdin:
        yield stdin


async def run_chat(
    url: str, message: str, stdin: TextIO | None = None, **extra: object
) -> tuple[int, list[str], list[str]]:
    """Exit status, stdout lines and stderr lines of one `loopwire chat`."""
    out, err = io.StringIO(), io.StringIO()
    status = await _chat(_args(url, message, **extra), out, err, stdin)
    return status, out.getvalue().splitlines(), err.getvalue().splitlines()


async def test_questions_are_answered_from_arguments(start_server: StartServer) -> None:
    """An `--answer` value answers the agent's question and the run finishes."""
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    status, lines, err = await run_chat(url, "convert 10 miles", answer=["km"])
    assert (status, err) == (ExitCode.FINISHED, [])
    assert lines[:4] == [
        "— step 1 / 10",
        "  [reason] The request doesn't say which unit to convert 10 miles to, so I'll ask the user.",
        "  ? What unit should I convert 10 miles to?",
        "your answer> km",
    ]
    assert (
        '  → convert_units({"value": 10, "from_unit": "miles", "to_unit": "km"})'
        in lines
    )
    assert "assistant: 10 miles is **16.0934 km**" in lines
    assert lines[-2].startswith("(done: finished, 2 step(s), ")
    assert re.fullmatch(
        r"\(conversation [0-9a-f]{32}: --session to continue\)", lines[-1]
    )


async def test_questions_are_answered_from_stdin_lines(
    start_server: StartServer,
) -> None:
    """A line piped on stdin answers the agent's question and the run finishes."""
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    with piped("km\n") as stdin:
        status, lines, err = await run_chat(url, "convert 10 miles", stdin)
    assert (status, err) == (ExitCode.FINISHED, [])
    assert lines[2:4] == [
        "  ? What unit should I convert 10 miles to?",
        "your answer> km",
    ]
    assert "assistant: 10 miles is **16.0934 km**" in lines


async def test_no_answer_to_give_stops_the_run(start_server: StartServer) -> None:
    """With stdin used up or `--no-input`, a question stops the run with `NO_INPUT`."""
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    with piped("") as stdin:
        status, lines, err = await run_chat(url, "convert 5 lb", stdin)
    assert status == ExitCode.NO_INPUT
    assert err == [
        "loopwire: the agent asks “What unit should I convert 5 lb to?” but stdin "
        "has no more lines; stopping the run"
    ]
    assert lines[-3] == "  (stopped)"
    assert lines[-2].startswith("(done: stopped, 1 step(s), ")

    status, _, err = await run_chat(url, "convert 5 lb", no_input=True)
    assert status == ExitCode.NO_INPUT
    assert err == [
        "loopwire: the agent asks “What unit should I convert 5 lb to?” but "
        "--no-input is set; stopping the run"
    ]


async def test_plain_chat_prints_the_streamed_answer_once(
    start_server: StartServer,
) -> None:
    """Without agent mode the streamed answer is printed exactly once."""
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    status, lines, _ = await run_chat(url, "what is 6*7", agent=False)
    assert status == ExitCode.FINISHED
    assert lines[:-1] == ["", "assistant: 6 \u00d7 7 = **42**"]


async def test_system_gives_the_run_its_instructions(
    start_server: StartServer,
) -> None:
    """`--system` text reaches the model as a system message before the user's."""
    llm = ScriptedLLM("Oui.")
    harness = await start_server(llm)
    url = harness.server.url("/ws", "ws")
    status, lines, _ = await run_chat(
        url, "hello", agent=False, system="Answer in French."
    )
    assert status == ExitCode.FINISHED and lines[1] == "assistant: Oui."
    [request] = llm.requests
    assert [(m.role, m.content) for m in request.messages[1:]] == [
        ("system", "Answer in French."),
        ("user", "hello"),
    ]


async def test_json_prints_one_frame_per_line(start_server: StartServer) -> None:
    """`--json` prints each server frame as one valid JSON line, in seq order."""
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    status, lines, err = await run_chat(url, "what is 6*7", agent=False, json=True)
    assert (status, err) == (ExitCode.FINISHED, [])
    frames = [json.loads(line) for line in lines]
    for line in lines:
        server_message_adapter.validate_json(line)
    assert [label(f) for f in frames] == [
        "session_ready",
        *["token_stream"] * 3,  # the first piece, the rest joined, the end
        "chat_response",
        "response_complete",
    ]
    assert [f["seq"] for f in frames] == list(range(6))


async def test_approvals_from_arguments(start_server: StartServer) -> None:
    """`--approve yes` runs the tool, `no` ends rejected, and no stdin declines."""
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    message = "remember that the wifi password is hunter2"
    status, lines, _ = await run_chat(url, message, approve="yes")
    assert status == ExitCode.FINISHED
    assert (
        "  ! save_note needs your approval: Saves a note for you to find later; "
        "asks you first." in lines
    )
    assert "approve save_note? yes" in lines
    assert "assistant: Saved note #1: “the wifi password is hunter2”." in lines

    message = "remember that I parked on level 3"
    status, lines, err = await run_chat(url, message, approve="no")
    assert status == ExitCode.REJECTED
    assert err == ["loopwire: the run ended: a tool call was declined"]
    assert lines[-2].startswith("(done: rejected, ")

    status, lines, err = await run_chat(url, message)
    assert status == ExitCode.NO_INPUT
    assert err == [
        "loopwire: save_note needs your approval but there is no stdin; declining it"
    ]
    assert (
        "OK — I didn't save the note “I parked on level 3”, since you declined."
        in "\n".join(lines)
    )


async def test_a_request_in_several_parts_and_a_budget(
    start_server: StartServer,
) -> None:
    """A two-part request takes two steps; with `--max-steps 1` it exits `MAX_STEPS`."""
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    message = "convert 10 miles to km and 5 kg to lb"
    status, lines, _ = await run_chat(url, message)
    assert status == ExitCode.FINISHED
    assert [line for line in lines if line.startswith("— step")] == [
        "— step 1 / 10",
        "— step 2 / 10",
    ]
    at = lines.index("assistant: 10 miles is **16.0934 km**")
    assert lines[at + 1 : at + 3] == ["", "5 kg is **11.0231 lb**"]

    status, lines, err = await run_chat(url, message, max_steps=1)
    assert status == ExitCode.MAX_STEPS
    assert err == ["loopwire: the run ran out of steps"]
    assert "  (max steps reached)" in lines
    assert lines[-2].startswith("(done: max_steps, 1 step(s), ")

    status, lines, err = await run_chat(url, message, budget_tokens=1_000)
    assert status == ExitCode.MAX_STEPS
    assert err == ["loopwire: the run used up its budget"]
    assert "  (token budget used up)" in lines
    assert lines[-2].startswith("(done: budget, 1 step(s), ")


async def test_an_error_frame_ends_the_command(start_server: StartServer) -> None:
    """An error frame refusing the request exits with `USAGE`, printing only
    its message."""
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    status, lines, err = await run_chat(url, "hi", strategy="nope")
    assert (status, lines) == (ExitCode.USAGE, [])  # refused as asked: a bad argument
    assert len(err) == 1 and err[0].startswith(
        "loopwire: invalid_message: unknown loop_strategy 'nope'"
    )
    for message, extra in [("", {}), ("hi", {"max_steps": 0})]:
        status, lines, err = await run_chat(url, message, **extra)
        assert (status, lines) == (ExitCode.USAGE, [])
        assert len(err) == 1 and err[0].startswith(
            "loopwire: invalid_message: invalid chat message: "
        )


async def test_session_continues_a_conversation_and_conversations_lists_it(
    start_server: StartServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--session` continues without replay, unknown ids fail, and listing shows it."""
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    status, first, _ = await run_chat(url, "what is 3*7?")
    assert status == ExitCode.FINISHED
    session = re.findall(r"conversation ([0-9a-f]{32})", first[-1])[0]

    status, again, _ = await run_chat(url, "and 2+2?", session=session)
    assert status == ExitCode.FINISHED
    assert again[0] == "— step 1 / 10"  # nothing of the first run replayed
    assert again[-1] == f"(conversation {session}: --session to continue)"
    history = harness.service.sessions[session].history
    assert [m.content for m in history if m.role == "user"] == [
        "what is 3*7?",
        "and 2+2?",
    ]

    status, lines, err = await run_chat(url, "hi", session="f" * 32)
    assert (status, lines) == (ExitCode.ERROR, [])
    assert err == [f"loopwire: no conversation {'f' * 32} on this server"]

    await harness.service.flush_all()
    base = harness.server.url("/")
    listing = Namespace(url=base, limit=5, token=None)
    assert await asyncio.to_thread(conversations_command, listing) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{session}  ") and line.endswith("  what is 3*7?")


def test_every_completion_reason_has_its_exit_status() -> None:
    """Each completion reason has its exit status; error and interrupted share 1."""
    assert [
        for_reason(r)
        for r in (
            "finished",
            "stopped",
            "max_steps",
            "rejected",
            "timeout",
            "error",
            "interrupted",
        )
    ] == [0, 3, 4, 5, 6, 1, 1]


def test_a_bad_setting_is_one_line_naming_it() -> None:
    """Invalid settings are reported in one line naming each variable and its value."""
    with pytest.raises(ValidationError) as bad:
        make_settings(port="abc", agent_max_steps_cap="x")
    assert settings_problem(bad.value) == (
        "invalid setting LOOPWIRE_PORT='abc': Input should be a valid integer, "
        "unable to parse string as an integer; LOOPWIRE_AGENT_MAX_STEPS_CAP='x': "
        "Input should be a valid integer, unable to parse string as an integer"
    )
    with pytest.raises(ValidationError) as across:
        make_settings(agent_max_steps=9, agent_max_steps_cap=5)
    assert settings_problem(across.value) == (
        "invalid setting LOOPWIRE_AGENT_MAX_STEPS (9) exceeds "
        "LOOPWIRE_AGENT_MAX_STEPS_CAP (5)"
    )


def test_the_url_comes_from_host_and_port() -> None:
    """The client URL uses the port and maps wildcard hosts to a loopback address."""
    assert server_url(make_settings(port=9001), "ws", "/ws") == "ws://127.0.0.1:9001/ws"
    anywhere = make_settings(host="0.0.0.0", port=9002)
    assert server_url(anywhere, "ws", "/ws") == "ws://127.0.0.1:9002/ws"
    assert server_url(make_settings(host="::"), "http") == "http://[::1]:8000"


async def test_a_call_in_doubt_is_asked_about_as_one_that_may_have_run() -> None:
    """An in-doubt approval is shown as may-have-run and asked as a rerun."""
    request = ToolApprovalRequest(
        tool_call_id="call_1",
        tool_name="save_note",
        arguments={"text": "milk"},
        description="save_note was running when the server running it stopped.",
        step=1,
        in_doubt=True,
    )
    assert describe(request) == (
        "  ! save_note may already have run: "
        "save_note was running when the server running it stopped."
    )
    out, err = io.StringIO(), io.StringIO()
    answers = Answers(Terminal(out, err, json_lines=False), None, approve="always")
    assert await answers.approval(request) == Decision(True)  # never remembered
    assert out.getvalue().splitlines() == ["run save_note again? always"]


def saving(text: str, *after: object) -> list[object]:
    """A react step that saves `text` (a tool that asks first), then `after`."""
    return [reason("save it"), calls(("save", {"text": text})), *after]


def done(final: str = "Saved.") -> str:
    return observe(should_continue=False, final=final)


async def test_edit_the_arguments_until_they_fit(start_server: StartServer) -> None:
    """`e` asks for the arguments as JSON: not JSON is asked again, the
    server's refusal is shown and the approval asked again, and what fits
    runs."""
    saver = Saver()
    harness = await start_server(
        ScriptedLLM(*saving("milk", done())), approval_registry(saver)
    )
    url = harness.server.url("/ws", "ws")
    stdin_text = 'e\nnot json\n{"text": 5}\nedit {"text": "oat milk"}\n'
    with piped(stdin_text) as stdin:
        status, lines, err = await run_chat(url, "remember milk", stdin)
    assert (status, err) == (ExitCode.FINISHED, [])
    asked = f'approve save({{"text": "milk"}})? {CHOICES} '
    were = 'arguments (JSON; were {"text": "milk"})> '
    assert lines[3:11] == [
        "  ! save needs your approval: Save a note (asks the user first).",
        asked + "e",
        were + "not json",
        "not JSON (Expecting value: line 1 column 1 (char 0)); again",
        were + '{"text": 5}',
        "  (note: invalid arguments for save: text: Input should be a valid "
        "string; the approval still waits (send it again with arguments that "
        "fit, or as they were))",
        asked + 'edit {"text": "oat milk"}',
        '  ✓ save approved with {"text": "oat milk"}',
    ]
    assert saver.saved == ["oat milk"]


async def test_always_allow_then_list_and_revoke_the_grant(
    start_server: StartServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """`a` approves and allows the tool in the conversation: its next call
    runs unasked; `grants` lists the grant and `grants revoke` takes it back."""
    saver = Saver()
    llm = ScriptedLLM(
        *saving("milk", observe("Saved milk; eggs next.")), *saving("eggs", done())
    )
    harness = await start_server(llm, approval_registry(saver))
    url = harness.server.url("/ws", "ws")
    with piped("a\n") as stdin:
        status, lines, err = await run_chat(url, "remember milk and eggs", stdin)
    assert (status, err) == (ExitCode.FINISHED, [])
    assert lines[4:12] == [
        f'approve save({{"text": "milk"}})? {CHOICES} a',
        "  ✓ save allowed from now on in this conversation",
        '  ← save: {"saved": "milk"}',
        "  [observe] The result is in.",
        "— step 2 / 10",
        "  [reason] I will work it out.",
        '  → save({"text": "eggs"})',
        '  ← save: {"saved": "eggs"}',
    ]
    assert saver.saved == ["milk", "eggs"]
    session = re.findall(r"conversation ([0-9a-f]{32})", lines[-1])[0]

    base = harness.server.url("/")
    listing = Namespace(action="list", grant_id=None, url=base, token=None)
    assert await asyncio.to_thread(grants_command, listing) == 0
    (line,) = capsys.readouterr().out.splitlines()
    grant_id, _, tool, where = line.split("  ")
    assert (tool, where) == ("save", f"conversation {session}")
    revoke = Namespace(action="revoke", grant_id=grant_id, url=base, token=None)
    assert await asyncio.to_thread(grants_command, revoke) == 0
    assert capsys.readouterr().out == f"revoked: {line}\n"
    assert await asyncio.to_thread(grants_command, revoke) == ExitCode.ERROR
    assert capsys.readouterr().err.startswith(
        f"loopwire: {base}api/tool-grants/{grant_id}: 404 "
    )
    assert await asyncio.to_thread(grants_command, listing) == 0
    assert capsys.readouterr().out == "(no tools allowed without asking)\n"


async def test_a_no_with_its_reason_and_always_for_me_from_the_flag(
    start_server: StartServer,
) -> None:
    """`n REASON` declines and the model is told the reason; `--approve
    always-for-me` approves and allows the tool in all the user's
    conversations."""
    saver = Saver()
    llm = ScriptedLLM(
        *saving("milk"),
        "Not saved.",
        *saving("eggs", done()),
        *saving("bread", done()),
    )
    harness = await start_server(llm, approval_registry(saver))
    url = harness.server.url("/ws", "ws")
    with piped("n not today\n") as stdin:
        status, lines, err = await run_chat(url, "remember milk", stdin)
    assert status == ExitCode.REJECTED
    assert lines[4:6] == [
        f'approve save({{"text": "milk"}})? {CHOICES} n not today',
        "  ✗ save [rejected]: the user declined to run save (reason: not today)",
    ]
    (result,) = [m for m in llm.requests[-1].messages if m.role == "tool"]
    assert result.content == (
        "Error (rejected): the user declined to run save (reason: not today)"
    )

    status, lines, err = await run_chat(url, "remember eggs", approve="always-for-me")
    assert (status, err) == (ExitCode.FINISHED, [])
    assert lines[4:6] == [
        "approve save? always-for-me",
        "  ✓ save allowed from now on in all your conversations",
    ]
    status, lines, err = await run_chat(url, "remember bread", no_input=True)
    assert (status, err) == (ExitCode.FINISHED, [])
    assert "  ✓ save" not in lines and saver.saved == ["eggs", "bread"]
