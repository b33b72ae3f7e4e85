"""Where `loopwire chat` gets answers to the agent's questions and approvals.

In this order: `--answer` values (questions, one each) and `--approve
yes|no` (every approval); then the person at the terminal when stdin is one;
then stdin's lines when it is a pipe or a file, one line per question or
approval. Nothing with `--no-input`, nor once stdin has run out: then the
caller says so and ends the run (see `ExitCode.NO_INPUT`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
from collections.abc import Sequence
from typing import TextIO

from backend.protocol import ToolApprovalRequest
from loopwire.terminal import Terminal

CHUNK = 65536


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

    async def answer(self, question: str) -> str | None:
        """The answer to `question`, or None when there is none to give."""
        if self._given:
            text = self._given.pop(0)
            self._terminal.note(f"your answer> {text}")
            return text
        return await self._read("your answer> ")

    async def approval(self, request: ToolApprovalRequest) -> bool | None:
        """Whether to run the tool, or None when nobody can say. A call
        `in_doubt` may have run already: yes runs it again."""
        name = request.tool_name
        if self._approve is not None:
            asked = f"run {name} again?" if request.in_doubt else f"approve {name}?"
            self._terminal.note(f"{asked} {self._approve}")
            return self._approve == "yes"
        call = f"{name}({json.dumps(request.arguments, ensure_ascii=False)})"
        asked = f"run {call} again?" if request.in_doubt else f"approve {call}?"
        reply = await self._read(f"{asked} [y/N] ")
        if reply is None:
            return None
        return reply.strip().lower() in ("y", "yes")

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
