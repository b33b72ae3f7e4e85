"""What the `convert_units` tool teaches the offline model: finding a
conversion in a request ("how many feet in a mile?"), asking for the target
unit when it is missing, and wording the result."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from backend.llm.offline_skill import (
    BaseSkill,
    Call,
    Capability,
    Need,
    Question,
    Reply,
)
from backend.tools.arithmetic import format_number
from backend.tools.units import lookup_unit, symbols


@dataclass(frozen=True, slots=True)
class Conversion:
    value: float
    from_unit: str
    to_unit: str | None = None

    @property
    def amount(self) -> str:
        """`10 miles`: the value and the unit as the user wrote it."""
        return f"{format_number(self.value)} {self.from_unit}"

    def call(self, to_unit: str) -> Call:
        value = int(self.value) if self.value.is_integer() else self.value
        arguments = {"value": value, "from_unit": self.from_unit, "to_unit": to_unit}
        return Call(arguments, f"convert {self.amount} to {to_unit}")


class UnitsSkill(BaseSkill):
    priority = 20
    capabilities = (
        Capability("convert units", ("convert 10 miles to km",)),
        Capability(
            "ask you a clarifying question",
            ("convert 10 miles",),
            qualifier=" in agent mode",
            in_greeting=False,
        ),
    )

    def match(self, text: str) -> Need | None:
        conversion = detect_conversion(text)
        if conversion is None:
            return None
        if conversion.to_unit is not None:
            return conversion.call(conversion.to_unit)
        return Question(
            question=f"What unit should I convert {conversion.amount} to?",
            missing=f"which unit to convert {conversion.amount} to",
            goal=f"convert {conversion.amount}",
            suggestions=_targets(conversion.from_unit),
        )

    def complete(self, text: str, answer: str) -> Need | Reply | None:
        conversion = detect_conversion(text)
        unit = _answered_unit(answer)
        if conversion is None or unit is None:
            return None
        return conversion.call(unit)

    def reply(self, call: Call, result: Any) -> Reply | None:
        if not isinstance(result, dict):
            return None
        try:
            unit = call.arguments.get("from_unit") or result["from_unit"]
            amount = f"{_number(result['value'])} {unit}"
            converted = f"{_number(result['result'])} {result['to_unit']}"
        except KeyError:
            return None
        return Reply(
            f"{amount} is **{converted}**",
            f"The convert_units tool returned {converted}.",
        )


TARGETS = 4
"""Units a question suggests, at most."""
COMMON: tuple[str, ...] = ("km", "m", "mi", "ft", "kg", "g", "lb", "oz", "l", "ml")
COMMON += ("gal", "°C", "°F", "K", "km/h", "mph", "m/s")
"""The units people convert to most, first among a question's suggestions."""


def _targets(from_unit: str) -> tuple[str, ...]:
    """The units `from_unit` converts to that people ask for most."""
    unit = lookup_unit(from_unit)
    if unit is None:
        return ()
    others = [s for s in symbols(unit.quantity) if s != unit.symbol]
    ranked = sorted(others, key=lambda s: COMMON.index(s) if s in COMMON else 99)
    return tuple(ranked[:TARGETS])


def _answered_unit(answer: str) -> str | None:
    """The unit an answer names; a short answer naming none still goes to the
    tool, which says why it cannot convert to it."""
    named = find_unit(answer)
    if named is not None:
        return named
    cleaned = answer.strip().strip("?!.")
    return cleaned if cleaned and len(cleaned.split()) <= 3 else None


def _number(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format_number(value)
    return str(value)


_CONNECTOR = re.compile(r"^(?:to|in|into|as)\s+", re.IGNORECASE)
_MAX_UNIT_WORDS = 4


def find_unit(text: str) -> str | None:
    """The first unit named in `text` ("to km please" -> "km"), as written."""
    cleaned = _CONNECTOR.sub("", text.strip().strip("?!. "))
    words = cleaned.split()
    for size in range(min(len(words), _MAX_UNIT_WORDS), 0, -1):
        for start in range(len(words) - size + 1):
            candidate = " ".join(words[start : start + size])
            if lookup_unit(candidate) is not None:
                return candidate.strip(",;:")
    return None


def _leading_unit(text: str) -> str | None:
    words = text.split()
    for size in range(min(len(words), _MAX_UNIT_WORDS), 0, -1):
        candidate = " ".join(words[:size]).strip(",;:?!.")
        if lookup_unit(candidate) is not None:
            return candidate
    return None


_NUMBER = (
    r"(?<![\w.])"
    r"(?P<value>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+|\ban?\b|\bone\b)"
)
_CONVERT_TO = re.compile(
    rf"{_NUMBER}\s*(?P<source>\D.*?)\s+(?:to|in|into|as)\s+(?P<target>.+)$",
    re.IGNORECASE,
)
_HOW_MANY = re.compile(
    rf"\bhow\s+many\s+(?P<target>.+?)\s+(?:is|are|in|make|makes|equals?|=)\s+"
    rf"{_NUMBER}\s*(?P<source>.+)$",
    re.IGNORECASE,
)
_CONVERT_ONLY = re.compile(rf"\bconvert\s+{_NUMBER}\s*(?P<source>.+)$", re.IGNORECASE)
_NUMBER_START = re.compile(_NUMBER, re.IGNORECASE)
_PHRASE = 200


def detect_conversion(text: str) -> Conversion | None:
    """The conversion `text` asks for (its target unit may be missing)."""
    text = text.strip().rstrip("?!. ")
    return _how_many(text) or _convert_to(text) or _convert_only(text)


def _how_many(text: str) -> Conversion | None:
    match = _HOW_MANY.search(text)
    if match is None or lookup_unit(match["target"]) is None:
        return None
    source = _leading_unit(match["source"])
    if source is None:
        return None
    return Conversion(_value(match["value"]), source, match["target"].strip())


def _convert_to(text: str) -> Conversion | None:
    for start in _NUMBER_START.finditer(text):
        # a conversion is a short phrase: each try reads a bounded window,
        # so many numbers in a long text cost linear time, not quadratic
        match = _CONVERT_TO.match(text[start.start() : start.start() + _PHRASE])
        if match is None or lookup_unit(match["source"]) is None:
            continue
        target = _leading_unit(match["target"]) or match["target"].strip()
        return Conversion(_value(match["value"]), match["source"].strip(), target)
    return None


def _convert_only(text: str) -> Conversion | None:
    match = _CONVERT_ONLY.search(text)
    if match is None:
        return None
    source = _leading_unit(match["source"])
    return Conversion(_value(match["value"]), source) if source else None


def _value(text: str) -> float:
    if text.lower() in {"a", "an", "one"}:
        return 1.0
    return float(text.replace(",", ""))
