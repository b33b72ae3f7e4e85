"""`loopwire chat` shows a reasoning model's thinking apart from the answer:
one marked line per call by default, in full with `--thinking`, dim on a
terminal, and every frame as it is with `--json`."""

from __future__ import annotations

import argparse
import io
import json
import re

import pytest

from backend.cli import _chat
from backend.llm.base import Completion
from loopwire.exit_codes import ExitCode
from loopwire.terminal import Terminal
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry

REASON_THINKING = (
    "The user wants 2+3.\n\nI should not guess: the add tool is <b>exact</b>."
)
ACT_THINKING = "Call add with 2+3."
CHAT_THINKING = "  A greeting.   Answer   briefly, in kind.  "


def _args(url: str, message: str, **extra: object) -> argparse.Namespace:
    values: dict[str, object] = {
        "url": url,
        "message": message,
        "agent": True,
        "strategy": None,
        "max_steps": 3,
        "json": False,
        "thinking": False,
        "token": None,
        "answer": None,
        "approve": None,
        "no_input": True,
        "session": None,
        "system": None,
    }
    values.update(extra)
    return argparse.Namespace(**values)


async def run_chat(url: str, message: str, **extra: object) -> tuple[int, list[str]]:
    """Exit status and stdout lines of one `loopwire chat` (stderr must stay empty)."""
    out, err = io.StringIO(), io.StringIO()
    status = await _chat(_args(url, message, **extra), out, err, None)
    assert err.getvalue() == ""
    return status, out.getvalue().splitlines()


def thinking_agent() -> ScriptedLLM:
    """A react run whose reason and act calls come with thinking."""
    return ScriptedLLM(
        Completion(
            content=reason("Add 2 and 3.", prose="I add them."),
            reasoning=REASON_THINKING,
        ),
        calls(("add", {"expression": "2+3"})).model_copy(
            update={"reasoning": ACT_THINKING}
        ),
        observe("It is 5.", prose="Done.", should_continue=False, final="2 + 3 = 5"),
    )


def without_ids(lines: list[str]) -> list[str]:
    """The lines with the run's duration and conversation id made constant."""
    lines = [re.sub(r", \d+ ms\)$", ", N ms)", line) for line in lines]
    return [re.sub(r"conversation [0-9a-f]{32}", "conversation ID", x) for x in lines]


async def test_agent_thinking_is_one_folded_line_per_call(
    start_server: StartServer,
) -> None:
    """By default each call's thinking is one `[thinking]` line before what it led to."""
    harness = await start_server(thinking_agent(), test_registry())
    status, lines = await run_chat(harness.server.url("/ws", "ws"), "What is 2+3?")
    assert status == ExitCode.FINISHED
    assert without_ids(lines) == [
        "— step 1 / 3",
        "  [thinking] 70 chars: The user wants 2+3. I should not guess: the add tool is <b>…",
        "  [reason] I add them.",
        "  [thinking] 18 chars: Call add with 2+3.",
        '  → add({"expression": "2+3"})',
        '  ← add: {"expression": "2+3", "result": 5.0}',
        "  [observe] Done.",
        "",
        "assistant: 2 + 3 = 5",
        "(done: finished, 1 step(s), N ms)",
        "(conversation ID: --session to continue)",
    ]


async def test_thinking_flag_prints_it_in_full(start_server: StartServer) -> None:
    """`--thinking` prints the whole thinking, indented under its line, as text."""
    harness = await start_server(thinking_agent(), test_registry())
    url = harness.server.url("/ws", "ws")
    status, lines = await run_chat(url, "What is 2+3?", thinking=True)
    assert status == ExitCode.FINISHED
    assert lines[1:7] == [
        "  [thinking] 70 chars:",
        "    The user wants 2+3.",
        "",
        "    I should not guess: the add tool is <b>exact</b>.",
        "  [reason] I add them.",
        "  [thinking] 18 chars:",
    ]
    assert lines[7] == "    Call add with 2+3."


async def test_plain_chat_thinking_stays_out_of_the_streamed_answer(
    start_server: StartServer,
) -> None:
    """In a plain chat the streamed answer is only the answer; the thinking is its own line."""
    llm = ScriptedLLM(Completion(content="Hello there!", reasoning=CHAT_THINKING))
    harness = await start_server(llm)
    url = harness.server.url("/ws", "ws")
    status, lines = await run_chat(url, "hi", agent=False)
    assert status == ExitCode.FINISHED
    assert without_ids(lines) == [
        "",
        "assistant: Hello there!",
        "  [thinking] 40 chars: A greeting. Answer briefly, in kind.",
        "(conversation ID: --session to continue)",
    ]


async def test_json_carries_the_thinking_frame(start_server: StartServer) -> None:
    """`--json` prints the `thinking` frame as it came, before `chat_response`."""
    llm = ScriptedLLM(Completion(content="Hello there!", reasoning=CHAT_THINKING))
    harness = await start_server(llm)
    url = harness.server.url("/ws", "ws")
    status, lines = await run_chat(url, "hi", agent=False, json=True)
    assert status == ExitCode.FINISHED
    frames = [json.loads(line) for line in lines]
    [thinking] = [f for f in frames if f["type"] == "thinking"]
    assert (thinking["step"], thinking["phase"]) == (0, "chat")
    assert thinking["content"] == CHAT_THINKING
    kinds = [f["type"] for f in frames]
    assert kinds.index("thinking") < kinds.index("chat_response")
    [response] = [f for f in frames if f["type"] == "chat_response"]
    assert response["message"] == "Hello there!"


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_thinking_is_dim_and_italic(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the thinking line is written dim and italic (SGR 2;3)."""
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    out = FakeTty()
    terminal = Terminal(out, io.StringIO(), json_lines=False)
    assert terminal.mode == "rich"
    terminal.thinking("Short.")
    assert out.getvalue() == "\x1b[2;3m  [thinking] 6 chars: Short.\x1b[0m\n"
