"""What the `current_time` tool teaches the offline model: finding the place
in a time question ("what time is it in new york?") and wording the time."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from functools import cache
from typing import Any
from zoneinfo import available_timezones

from backend.llm.offline_skill import BaseSkill, Call, Capability, Need, Reply

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


class TimeSkill(BaseSkill):
    priority = 30
    capabilities = (
        Capability("tell the time in a timezone", ("what time is it in Tokyo?",)),
    )

    def match(self, text: str) -> Need | None:
        if _TIME.search(text) is None:
            return None
        zone = _zone_in(text)
        return Call({"timezone": zone}, f"get the time in {zone}")

    def reply(self, call: Call, result: Any) -> Reply | None:
        sentence = _time_sentence(result) if isinstance(result, dict) else None
        if sentence is None:
            return None
        return Reply(sentence, f"The current_time tool returned {result['iso']}.")


def _time_sentence(data: dict[str, Any]) -> str | None:
    try:
        day = date.fromisoformat(data["date"])
        when = f"{data['weekday']}, {day.day} {MONTHS[day.month - 1]} {day.year}"
        return f"It's {data['time']} on {when} in {data['timezone']}."
    except (KeyError, TypeError, ValueError):
        return None


_TIME = re.compile(r"\b(?:time|clock|date)\b|\bwhat\s+day\b", re.IGNORECASE)
_IANA = re.compile(r"\b[A-Za-z]+(?:_[A-Za-z]+)*/[A-Za-z_]+(?:/[A-Za-z_]+)?\b")
_PLACE = re.compile(
    r"\b(?:in|at|for)\s+(?:the\s+)?(?=(?P<place>[^?!.,;]{1,60}))", re.IGNORECASE
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
