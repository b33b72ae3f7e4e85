"""Queries: people's words, made safe for an FTS5 `MATCH`.

User text is never FTS5 syntax: it is cut into words (letters and digits),
and each word is quoted, so `AND`, `NEAR`, `*`, `"`, `:` and parentheses
are only words or nothing. Common words ("what", "the", "my") are dropped
unless nothing else is left; the rest are joined with `OR`, so a passage
with some of the words is still found, and BM25 ranks the one with the
most (and rarest) first. No words at all: no query.
"""

from __future__ import annotations

import re

MAX_TERMS = 32
_WORD = re.compile(r"[^\W_]+")
_COMMON = """
    a about above according after again all am an and any are as at be been
    before being below between both but by can could did do does doing done
    down during each few for from further had has have having he her here
    hers him his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours out over own
    please same say says she should so some such tell than that the their
    theirs them then there these they this those through to too under until
    up very was we were what when where which while who whom why will with
    would you your yours document documents docs
"""
STOPWORDS = frozenset(_COMMON.split())


def terms(text: str) -> list[str]:
    """The words of `text` a search looks for, lowercased, each once."""
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))
    kept = [word for word in words if word not in STOPWORDS]
    return (kept or words)[:MAX_TERMS]


def match_expression(text: str) -> str | None:
    """An FTS5 query for `text`: its words quoted and joined with OR; None
    when it has no words."""
    words = terms(text)
    if not words:
        return None
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
