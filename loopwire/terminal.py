"""`Terminal`: where `loopwire chat` shows a run, in one of three ways.

- `json` (`--json`): exactly one frame per line on stdout, as JSON; every
  note, prompt and problem goes to stderr.
- `rich` (stdout is a terminal): a line per phase, a spinner while a phase
  runs, the answer rendered as Markdown.
- `plain` (stdout is a file or a pipe): the same lines, streamed tokens as
  they come, the answer as its Markdown source.

A reasoning model's thinking (`thinking`) is a line of its own, marked
`[thinking]` (and dim on a terminal), never part of the answer: folded to its
length and first words by default, since it can run to pages and the user
asked for the answer; in full, indented under that line, with `--thinking`.
"""

from __future__ import annotations

from typing import Literal, TextIO

from rich.console import Console
from rich.markdown import Markdown
from rich.status import Status
from rich.text import Text

from backend.protocol import ChatResponse, SessionReady, Thinking, TokenStream
from loopwire.connection import Event
from loopwire.transcript import activity, describe

Mode = Literal["json", "rich", "plain"]

GIST_CHARS = 60
"""The most of a thinking's start its folded line shows."""


class Terminal:
    def __init__(
        self, out: TextIO, err: TextIO, *, json_lines: bool, thinking: bool = False
    ) -> None:
        """`thinking`: show a reasoning model's thinking in full, not folded."""
        self.out = out
        self.err = err
        self.full_thinking = thinking
        self.mode: Mode = "json" if json_lines else "rich" if _tty(out) else "plain"
        self._console = Console(file=out, highlight=False, markup=False)
        self._status: Status | None = None
        self._streamed = False
        self._midline = False
        self._prompting = False

    @property
    def notes(self) -> TextIO:
        """Where notes and prompts go: stderr when stdout carries frames."""
        return self.err if self.mode == "json" else self.out

    def ready(self, frame: SessionReady) -> None:
        if self.mode == "json":
            self._write(frame.model_dump_json())

    def show(self, event: Event) -> None:
        """One frame of the run."""
        if self.mode == "json":
            self._write(event.model_dump_json())
            return
        if isinstance(event, TokenStream):
            self._token(event)
        elif isinstance(event, Thinking):
            self.thinking(event.content)
            return  # the run is still busy with what it was busy with
        elif isinstance(event, ChatResponse):
            if not (self._streamed and self.mode == "plain"):
                self.answer(event.message)
        elif line := describe(event):
            self.line(line)
        self._spin(activity(event))

    def _token(self, event: TokenStream) -> None:
        self._streamed = True
        if self.mode == "plain":
            if event.is_first:
                self.out.write("\nassistant: ")
            if not event.is_last:
                self.out.write(event.token)
            elif self._midline:  # else a thinking line ended it already
                self.out.write("\n")
            self._midline = not event.is_last
            self.out.flush()

    def thinking(self, content: str) -> None:
        """A reasoning model's thinking: a marked line apart from the answer."""
        if self._midline:  # never inside a streamed answer's line
            self._write("")
            self._midline = False
        lines = [thinking_line(content, full=self.full_thinking)]
        if self.full_thinking:
            lines += [f"    {line}".rstrip() for line in content.strip().splitlines()]
        for line in lines:
            if self.mode == "rich":
                self._console.print(Text(line, style="dim italic"))
            elif self.mode == "plain":
                self._write(line)

    def answer(self, message: str) -> None:
        """The assistant's answer: Markdown on a terminal, its source elsewhere."""
        if self.mode == "rich":
            self._console.print()
            self._console.print(Text("assistant:", style="bold"))
            self._console.print(Markdown(message))
        else:
            self._write(f"\nassistant: {message}")

    def line(self, text: str) -> None:
        """A line of the transcript (stdout; nothing in JSON mode)."""
        if self.mode == "rich":
            self._console.print(Text(text))
        elif self.mode == "plain":
            self._write(text)

    def note(self, text: str) -> None:
        """A remark of the CLI's own, e.g. an answer taken from stdin."""
        self.pause()
        self.notes.write(text + "\n")
        self.notes.flush()

    def problem(self, text: str) -> None:
        """Why the command ends badly: always stderr."""
        self.pause()
        self.end_prompt()
        self.err.write(text + "\n")
        self.err.flush()

    def prompt(self, text: str) -> None:
        """Ask the person at the terminal (stderr: stdout may be a pipe)."""
        self.pause()
        self.err.write(text)
        self.err.flush()
        self._prompting = True

    def end_prompt(self, answered: bool = False) -> None:
        """The prompt's line is over: answered (the newline was typed), or
        not (one is written, so what follows starts on a line of its own)."""
        if self._prompting and not answered:
            self.err.write("\n")
            self.err.flush()
        self._prompting = False

    def pause(self) -> None:
        """Stop the spinner (before a prompt, a problem, or the end)."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def close(self) -> None:
        self.pause()

    def _spin(self, label: str | None) -> None:
        if self.mode != "rich" or label is None:
            self.pause()
            return
        if self._status is None:
            self._status = self._console.status(label)
            self._status.start()
        else:
            self._status.update(label)

    def _write(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()


def thinking_line(content: str, *, full: bool) -> str:
    """`  [thinking] 412 chars: I need the sum first, so…` (folded), or
    `  [thinking] 412 chars:` (the text follows, indented)."""
    text = content.strip()
    head = f"  [thinking] {len(text):,} chars"
    if full:
        return head + ":"
    gist = " ".join(text.split())
    if len(gist) > GIST_CHARS:
        gist = gist[: GIST_CHARS - 1].rstrip() + "…"
    return f"{head}: {gist}"


def _tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
