"""Where `loopwire chat` gets answers to the agent's questions and approvals.

In this order: `--answer` values (questions, one each) and `--approve
yes|no|always|always-for-me` (every approval); then the person at the
terminal when stdin is one; then stdin's lines when it is a pipe or a file,
one line per question or approval. Nothing with `--no-input`, nor once stdin
has run out: then the caller says so and ends the run (see
`ExitCode.NO_INPUT`).

A question's line is the answer, or `/decline` (no answer: the model hears
so; a tool that asked is told `decline`) or `/dismiss` (a tool that asked
is told `cancel`). For a question with a page to open (`url`), any other
line (an empty one: Enter) says it is done there.

An approval's line is a choice, then what goes with it: `y` (yes), `n
REASON` (no; anything not a choice is a no too), `e {JSON}` (yes, with
these arguments: the JSON on the next line when not on this one, or in
`$EDITOR` on a terminal), `a` (yes, and always in this conversation), `m`
(yes, and always for me). On a terminal a "no" asks for its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from backend.protocol import AgentRequestInput, Remember, ToolApprovalRequest
from loopwire.client import Decision, Declined
from loopwire.terminal import Terminal

CHUNK = 65536
FLAG_DECISIONS = {
    "yes": Decision(True),
    "no": Decision(False),
    "always": Decision(True, remember="conversation"),
    "always-for-me": Decision(True, remember="user"),
}
"""`--approve`'s values."""
CHOICES = "[y]es / [N]o / [e]dit / [a]lways here / always for [m]e"
DECLINES = {"/decline": Declined(), "/dismiss": Declined(dismiss=True)}
"""A question's lines that give no answer."""
REMEMBER: dict[str, Remember] = {
    "a": "conversation",
    "always": "conversation",
    "m": "user",
    "me": "user",
}


