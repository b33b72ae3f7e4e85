"""`loopwire chat` against a live server on the offline model."""

from __future__ import annotations

import argparse
import asyncio
import io
import re
from argparse import Namespace

import pytest

from backend.cli import _chat, conversations_command
from tests.conftest import StartServer


def _args(url: str, message: str, **extra: object) -> argparse.Namespace:
    values: dict[str, object] = {
        "url": url,
        "message": message,
        "agent": True,
        "max_steps": None,
        "json": False,
        "token": None,
        "answer": None,
        "approve": None,
        "session": None,
    }
    values.update(extra)
    return argparse.Namespace(**values)


async def test_chat_answers_questions_from_arguments(start_server: StartServer) -> None:
    harness = await start_server(llm_provider="offline")
    out = io.StringIO()
    status = await _chat(
        _args(harness.server.url("/ws", "ws"), "convert 10 miles", answer=["km"]), out
    )
    lines = out.getvalue().splitlines()
    assert status == 0
    assert lines[:3] == [
        "— step 1 / 10",
        "  [reason] The request doesn't say which unit to convert 10 miles to, so I'll ask the user.",
        "  ? What unit should I convert 10 miles to?",
    ]
    assert "your answer> km" in lines
    assert (
        '  → convert_units({"value": 10, "from_unit": "miles", "to_unit": "km"})'
        in lines
    )
    assert "assistant: 10 miles is **16.0934 km**" in lines
    assert lines[-2].startswith("(done: finished, 2 step(s), ")
    assert re.fullmatch(
        r"\(conversation [0-9a-f]{32}: --session to continue\)", lines[-1]
    )


async def test_chat_without_an_answer_stops_the_run(start_server: StartServer) -> None:
    harness = await start_server(llm_provider="offline")
    out = io.StringIO()
    status = await _chat(_args(harness.server.url("/ws", "ws"), "convert 5 lb"), out)
    lines = out.getvalue().splitlines()
    assert status == 0
    assert lines[-4:-2] == [
        "(no answer to give: pass --answer or use a terminal; stopping)",
        "  (stopped)",
    ]
    assert lines[-2].startswith("(done: stopped, 1 step(s), ")


async def test_plain_chat_prints_the_streamed_answer_once(
    start_server: StartServer,
) -> None:
    harness = await start_server(llm_provider="offline")
    out = io.StringIO()
    await _chat(_args(harness.server.url("/ws", "ws"), "what is 6*7", agent=False), out)
    text, _, footer = out.getvalue().partition("(conversation ")
    assert text.count("42") == 1 and text.endswith("\n")
    assert footer.endswith(": --session to continue)\n")


async def test_chat_answers_approvals_from_arguments(start_server: StartServer) -> None:
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    out = io.StringIO()
    await _chat(
        _args(url, "remember that the wifi password is hunter2", approve="yes"), out
    )
    lines = out.getvalue().splitlines()
    assert (
        "  ! save_note needs your approval: Save a note the user asked you to remember. Asks the user for approval."
        in lines
    )
    assert "approve save_note? yes" in lines
    assert "assistant: Saved note #1: “the wifi password is hunter2”." in lines

    declined = io.StringIO()
    await _chat(_args(url, "remember that I parked on level 3"), declined)
    text = declined.getvalue()
    assert (
        "(no one to approve: pass --approve yes|no or use a terminal; declining)"
        in text
    )
    assert (
        "OK — I didn't save the note “I parked on level 3”, since you declined." in text
    )


async def test_chat_answers_every_part_of_a_request(start_server: StartServer) -> None:
    harness = await start_server(llm_provider="offline")
    out = io.StringIO()
    url = harness.server.url("/ws", "ws")
    status = await _chat(_args(url, "convert 10 miles to km and 5 kg to lb"), out)
    lines = out.getvalue().splitlines()
    assert status == 0
    assert [line for line in lines if line.startswith("— step")] == [
        "— step 1 / 10",
        "— step 2 / 10",
    ]
    at = lines.index("assistant: 10 miles is **16.0934 km**")
    assert lines[at + 1 : at + 3] == ["", "5 kg is **11.0231 lb**"]
    assert lines[-2].startswith("(done: finished, 2 step(s), ")


async def test_session_continues_a_conversation_and_conversations_lists_it(
    start_server: StartServer, capsys: pytest.CaptureFixture[str]
) -> None:
    harness = await start_server(llm_provider="offline")
    url = harness.server.url("/ws", "ws")
    first = io.StringIO()
    assert await _chat(_args(url, "what is 3*7?"), first) == 0
    session = re.findall(r"conversation ([0-9a-f]{32})", first.getvalue())[0]

    again = io.StringIO()
    assert await _chat(_args(url, "and 2+2?", session=session), again) == 0
    lines = again.getvalue().splitlines()
    assert lines[0] == "— step 1 / 10"  # nothing of the first run replayed
    assert lines[-1] == f"(conversation {session}: --session to continue)"
    history = harness.service.sessions[session].history
    assert [m.content for m in history if m.role == "user"] == [
        "what is 3*7?",
        "and 2+2?",
    ]

    unknown = io.StringIO()
    assert await _chat(_args(url, "hi", session="f" * 32), unknown) == 1
    assert (
        unknown.getvalue() == f"loopwire: no conversation {'f' * 32} on this server\n"
    )

    await harness.service.flush_all()
    base = harness.server.url("/")
    listing = Namespace(url=base, limit=5, token=None)
    assert await asyncio.to_thread(conversations_command, listing) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{session}  ") and line.endswith("  what is 3*7?")
