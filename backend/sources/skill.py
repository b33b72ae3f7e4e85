"""What `search_documents` teaches the offline model: when a request asks
what the user's documents say, and how to answer from the passages found,
citing the best one's source, file and location.

Recognised, case-insensitively, optionally after "please", "can you", …
(DOCS is "my/our/the/your documents", "… docs", "… handbook", "… manual",
"… knowledge base", "… data sources", or a data source's name, such as
"the handbook" when a source is called `handbook`, which then is the only
one searched):

- "what do(es) DOCS say (about|on|regarding) X", "what do DOCS mention about X"
- "what's in DOCS about X", "do(es) DOCS mention|cover|say anything about X"
- "search|check|look through DOCS for X", "search for|look up|find X in DOCS"
- "according to|based on DOCS(,) X", "in|from DOCS, X", "X, according to DOCS"
- a bare "search DOCS" asks what to look for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from backend.llm.offline_skill import (
    BaseSkill,
    Call,
    Capability,
    Need,
    Question,
    Reply,
)
from backend.text import unwrap

TOOL = "search_documents"
MAX_QUERY_CHARS = 500
QUOTE_CHARS = 500
"""Of the best passage, quoted in the answer."""
ALSO_MAX = 3

_FLAGS = re.IGNORECASE | re.DOTALL
_LEAD = re.compile(
    r"^[\s,.!]*(?:(?:please|pls|ok(?:ay)?|hey|so|and|also|now)\b[\s,!]*)*"
    r"(?:(?:can|could|would|will)\s+you\s+)?"
    r"(?:i\s+(?:want|need)\s+you\s+to\s+)?(?:please\s+)?",
    _FLAGS,
)
_GENERIC = (
    r"(?:documents?|docs|handbooks?|manuals?|knowledge\s+base"
    r"|data\s+sources?|document\s+sources?)"
)
_OWNER = r"(?:my|our|the|your|these|those)"
_TRAILING = re.compile(r"[\s?!.,;:]+$")
_PLEASE = re.compile(r"[\s,]*\bplease$", re.IGNORECASE)
_QUOTES = {'"': '"', "“": "”", "'": "'", "‘": "’"}  # noqa: RUF001


class SearchDocumentsSkill(BaseSkill):
    priority = 15
    capabilities = (
        Capability(
            "search your documents",
            ("what do my documents say about backups",),
            qualifier=", with tools on",
        ),
    )

    def __init__(self, sources: Sequence[str] = ()) -> None:
        self.sources = tuple(sources)
        self._patterns = _patterns(self.sources)

    def match(self, text: str) -> Need | None:
        request = _request(text)
        for pattern, asks in self._patterns:
            found = pattern.search(request)
            if found is None:
                continue
            sources = self._named(found)
            if asks:
                where = _where(sources)
                return Question(
                    f"What should I look for in {where}?",
                    f"what to look for in {where}",
                    f"search {where}",
                )
            topic = clean_topic(found["topic"])
            if topic:
                return search_call(topic, sources)
        return None

    def complete(self, text: str, answer: str) -> Need | Reply | None:
        asked = self.match(text)
        topic = clean_topic(answer)
        if not isinstance(asked, Question) or not topic:
            return None
        sources = self._named(_bare(self._patterns, _request(text)))
        return search_call(topic, sources)

    def reply(self, call: Call, result: Any) -> Reply | None:
        return answer(result) if isinstance(result, dict) else None

    def _named(self, found: re.Match[str] | None) -> list[str] | None:
        """The source a request names ("the handbook"), if it names one."""
        named = found.groupdict().get("named") if found is not None else None
        if not named:
            return None
        key = _key(named)
        return [name for name in self.sources if _key(name) == key][:1] or None


def search_call(topic: str, sources: list[str] | None) -> Call:
    arguments: dict[str, Any] = {"query": topic[:MAX_QUERY_CHARS]}
    if sources:
        arguments["sources"] = sources
    return Call(arguments, f"search {_where(sources)} for “{_short(topic, 60)}”")


def answer(result: dict[str, Any]) -> Reply | None:
    """The reply from a `search_documents` result: the best passage quoted
    under its source, file and location, and where else to look."""
    passages = result.get("passages")
    query = result.get("query")
    if not isinstance(passages, list) or not isinstance(query, str):
        return None
    cited = [_citation(p) for p in passages]
    if any(c is None for c in cited):
        return None
    where = _where(result.get("sources") or None)
    asked = _short(query, 80)
    if not passages:
        return Reply(
            f"I found nothing about “{asked}” in {where}.",
            f"The {TOOL} tool found no passages for “{asked}”.",
        )
    best = cited[0]
    text = passages[0].get("text")
    if best is None or not isinstance(text, str):
        return None
    quote = "\n".join(f"> {line}" if line else ">" for line in _quoted(text))
    lines = [f"According to **{best}**:", "", quote]
    others = [c for c in cited[1 : 1 + ALSO_MAX] if c]
    if others:
        lines += ["", f"Also relevant: {'; '.join(others)}."]
    count = f"{len(passages)} passage{'' if len(passages) == 1 else 's'}"
    return Reply(
        "\n".join(lines), f"The {TOOL} tool found {count}; the best is in {best}."
    )


def clean_topic(text: str) -> str:
    """What to search for, without the request's trailing punctuation or quotes."""
    text = _PLEASE.sub("", _TRAILING.sub("", text.strip()))
    text = _TRAILING.sub("", text)
    if len(text) > 1 and _QUOTES.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    return text if any(c.isalnum() for c in text) else ""