class StdinLines:
    """Lines of a file descriptor, read on the event loop without a thread
    (a thread blocked in `input()` outlives Ctrl-C): the loop says when a
    pipe or terminal is readable; a regular file is read at once."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self._eof = False

    async def readline(self) -> str | None:
        """The next line without its newline; None at the end."""
        while b"\n" not in self._buffer and not self._eof:
            chunk = await self._read()
            self._eof = not chunk
            self._buffer += chunk
        if not self._buffer:
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace").rstrip("\r")

    async def _read(self) -> bytes:
        try:
            if not stat.S_ISREG(os.fstat(self._fd).st_mode):
                await self._readable()
            return os.read(self._fd, CHUNK)
        except OSError:  # closed, or not readable at all: no more lines
            return b""

    async def _readable(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(self._fd, wake)
        except (OSError, ValueError):
            return  # not pollable (e.g. /dev/null): reading will not block
        try:
            await ready
        finally:
            loop.remove_reader(self._fd)


def _descriptor(stream: TextIO | None) -> int | None:
    if stream is None:
        return None
    with contextlib.suppress(AttributeError, OSError, ValueError):
        return stream.fileno()
    return None


class Answers:
    def __init__(
        self,
        terminal: Terminal,
        stdin: TextIO | None,
        *,
        given: Sequence[str] = (),
        approve: str | None = None,
        no_input: bool = False,
    ) -> None:
        self._terminal = terminal
        self._given = list(given)
        self._approve = approve
        self._no_input = no_input
        fd = _descriptor(stdin)
        self._lines = StdinLines(fd) if fd is not None else None
        self._interactive = fd is not None and os.isatty(fd)
        self._ran_out = False

    @property
    def why_none(self) -> str:
        """Why no answer came (after `answer` or `approval` gave None)."""
        if self._no_input:
            return "--no-input is set"
        return "stdin has no more lines" if self._lines else "there is no stdin"

    async def answer(self, question: AgentRequestInput) -> str | Declined | None:
        """The answer to `question` (`Declined` for `/decline`, `/dismiss`),
        or None when there is none to give."""
        prompt = _question_prompt(question)
        if self._given:
            text: str | None = self._given.pop(0)
            self._terminal.note(f"{prompt}{text}")
        else:
            text = await self._read(prompt)
        if text is None:
            return None
        declined = DECLINES.get(text.strip().lower())
        if declined is not None:
            return declined
        return "" if question.url is not None else text

    async def approval(self, request: ToolApprovalRequest) -> Decision | None:
        """The decision on the call, or None when nobody can make one. A
        call `in_doubt` may have run already: yes runs it again, as it was."""
        name = request.tool_name
        if self._approve is not None:
            asked = f"run {name} again?" if request.in_doubt else f"approve {name}?"
            self._terminal.note(f"{asked} {self._approve}")
            decision = FLAG_DECISIONS[self._approve]
            return Decision(decision.approved) if request.in_doubt else decision
        call = f"{name}({json.dumps(request.arguments, ensure_ascii=False)})"
        if request.in_doubt:
            reply = await self._read(f"run {call} again? [y/N] ")
            return None if reply is None else Decision(_yes(reply))
        reply = await self._read(f"approve {call}? {CHOICES} ")
        if reply is None:
            return None
        choice, _, rest = reply.strip().partition(" ")
        choice = choice.lower()
        if _yes(choice):
            return Decision(True)
        if choice in REMEMBER:
            return Decision(True, remember=REMEMBER[choice])
        if choice in ("e", "edit"):
            return await self._edit(request, rest.strip())
        reason = rest.strip()
        if not reason and self._interactive:
            reason = (await self._read("reason (optional)> ") or "").strip()
        return Decision(False, reason=reason or None)

    async def _edit(self, request: ToolApprovalRequest, text: str) -> Decision | None:
        """Yes with the person's arguments: a JSON object, asked for again
        until it is one (None when stdin runs out first)."""
        while True:
            if not text:
                edited = await self._edited(request.arguments)
                if edited is None:
                    return None
                text = edited
            try:
                arguments = json.loads(text)
            except ValueError as exc:
                self._terminal.note(f"not JSON ({exc}); again")
            else:
                if isinstance(arguments, dict):
                    return Decision(True, arguments=arguments)
                self._terminal.note("the arguments are a JSON object {…}; again")
            text = ""

    async def _edited(self, arguments: dict[str, Any] | str) -> str | None:
        """The arguments as the person edits them: in `$EDITOR` on a
        terminal, else on one line."""
        editor = os.environ.get("EDITOR", "").strip()
        if editor and self._interactive and not self._no_input:
            text = await _in_editor(editor, arguments, self._terminal)
            if text is not None:
                return text
        current = _shown(arguments)
        return await self._read(f"arguments (JSON; were {current})> ")

    async def _read(self, prompt: str) -> str | None:
        if self._no_input or self._lines is None or self._ran_out:
            return None
        if self._interactive:
            self._terminal.prompt(prompt)
        answered = False
        try:
            line = await self._lines.readline()
            answered = line is not None
        finally:  # or withdrawn: answered elsewhere, or the pause ended
            self._terminal.end_prompt(answered)
        if line is None:
            self._ran_out = True
        elif not self._interactive:
            self._terminal.note(prompt + line)  # the transcript shows the answer
        return line


def _question_prompt(question: AgentRequestInput) -> str:
    """What the answer prompt says: how to decline when a tool asks."""
    if question.url is not None:
        return "press Enter once done there (or /decline, /dismiss)> "
    if question.asked_by is not None:
        return "your answer (or /decline, /dismiss)> "
    return "your answer> "


def _yes(reply: str) -> bool:
    return reply.strip().lower() in ("y", "yes")


def _shown(arguments: dict[str, Any] | str, indent: int | None = None) -> str:
    """The model's arguments as JSON (as it wrote them, when they are not)."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, indent=indent, ensure_ascii=False)


async def _in_editor(
    editor: str, arguments: dict[str, Any] | str, terminal: Terminal
) -> str | None:
    """`arguments` as JSON in a file `editor` opens; what it holds once the
    editor quits (None if the editor failed: ask on a line instead)."""
    terminal.pause()
    with tempfile.TemporaryDirectory(prefix="loopwire-") as folder:
        path = Path(folder) / "arguments.json"
        path.write_text(_shown(arguments, indent=2) + "\n")
        try:
            process = await asyncio.create_subprocess_exec(
                *shlex.split(editor), str(path)
            )
            status = await process.wait()
        except (OSError, ValueError) as exc:
            terminal.note(f"cannot run $EDITOR ({editor}): {exc}")
            return None
        if status != 0:
            terminal.note(f"$EDITOR ({editor}) exited with status {status}")
            return None
        return path.read_text(encoding="utf-8", errors="replace")
