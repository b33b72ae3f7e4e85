"""How the offline model works out a request, part by part.

`plan(conversation, skills, words)` asks the skills what the request needs —
one part per piece of "convert 10 miles to km and 5 kg to lb" when every
piece is something a skill does, else the request whole — then walks this
run's tool results through the parts in order: each part consumes its
question's answer and its tool's result. What comes out is the parts done
(their answers, or honest failures) and the parts still to do (the next
first). An answer in words to a question asked in words (plain chat, or
`llm_only`) completes the request it answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from backend.llm.offline_run import REQUEST_INPUT, Conversation, ToolResult
from backend.llm.offline_skill import (
    WEAK,
    Call,
    Need,
    OfflineSkill,
    Question,
    Reply,
    Skill,
)
from backend.llm.offline_words import Words, after_greeting

_SEPARATOR = re.compile(
    r"\s*(?:;|,?\s+and\s+then\s+|,?\s+and\s+also\s+|,?\s+and\s+|,?\s+then\s+|\s+&\s+)\s*",
    re.IGNORECASE,
)

Kind = Literal["answer", "failure", "declined"]


@dataclass(frozen=True, slots=True)
class Done:
    """A part answered, or an honest account of why it could not be."""

    text: str
    observation: str
    kind: Kind


@dataclass(frozen=True, slots=True)
class Todo:
    """A part still to do: its text, the skill it needs, and what it needs next."""

    text: str
    tool: str
    skill: OfflineSkill
    need: Need


@dataclass(frozen=True, slots=True)
class Plan:
    done: tuple[Done, ...] = ()
    todo: tuple[Todo, ...] = ()
    reply: str | None = None
    """No skill is needed: small talk, or the introduction."""
    answered: str | None = None
    """The request is the user's answer to a question asked in words."""

    @property
    def next(self) -> Todo | None:
        return self.todo[0] if self.todo else None

    def answer(self) -> Done | None:
        """Every part's outcome as one answer (None while nothing is done)."""
        if not self.done:
            return None
        if len(self.done) == 1:
            return self.done[0]
        kinds = {d.kind for d in self.done}
        kind: Kind = "answer" if "answer" in kinds else self.done[0].kind
        text = "\n\n".join(d.text for d in self.done)
        return Done(text, " ".join(d.observation for d in self.done), kind)


def plan(conversation: Conversation, skills: Sequence[Skill], words: Words) -> Plan:
    ranked = sorted(skills, key=lambda s: s.skill.priority)
    request, previous = conversation.request, conversation.previous
    if previous is not None:
        answered = _answering(previous, request, ranked, words)
        if isinstance(answered, list):
            progress = _progress(answered, list(conversation.results))
            return replace(progress, answered=request)
        if answered is not None:
            return Plan(reply=answered)
    parts = _parts_of_request(request, ranked, words)
    if isinstance(parts, str):
        return Plan(reply=parts)
    return _progress(parts, list(conversation.results))


# --- what the request needs ------------------------------------------------------


def _parts_of_request(
    request: str, skills: Sequence[Skill], words: Words
) -> list[Todo | Done] | str:
    found = parts(request, skills) or words.small_talk(request)
    if found:
        return found
    rest = after_greeting(request)
    if rest is None:
        return words.introduction()
    return parts(rest, skills) or words.introduction(rest)


def parts(text: str, skills: Sequence[Skill]) -> list[Todo | Done] | None:
    """One part per piece when every piece is a skill's; else `text` whole."""
    pieces = [p for p in _SEPARATOR.split(text) if p.strip(" ,.!?")]
    if len(pieces) > 1:
        todos = [_match(piece, skills) for piece in pieces]
        if all(t is not None for t in todos):
            return [t for t in todos if t is not None]
    whole = _match(text, skills)
    return [whole] if whole is not None else None


def _match(text: str, skills: Sequence[Skill]) -> Todo | None:
    for entry in skills:
        need = entry.skill.match(text)
        if need is not None:
            return Todo(text, entry.tool, entry.skill, need)
    return None


