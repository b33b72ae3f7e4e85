"""The offline model's reasoning: what this run already has, and what is next.

`read_run(messages)` finds the user's request (the last `user` message) and
this run's tool results (the messages after it). `decide(state)` turns them
into one `Decision`: reply directly, answer from results, explain a failure
or a declined approval, call a tool, or ask the user for what is missing.
Every phase renders the same decision its own way (see `offline.py`). Note
requests are decided in `offline_notes.py`, which builds on these types.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from backend.errors import ToolError
from backend.llm.base import Message, ToolCall, ToolStatus
from backend.llm.offline_intents import (
    Arithmetic,
    Conversion,
    Intent,
    SmallTalk,
    TimeQuery,
    detect_request,
    find_unit,
)
from backend.tools.arithmetic import evaluate, format_number, pretty

REQUEST_INPUT = "request_input"

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

CAPABILITIES = (
    "I can:\n"
    "- do arithmetic — “what is 2+2*3”, “sqrt(16) + 1”\n"
    "- tell the time in a timezone — “what time is it in Tokyo?”\n"
    "- convert units — “convert 10 miles to km”\n"
    "- keep notes, with tools on — “remember that …”, “list my notes”, "
    "“forget note 1”\n"
    "- in agent mode, ask you a clarifying question — try “convert 10 miles”"
)
REAL_MODEL_HINT = (
    "To use a real model, set LOOPWIRE_LLM_BASE_URL, LOOPWIRE_LLM_API_KEY "
    "and LOOPWIRE_LLM_MODEL."
)
INTRODUCTION = (
    "I'm loopwire's built-in offline demo model: simple rules, no network and "
    "no AI, so I can't answer that one.\n\n"
    f"{CAPABILITIES}\n\n{REAL_MODEL_HINT}"
)
SMALL_TALK = {
    "greeting": (
        "Hello! I'm loopwire's built-in offline demo model. I can do arithmetic, "
        "tell the time in a timezone, convert units and keep notes — try "
        "“what is 2+2*3”, “what time is it in Tokyo?”, “convert 10 miles to km” "
        "or “remember that …”."
    ),
    "thanks": (
        "You're welcome! Ask me for a calculation, the time somewhere, "
        "a unit conversion or a note any time."
    ),
    "help": (
        "I'm loopwire's built-in offline demo model (simple rules, no network).\n\n"
        f"{CAPABILITIES}\n\n{REAL_MODEL_HINT}"
    ),
}

# --- what this run has ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool message of this run, with the arguments of its call."""

    name: str
    content: str
    arguments: dict[str, Any] = field(default_factory=dict)
    outcome: ToolStatus = "ok"
    detail: str | None = None

    @property
    def failed(self) -> bool:
        return self.outcome != "ok"

    @property
    def error(self) -> str:
        return (self.detail or self.content).strip().rstrip(".")

    @property
    def status(self) -> ToolStatus | None:
        """`failed`, `rejected`, `timeout`, … for a call that failed, else None."""
        return None if self.outcome == "ok" else self.outcome

    @property
    def text(self) -> str:
        """The content as plain text (a JSON string is unwrapped)."""
        value = _json(self.content)
        return value if isinstance(value, str) else self.content.strip()

    def data(self) -> dict[str, Any]:
        value = _json(self.content)
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class RunState:
    intent: Intent
    results: tuple[ToolResult, ...] = ()
    calls_so_far: int = 0
    requests: tuple[str, ...] = ()
    """The last user message, preceded by the one before it while that one is
    still open: no tool ran for it (the reply may have asked a question)."""

    def latest(self, name: str) -> ToolResult | None:
        return next((r for r in reversed(self.results) if r.name == name), None)

    @property
    def answer(self) -> str | None:
        """The user's answer, when this run's last result is one."""
        last = self.results[-1] if self.results else None
        if last is None or last.name != REQUEST_INPUT or last.failed:
            return None
        return last.text

    @property
    def next_call_id(self) -> str:
        return f"call_{self.calls_so_far + 1}"


def read_run(messages: Sequence[Message]) -> RunState:
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    run = messages[users[-1] + 1 :] if users else messages
    intent = detect_request([messages[i].content or "" for i in users])
    calls = {call.id: call for m in run for call in m.tool_calls}
    results = tuple(
        _result(m, calls.get(m.tool_call_id or "")) for m in run if m.role == "tool"
    )
    calls_so_far = sum(len(m.tool_calls) for m in messages)
    return RunState(intent, results, calls_so_far, _open_requests(messages, users))


def _open_requests(messages: Sequence[Message], users: list[int]) -> tuple[str, ...]:
    texts = tuple(messages[i].content or "" for i in users[-2:])
    if len(users) > 1:
        between = messages[users[-2] + 1 : users[-1]]
        if any(m.tool_calls or m.role == "tool" for m in between):
            return texts[-1:]
    return texts


def _result(message: Message, call: ToolCall | None) -> ToolResult:
    name = message.name or (call.name if call else "")
    arguments = _json(call.arguments) if call else None
    meta = message.meta
    return ToolResult(
        name,
        message.content or "",
        arguments if isinstance(arguments, dict) else {},
        meta.status if meta else "ok",
        meta.error if meta else None,
    )


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None


# --- what comes next -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """Answerable without tools."""

    text: str


