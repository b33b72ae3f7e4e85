"""Search over a user's conversations: what a query means, and what a hit shows.

A query is its words: runs of letters and digits, compared without case
(and, on SQLite, without accents). Everything else in it is a separator,
never syntax: quotes, `*`, `-`, `:`, parentheses and words such as `AND`
or `OR` mean nothing special, so no query can fail to parse, and a query of
punctuation alone finds nothing. A conversation matches when its title, or
one of its user and assistant messages, holds every word; the last word
also matches as the start of a longer one ("mil" finds "milk"), as people
type. The statements are in `sql_search.py`; the snippet is cut here, the
same on both databases.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # base.py names `SearchHit` in the `Store` seam
    from backend.store.records import ConversationRecord

WORD = re.compile(r"[^\W_]+")
"""A word of a query or of a text: letters and digits (like FTS5's
`unicode61` tokenizer, which splits on `_` too)."""

MAX_WORDS = 16
"""A query's words past these are ignored."""

SEARCHED_CHARS = 100_000
"""Of each message, the first this many characters are searched (PostgreSQL
refuses to index a text whose words and positions pass 1 MB)."""

SNIPPET_CHARS = 160
"""The most text a snippet shows (its `«` `»` marks and `…` aside)."""

SNIPPET_LEAD = 40
"""About this much text is shown before the first match."""

TITLE = -1
"""The `position` a title is indexed at (messages count from 0)."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A conversation that matched, and where it matched best."""

    conversation: ConversationRecord
    position: int | None
    """The message's position in the history; None: the title matched."""
    snippet: str
    """Plain text around the first match, the matched words marked `«…»`."""

    @property
    def where(self) -> str:
        return "title" if self.position is None else "message"


def fold(word: str) -> str:
    """`word` as it is compared: lower case, without accents."""
    parts = unicodedata.normalize("NFKD", word)
    return "".join(ch for ch in parts if not unicodedata.combining(ch)).casefold()


def query_words(text: str) -> list[str]:
    """The words of a query, folded (at most `MAX_WORDS`; [] for punctuation)."""
    return [fold(word) for word in WORD.findall(text)][:MAX_WORDS]


def fts5_query(words: Sequence[str]) -> str:
    """An FTS5 MATCH expression: each word quoted (so none is syntax), all
    required, the last a prefix: `"milk" "bre"*`."""
    quoted = ['"' + word.replace('"', '""') + '"' for word in words]
    return " ".join(quoted) + "*"


def tsquery(words: Sequence[str]) -> str:
    """A PostgreSQL `to_tsquery` text: each word quoted, all required, the
    last a prefix: `'milk' & 'bre':*`."""
    quoted = ["'" + word.replace("'", "''").replace("\\", "") + "'" for word in words]
    return " & ".join(quoted) + ":*"


def _matches(word: str, words: Sequence[str]) -> bool:
    folded = fold(word)
    return folded in words[:-1] or folded.startswith(words[-1])


def snippet(text: str, words: Sequence[str]) -> str:
    """At most `SNIPPET_CHARS` of `text` (white space collapsed) around its
    first match of `words`, every matched word marked `«…»`, `…` where it
    was cut."""
    flat = " ".join(text.split())
    spans = [m.span() for m in WORD.finditer(flat) if words and _matches(m[0], words)]
    first, first_end = spans[0] if spans else (0, 0)
    start = max(0, first - SNIPPET_LEAD)
    if start:
        space = flat.find(" ", start, first)
        start = first if space < 0 else space + 1
    end = max(start + SNIPPET_CHARS, first_end)
    if end < len(flat):
        space = flat.rfind(" ", first_end, end)
        end = space if space > 0 else end
    shown = _marked(flat, start, end, spans)
    return ("…" if start else "") + shown + ("…" if end < len(flat) else "")


def _marked(flat: str, start: int, end: int, spans: list[tuple[int, int]]) -> str:
    """`flat[start:end]` with the `spans` inside it marked `«…»`."""
    pieces: list[str] = []
    at = start
    for left, right in spans:
        if left < at or right > end:
            continue
        pieces += [flat[at:left], "«", flat[left:right], "»"]
        at = right
    pieces.append(flat[at:end])
    return "".join(pieces)
