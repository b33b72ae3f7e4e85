"""`Terminal`: where `loopwire chat` shows a run, in one of three ways.

- `json` (`--json`): exactly one frame per line on stdout, as JSON; every
  note, prompt and problem goes to stderr.
- `rich` (stdout is a terminal): a line per phase, a spinner while a phase
  runs, the answer rendered as Markdown.
- `plain` (stdout is a file or a pipe): the same lines, streamed tokens as
  they come, the answer as its Markdown source.
"""

from __future__ import annotations

from typing import Literal, TextIO

from rich.console import Console
from rich.markdown import Markdown
from rich.status import Status
from rich.text import Text

from backend.protocol import ChatResponse, SessionReady, TokenStream
from loopwire.connection import Event
from loopwire.transcript import activity, describe

Mode = Literal["json", "rich", "plain"]


class Terminal:
    def __init__(self, out: TextIO, err: TextIO, *, json_lines: bool) -> None:
        self.out = out
        self.err = err
        self.mode: Mode = "json" if json_lines else "rich" if _tty(out) else "plain"
        self._console = Console(file=out, highlight=False, markup=False)
        self._status: Status | None = None
        self._streamed = False
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
            self.out.write("\n" if event.is_last else event.token)
            self.out.flush()

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


def _tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
