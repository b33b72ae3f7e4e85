"""The offline model's seam to tools: what a tool teaches it.

The embedded offline model (`offline.py`) knows no tool. A tool may carry an
*offline skill* (`Tool.offline`): given a user's request, the skill says
whether its tool is what the request needs — and with which arguments — or
which question to ask first; given the user's answer it completes the
arguments; given the tool's result it words the answer. The model reads the
skills of the tools it is given (`SkillBook`, which `ToolRegistry` is) on
every request, so a tool registered with a skill teaches the model by itself.

A skill is plain rules over text, like the model: deterministic, no network.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Call:
    """Call the skill's tool with `arguments`, in order to `goal`."""

    arguments: dict[str, Any]
    goal: str
    """What the call achieves, said after "to": "calculate 2+2", "list your
    notes". It words the plan, and honest failures ("I couldn't …")."""


@dataclass(frozen=True, slots=True)
class Question:
    """The request lacks something only the user can say: ask first."""

    question: str
    missing: str
    """What is missing, said after "know" / "asked": "which unit to convert
    10 miles to"."""
    goal: str
    """What the answer is for, said after "to": "convert 10 miles"."""
    suggestions: tuple[str, ...] = ()
    """Likely answers, offered as buttons (the `answer_schema`'s `examples`):
    any other text is still taken."""

    def arguments(self) -> dict[str, object]:
        """`request_input`'s arguments for this question."""
        if not self.suggestions:
            return {"question": self.question}
        schema = {"type": "string", "examples": list(self.suggestions)}
        return {"question": self.question, "answer_schema": schema}


@dataclass(frozen=True, slots=True)
class Reply:
    """Words for the user, and what the observe phase says it learned."""

    text: str
    observation: str


Need = Call | Question


@dataclass(frozen=True, slots=True)
class Capability:
    """One line of what the model can do, for its greeting and its help."""

    summary: str
    """After "I can": "do arithmetic"."""
    examples: tuple[str, ...]
    """Requests to try: "what is 2+2*3"."""
    qualifier: str = ""
    """Said after the summary in the help list: ", with tools on"."""
    in_greeting: bool = True


class OfflineSkill(Protocol):
    """What one tool teaches the offline model."""

    @property
    def priority(self) -> int:
        """Lower first when several skills claim a request ("remember that 2+2
        is 4" is a note, not a sum). Skills at `WEAK` or above yield to the
        answer of a question the model asked in words (plain chat)."""
        ...

    @property
    def capabilities(self) -> Sequence[Capability]:
        """Lines for the model's greeting and help (none: it stays quiet)."""
        ...

    def match(self, text: str) -> Need | None:
        """What `text` needs of this skill's tool, or None if not this tool."""
        ...

    def complete(self, text: str, answer: str) -> Need | Reply | None:
        """The user's `answer` to the question `match(text)` asked: the call
        it completes, a `Reply` saying why it cannot be used, or None when it
        is no answer at all (a new request, say)."""
        ...

    def reply(self, call: Call, result: Any) -> Reply | None:
        """The answer from the tool's (successful) JSON `result`; None when the
        result is not what the skill can read."""
        ...

    def local(self, call: Call) -> str | None:
        """The answer without the tool (plain chat), if the skill can work it
        out itself; else None."""
        ...


WEAK = 35
"""Priority from which a skill yields to the answer of a pending question."""


@dataclass(frozen=True, slots=True)
class Skill:
    """A skill and the tool it is for."""

    tool: str
    skill: OfflineSkill


class SkillBook(Protocol):
    """Where the offline model finds its skills (the tool registry)."""

    def offline_skills(self) -> Sequence[Skill]: ...


@dataclass(frozen=True, slots=True)
class NoSkills:
    """A book with no skills: the model only talks."""

    skills: tuple[Skill, ...] = field(default=())

    def offline_skills(self) -> Sequence[Skill]:
        return self.skills


class BaseSkill:
    """Defaults for a skill: claims nothing, completes nothing, reads nothing."""

    priority = 50
    capabilities: tuple[Capability, ...] = ()

    def match(self, text: str) -> Need | None:
        return None

    def complete(self, text: str, answer: str) -> Need | Reply | None:
        return None

    def reply(self, call: Call, result: Any) -> Reply | None:
        return None

    def local(self, call: Call) -> str | None:
        return None
