"""What a user's message asks the offline model for, read by simple rules.

`detect_intent(text)` recognises, in this order: a unit conversion, a time
question, arithmetic, then help / thanks / greetings. (Note requests come
before all of these; `offline_notes.py` recognises them.) `detect_request(...)`
also lets a bare unit ("km") complete a conversion asked for in the previous
user message ("convert 10 miles").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal
from zoneinfo import available_timezones

from backend.errors import ToolError
from backend.tools.arithmetic import (
    CONSTANTS,
    DIVISION_SIGN,
    FUNCTIONS,
    MINUS_SIGN,
    TIMES_SIGN,
    evaluate,
    format_number,
)
from backend.tools.units import lookup_unit


@dataclass(frozen=True, slots=True)
class Arithmetic:
    expression: str


@dataclass(frozen=True, slots=True)
class TimeQuery:
    timezone: str


@dataclass(frozen=True, slots=True)
class Conversion:
    value: float
    from_unit: str
    to_unit: str | None = None

    @property
    def amount(self) -> str:
        """`10 miles`: the value and the unit as the user wrote it."""
        return f"{format_number(self.value)} {self.from_unit}"


@dataclass(frozen=True, slots=True)
class SmallTalk:
    kind: Literal["greeting", "thanks", "help"]


@dataclass(frozen=True, slots=True)
class Unknown:
    pass


Intent = Arithmetic | TimeQuery | Conversion | SmallTalk | Unknown


def detect_request(user_messages: Sequence[str]) -> Intent:
    """The intent of the last user message, completed by the one before it."""
    if not user_messages:
        return Unknown()
    intent = detect_intent(user_messages[-1])
    if isinstance(intent, Unknown) and len(user_messages) > 1:
        previous = detect_intent(user_messages[-2])
        unit = find_unit(user_messages[-1])
        if isinstance(previous, Conversion) and previous.to_unit is None and unit:
            return Conversion(previous.value, previous.from_unit, unit)
    return intent


def detect_intent(text: str) -> Intent:
    for detector in (_conversion, _time_query, _arithmetic, _small_talk):
        intent = detector(text)
        if intent is not None:
            return intent
    return Unknown()


# --- units -----------------------------------------------------------------

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


# --- conversion --------------------------------------------------------------

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


def _conversion(text: str) -> Conversion | None:
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
        match = _CONVERT_TO.match(text, start.start())
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


# --- time ----------------------------------------------------------------------

_TIME = re.compile(r"\b(?:time|clock|date)\b|\bwhat\s+day\b", re.IGNORECASE)
_IANA = re.compile(r"\b[A-Za-z]+(?:_[A-Za-z]+)*/[A-Za-z_]+(?:/[A-Za-z_]+)?\b")
_PLACE = re.compile(
    r"\b(?:in|at|for)\s+(?:the\s+)?(?=(?P<place>[^?!.,;]+))", re.IGNORECASE
)
_NOT_PLACES = frozenset({"moment", "the moment", "now", "here", "present", "all"})

CITY_ZONES: dict[str, str] = {
    "utc": "UTC",
    "gmt": "UTC",
    "tokyo": "Asia/Tokyo",
    "japan": "Asia/Tokyo",
    "london": "Europe/London",
    "uk": "Europe/London",
    "england": "Europe/London",
    "paris": "Europe/Paris",
    "france": "Europe/Paris",
    "berlin": "Europe/Berlin",
    "germany": "Europe/Berlin",
    "madrid": "Europe/Madrid",
    "rome": "Europe/Rome",
    "amsterdam": "Europe/Amsterdam",
    "moscow": "Europe/Moscow",
    "new york": "America/New_York",
    "new york city": "America/New_York",
    "nyc": "America/New_York",
    "boston": "America/New_York",
    "washington": "America/New_York",
    "chicago": "America/Chicago",
    "denver": "America/Denver",
    "los angeles": "America/Los_Angeles",
    "la": "America/Los_Angeles",
    "san francisco": "America/Los_Angeles",
    "sf": "America/Los_Angeles",
    "seattle": "America/Los_Angeles",
    "toronto": "America/Toronto",
    "mexico city": "America/Mexico_City",
    "sao paulo": "America/Sao_Paulo",
    "são paulo": "America/Sao_Paulo",
    "sydney": "Australia/Sydney",
    "melbourne": "Australia/Melbourne",
    "auckland": "Pacific/Auckland",
    "beijing": "Asia/Shanghai",
    "shanghai": "Asia/Shanghai",
    "hong kong": "Asia/Hong_Kong",
    "singapore": "Asia/Singapore",
    "seoul": "Asia/Seoul",
    "dubai": "Asia/Dubai",
    "mumbai": "Asia/Kolkata",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "india": "Asia/Kolkata",
    "cairo": "Africa/Cairo",
    "johannesburg": "Africa/Johannesburg",
    "lagos": "Africa/Lagos",
}


def _time_query(text: str) -> TimeQuery | None:
    if _TIME.search(text) is None:
        return None
    return TimeQuery(_zone_in(text))


def _zone_in(text: str) -> str:
    iana = _IANA.search(text)
    if iana is not None:
        return iana.group()
    places = [match["place"].split() for match in _PLACE.finditer(text)]
    for words in places:
        zone = _zone_for_words(words)
        if zone is not None:
            return zone
    named = _zone_named_anywhere(text)
    if named is not None:
        return named
    unknown = [w for w in places if " ".join(w).lower() not in _NOT_PLACES]
    # An unknown place goes to the tool as written, which says so honestly.
    return " ".join(unknown[-1][:3]) if unknown else "UTC"


def _zone_for_words(words: Sequence[str]) -> str | None:
    for size in range(min(len(words), 3), 0, -1):
        zone = zone_for_place(" ".join(words[:size]))
        if zone is not None:
            return zone
    return None


def zone_for_place(place: str) -> str | None:
    """The IANA zone of a city or country name people commonly use."""
    key = place.strip().lower()
    return CITY_ZONES.get(key) or _zone_cities().get(key)


def _zone_named_anywhere(text: str) -> str | None:
    lowered = text.lower()
    for place, zone in CITY_ZONES.items():
        if re.search(rf"\b{re.escape(place)}\b", lowered):
            return zone
    return None


@cache
def _zone_cities() -> dict[str, str]:
    """`kolkata` -> `Asia/Kolkata`, from the zone database on this machine."""
    cities: dict[str, str] = {}
    for key in sorted(available_timezones()):
        city = key.rsplit("/", 1)[-1].replace("_", " ").lower()
        cities.setdefault(city, key)
    return cities


# --- arithmetic ----------------------------------------------------------------

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


def _arithmetic(text: str) -> Arithmetic | None:
    text = text.lower()
    for pattern, replacement in _WORD_OPERATORS:
        text = pattern.sub(replacement, text)
    candidates = [c for c in _math_runs(text) if _is_calculation(c)]
    if not candidates:
        return None
    return Arithmetic(max(candidates, key=len))


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


# --- small talk ----------------------------------------------------------------

_HELP = re.compile(
    r"\b(?:help|what\s+can\s+you\s+do|who\s+are\s+you|what\s+are\s+you|"
    r"how\s+do\s+(?:i|you)\s+(?:use|work))\b",
    re.IGNORECASE,
)
_THANKS = re.compile(
    r"\b(?:thanks|thank\s+you|thx|cheers|much\s+appreciated)\b", re.IGNORECASE
)
_GREETING = re.compile(
    r"^\W*(?:hi|hello|hey|hiya|howdy|greetings|yo|hallo|bonjour|hola|"
    r"good\s+(?:morning|afternoon|evening|day))\b",
    re.IGNORECASE,
)


def _small_talk(text: str) -> SmallTalk | None:
    if _HELP.search(text):
        return SmallTalk("help")
    if _THANKS.search(text):
        return SmallTalk("thanks")
    if _GREETING.search(text):
        return SmallTalk("greeting")
    return None