def _answering(
    previous: str, request: str, skills: Sequence[Skill], words: Words
) -> list[Todo | Done] | None:
    """`previous`'s parts, `request` answering the question it asked in words;
    None when `request` is no answer.

    A request a strong skill claims, or small talk, is a new request; the
    asking skill decides whether the rest answers its question.
    """
    asked = parts(previous, skills)
    index = next(
        (
            i
            for i, p in enumerate(asked or ())
            if isinstance(p, Todo) and isinstance(p.need, Question)
        ),
        None,
    )
    if asked is None or index is None:
        return None
    strong = [s for s in skills if s.skill.priority < WEAK]
    if parts(request, strong) is not None or words.small_talk(request) is not None:
        return None  # a new request
    todo = asked[index]
    assert isinstance(todo, Todo) and isinstance(todo.need, Question)
    completed = todo.skill.complete(todo.text, request)
    if completed is None:
        return None
    if isinstance(completed, Reply):
        done = Done(completed.text, completed.observation, "failure")
        return [*asked[:index], done, *asked[index + 1 :]]
    return [*asked[:index], replace(todo, need=completed), *asked[index + 1 :]]


# --- how far this run has got ----------------------------------------------------


def _progress(parts: list[Todo | Done], results: list[ToolResult]) -> Plan:
    done: list[Done] = []
    for index, part in enumerate(parts):
        outcome = part if isinstance(part, Done) else _advance(part, results)
        if isinstance(outcome, Todo):
            rest = [p for p in parts[index + 1 :] if isinstance(p, Todo)]
            return Plan(tuple(done), (outcome, *rest))
        done.append(outcome)
    return Plan(tuple(done))


def _advance(todo: Todo, results: list[ToolResult]) -> Todo | Done:
    """Consume this part's results, in order: its question's answer, its call's."""
    need = todo.need
    while isinstance(need, Question):
        if not results or results[0].name != REQUEST_INPUT:
            return replace(todo, need=need)
        asked = results.pop(0)
        if asked.failed:
            return Done(
                f"I couldn't {need.goal}: I asked {need.missing}, but got no answer "
                f"({asked.error}).",
                f"The question went unanswered: {asked.error}.",
                "failure",
            )
        completed = todo.skill.complete(todo.text, asked.text)
        if isinstance(completed, Reply):
            return Done(completed.text, completed.observation, "failure")
        if completed is None:
            return Done(
                f"I couldn't {need.goal}: “{asked.text}” doesn't tell me "
                f"{need.missing}.",
                f"The user's answer doesn't say {need.missing}.",
                "failure",
            )
        need = completed
    if not results or results[0].name != todo.tool:
        return replace(todo, need=need)
    return _finished(todo, need, results.pop(0))


def _finished(todo: Todo, call: Call, result: ToolResult) -> Done:
    tool = todo.tool
    match result.status:
        case "ok":
            made = Call(result.arguments or call.arguments, call.goal)
            reply = todo.skill.reply(made, result.data())
            if reply is None:
                return Done(
                    f"The {tool} tool returned:\n\n{result.content}",
                    f"The {tool} tool returned a result I can only pass on as is.",
                    "answer",
                )
            return Done(reply.text, reply.observation, "answer")
        case "rejected":
            why = result.error.splitlines()[0].rstrip(".") if result.error else ""
            return Done(
                f"OK — I didn't {call.goal}, since you declined.",
                f"{why[:1].upper()}{why[1:]}.",
                "declined",
            )
        case "blocked":
            return Done(
                f"I couldn't {call.goal}: this session is read-only. "
                "Turn read-only off and ask again.",
                f"The {tool} tool was blocked: the session is read-only.",
                "failure",
            )
    return Done(
        f"I couldn't {call.goal}: {result.error}.",
        f"The {tool} tool reported an error: {result.error}.",
        "failure",
    )
