"""What the `calculator` tool teaches the offline model: finding a
calculation in a request ("what is 12 times 7?") and wording its result."""

from __future__ import annotations

import re
from typing import Any

from backend.errors import ToolError
from backend.llm.offline_skill import BaseSkill, Call, Capability, Need, Reply
from backend.tools.arithmetic import (
    CONSTANTS,
    DIVISION_SIGN,
    FUNCTIONS,
    MINUS_SIGN,
    TIMES_SIGN,
    evaluate,
    format_number,
    pretty,
)

_WORD_OPERATORS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), replacement)
    for pattern, replacement in (
        (r"\bsquare\s+root\s+of\s+(\d+(?:\.\d+)?)", r"sqrt(\1)"),
        (r"\bmultiplied\s+by\b", "*"),
        (r"\btimes\b", "*"),
        (r"\bdivided\s+by\b", "/"),
        (r"\bover\b", "/"),
        (r"\bplus\b", "+"),
        (r"\bminus\b", "-"),
        (r"\bto\s+the\s+power\s+of\b", "**"),
        (r"\bsquared\b", "**2"),
        (r"\bcubed\b", "**3"),
        (r"\bmod(?:ulo)?\b", "%"),
        (r"(?<=\d)\s*[xX]\s*(?=\d)", " * "),
    )
)
_TOKEN = re.compile(
    r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+|[A-Za-z_][A-Za-z_0-9]*|\*\*|//|"
    rf"[-+*/%^(),{TIMES_SIGN}{DIVISION_SIGN}{MINUS_SIGN}]|\S"
)
_OPERATORS = frozenset(
    {"+", "-", "*", "/", "//", "%", "**", "^", TIMES_SIGN, DIVISION_SIGN, MINUS_SIGN}
)
_PUNCTUATION = _OPERATORS | {"(", ")", ","}
_MATH_WORDS = _PUNCTUATION | frozenset(FUNCTIONS) | frozenset(CONSTANTS)


class CalculatorSkill(BaseSkill):
    priority = 40  # a catch-all for anything with numbers: last, and weak
    capabilities = (Capability("do arithmetic", ("what is 2+2*3", "sqrt(16) + 1")),)

    def match(self, text: str) -> Need | None:
        expression = find_expression(text)
        if expression is None:
            return None
        return Call({"expression": expression}, f"calculate {expression}")

    def reply(self, call: Call, result: Any) -> Reply | None:
        if not isinstance(result, dict) or "result" not in result:
            return None
        expression = str(result.get("expression", call.arguments.get("expression")))
        value = _number(result["result"])
        return Reply(
            f"{pretty(expression)} = **{value}**", f"The calculator returned {value}."
        )

    def local(self, call: Call) -> str | None:
        expression = str(call.arguments["expression"])
        try:
            value = evaluate(expression)
        except ToolError as exc:
            return f"I couldn't {call.goal}: {exc}."
        return f"{pretty(expression)} = **{_number(value)}**"


def find_expression(text: str) -> str | None:
    """The longest stretch of `text` that is a calculation, in symbols."""
    text = text.lower()
    for pattern, replacement in _WORD_OPERATORS:
        text = pattern.sub(replacement, text)
    candidates = [c for c in _math_runs(text) if _is_calculation(c)]
    return max(candidates, key=len) if candidates else None


def _math_runs(text: str) -> list[str]:
    """Maximal stretches of `text` made only of arithmetic tokens."""
    runs: list[str] = []
    start: int | None = None
    end = 0
    for token in _TOKEN.finditer(text):
        if _is_math_token(token.group()):
            start = token.start() if start is None else start
            end = token.end()
        elif start is not None:
            runs.append(text[start:end])
            start = None
    if start is not None:
        runs.append(text[start:end])
    return [run.strip(" ,") for run in runs]


def _is_math_token(token: str) -> bool:
    return token[0].isdigit() or token[0] == "." or token in _MATH_WORDS


def _is_calculation(candidate: str) -> bool:
    tokens = [t.group() for t in _TOKEN.finditer(candidate)]
    has_number = any(t[0].isdigit() or t[0] == "." or t in CONSTANTS for t in tokens)
    has_work = any(t in _OPERATORS or t in FUNCTIONS for t in tokens)
    if not (has_number and has_work):
        return False
    try:
        evaluate(candidate)
    except ToolError as exc:
        return not str(exc).startswith(("invalid expression", "empty expression"))
    return True


def _number(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format_number(value)
    return str(value)