@dataclass(frozen=True, slots=True)
class Answer:
    """This run's tool results answer the request."""

    text: str
    observation: str


@dataclass(frozen=True, slots=True)
class Failure:
    """A tool this run needed failed; `text` explains it honestly."""

    text: str
    observation: str


@dataclass(frozen=True, slots=True)
class Declined:
    """The user declined a tool call this run needed; `text` says what wasn't done."""

    text: str
    observation: str


@dataclass(frozen=True, slots=True)
class NeedTool:
    name: str
    arguments: dict[str, Any]
    goal: str


@dataclass(frozen=True, slots=True)
class NeedInput:
    question: str
    missing: str
    then: str  # the tool that will use the answer
    goal: str


Decision = Reply | Answer | Failure | Declined | NeedTool | NeedInput


def decide(state: RunState) -> Decision:
    match state.intent:
        case Arithmetic() as intent:
            return _arithmetic(intent, state)
        case TimeQuery() as intent:
            return _time(intent, state)
        case Conversion() as intent:
            return _conversion(intent, state)
        case SmallTalk(kind):
            return Reply(SMALL_TALK[kind])
        case _:
            return Reply(INTRODUCTION)


def calculate_locally(expression: str) -> str:
    """The arithmetic answer without a tool call (plain chat)."""
    try:
        value = evaluate(expression)
    except ToolError as exc:
        return f"I couldn't calculate {expression}: {exc}."
    return _arithmetic_sentence(expression, value)


def _arithmetic(intent: Arithmetic, state: RunState) -> Decision:
    expression = intent.expression
    result = state.latest("calculator")
    if result is None:
        return NeedTool(
            "calculator", {"expression": expression}, f"calculate {expression}"
        )
    if result.failed:
        return Failure(
            f"I couldn't calculate {expression}: {result.error}.",
            f"The calculator reported an error: {result.error}.",
        )
    data = result.data()
    if "result" not in data:
        return unreadable(result)
    value = data["result"]
    sentence = _arithmetic_sentence(str(data.get("expression", expression)), value)
    return Answer(sentence, f"The calculator returned {_number(value)}.")


def _arithmetic_sentence(expression: str, value: Any) -> str:
    return f"{pretty(expression)} = **{_number(value)}**"


def _time(intent: TimeQuery, state: RunState) -> Decision:
    zone = intent.timezone
    result = state.latest("current_time")
    if result is None:
        return NeedTool(
            "current_time", {"timezone": zone}, f"get the current time in {zone}"
        )
    if result.failed:
        return Failure(
            f"I couldn't get the time in {zone}: {result.error}.",
            f"The current_time tool reported an error: {result.error}.",
        )
    sentence = _time_sentence(result.data())
    if sentence is None:
        return unreadable(result)
    return Answer(sentence, f"The current_time tool returned {result.data()['iso']}.")


def _time_sentence(data: dict[str, Any]) -> str | None:
    try:
        day = date.fromisoformat(data["date"])
        when = f"{data['weekday']}, {day.day} {MONTHS[day.month - 1]} {day.year}"
        return f"It's {data['time']} on {when} in {data['timezone']}."
    except (KeyError, TypeError, ValueError):
        return None


def _conversion(intent: Conversion, state: RunState) -> Decision:
    result = state.latest("convert_units")
    if result is not None:
        return _conversion_answer(intent, result)
    asked = state.latest(REQUEST_INPUT)
    if intent.to_unit is None and asked is not None and asked.failed:
        return Failure(
            f"I couldn't convert {intent.amount}: I asked which unit to convert to, "
            f"but got no answer ({asked.error}).",
            f"The question went unanswered: {asked.error}.",
        )
    target = intent.to_unit or _answered_unit(asked)
    if target is None:
        return NeedInput(
            question=f"What unit should I convert {intent.amount} to?",
            missing=f"which unit to convert {intent.amount} to",
            then="convert_units",
            goal=f"convert {intent.amount}",
        )
    arguments = {
        "value": _plain(intent.value),
        "from_unit": intent.from_unit,
        "to_unit": target,
    }
    return NeedTool("convert_units", arguments, f"convert {intent.amount} to {target}")


def _answered_unit(asked: ToolResult | None) -> str | None:
    if asked is None or asked.failed:
        return None
    answer = asked.text.strip().strip("?!.")
    # An answer that names no known unit still goes to the tool, which says why.
    return find_unit(answer) or answer or None


def _conversion_answer(intent: Conversion, result: ToolResult) -> Decision:
    if result.failed:
        return Failure(
            f"I couldn't convert {intent.amount}: {result.error}.",
            f"The convert_units tool reported an error: {result.error}.",
        )
    data = result.data()
    try:
        unit = result.arguments.get("from_unit") or data["from_unit"]
        amount = f"{_number(data['value'])} {unit}"
        converted = f"{_number(data['result'])} {data['to_unit']}"
    except KeyError:
        return unreadable(result)
    return Answer(
        f"{amount} is **{converted}**",
        f"The convert_units tool returned {converted}.",
    )


def unreadable(result: ToolResult) -> Answer:
    return Answer(
        f"The {result.name} tool returned:\n\n{result.content}",
        f"The {result.name} tool returned a result I can only pass on as is.",
    )


def _number(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format_number(value)
    return str(value)


def _plain(value: float) -> int | float:
    return int(value) if value.is_integer() else value