def _patterns(sources: Sequence[str]) -> list[tuple[re.Pattern[str], bool]]:
    """(pattern, asks): each finds DOCS once, and a `topic` unless it asks."""
    names = sorted({_spoken(name) for name in sources}, key=len, reverse=True)
    named = "|".join(names)
    docs = rf"(?:{_OWNER}\s+)(?P<generic>{_GENERIC})"
    if named:
        docs = (
            rf"(?:(?:{_OWNER}\s+)?(?P<named>{named})(?:\s+{_GENERIC})?"
            rf"|{_OWNER}\s+{_GENERIC})"
        )
    topic = r"(?P<topic>.+)"
    about = r"(?:about|on|regarding|concerning|for|of)"
    forms = [
        rf"\bwhat\s+(?:do|does|did|can|could)\s+{docs}\s+(?:say|said|tell\s+(?:me|us)"
        rf"|mention|write|state|have\s+to\s+say|explain)\s+{about}\s+{topic}",
        rf"\bwhat(?:'s|\u2019s|\s+is)\s+(?:written\s+)?in\s+{docs}\s+{about}\s+{topic}",
        rf"\b(?:do|does)\s+{docs}\s+(?:say\s+anything\s+about|mention|cover"
        rf"|talk\s+about|explain|describe|discuss)\s+{topic}",
        rf"^(?:search|grep|scan|check|consult|look\s+(?:through|in|into)"
        rf"|dig\s+(?:through|into)|go\s+through)\s+{docs}\s+{about}\s+{topic}",
        rf"^(?:search\s+for|look\s+for|look\s+up|find)\s+(?P<topic>.+?)\s+"
        rf"(?:in|within|inside|across)\s+{docs}$",
        rf"^(?:according\s+to|based\s+on)\s+{docs}\s*[,:\-]?\s*{topic}",
        rf"^(?:in|from|per)\s+{docs}\s*[,:]\s*{topic}",
        rf"^(?P<topic>.+?)[\s,]+(?:according\s+to|based\s+on|per)\s+{docs}$",
    ]
    asking = rf"^(?:search|check|consult|look\s+(?:through|in|into))\s+{docs}$"
    return [(re.compile(form, _FLAGS), False) for form in forms] + [
        (re.compile(asking, _FLAGS), True)
    ]


def _bare(
    patterns: list[tuple[re.Pattern[str], bool]], text: str
) -> re.Match[str] | None:
    return next(
        (m for p, asks in patterns if asks and (m := p.search(text)) is not None),
        None,
    )


def _request(text: str) -> str:
    """The request without its polite lead ("please", "can you") or end."""
    text = " ".join(text.split())
    return _TRAILING.sub("", _LEAD.sub("", text, count=1))


def _spoken(name: str) -> str:
    """A source's name as people say it: `release-notes` is also "release notes"."""
    return r"[\s_-]".join(re.escape(part) for part in re.split(r"[_-]", name))


def _key(name: str) -> str:
    return re.sub(r"[\s_-]+", "-", name.lower())


def _where(sources: Sequence[str] | None) -> str:
    if not sources:
        return "your documents"
    return "the " + " and ".join(sources)


def _citation(passage: Any) -> str | None:
    """`handbook/setup.md, Setup > Installing` for a passage of a result."""
    if not isinstance(passage, dict):
        return None
    source, path, where = (passage.get(k) for k in ("source", "path", "location"))
    if not all(isinstance(v, str) and v for v in (source, path, where)):
        return None
    return f"{source}/{path}, {where}"


def _quoted(text: str) -> list[str]:
    """The passage as quoted lines: its paragraphs' hard line breaks joined."""
    text = unwrap(text.strip())
    if len(text) > QUOTE_CHARS:
        words = text[: QUOTE_CHARS - 1].rsplit(None, 1)
        text = (words[0] if len(words) > 1 else text[: QUOTE_CHARS - 1]) + "…"
    return [line.rstrip() for line in text.splitlines()]


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
