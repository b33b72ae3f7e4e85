"""User text is never FTS5 syntax: operators, quotes, NEAR, `*`, column
filters are words or nothing, and a query without words finds nothing
(without an error)."""

# ruff: noqa: RUF001 (locations are written with a guillemet and an en dash)

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.sources.index import SourceIndex
from backend.sources.query import MAX_TERMS, match_expression, terms
from tests.sources_corpus import copy_corpus

EXPRESSIONS = [
    ("bonfires", '"bonfires"'),
    ("Are BONFIRES allowed?", '"bonfires" OR "allowed"'),
    ('bonfires" OR "*', '"bonfires"'),
    ("NEAR(dogs lead, 2)", '"near" OR "dogs" OR "lead" OR "2"'),
    ("dogs AND NOT lead", '"dogs" OR "lead"'),
    ("heading: winter", '"heading" OR "winter"'),
    ("body:hoses -frost", '"body" OR "hoses" OR "frost"'),
    ("compo*", '"compo"'),
    ("^start + {braces} [x]", '"start" OR "braces" OR "x"'),
    ("snake_case", '"snake" OR "case"'),
    ("café crème brûlée", '"café" OR "crème" OR "brûlée"'),
    ("the the THE", '"the"'),
    ("what is it", '"what" OR "is" OR "it"'),
]
NOTHING = ["", "   ", "*", '"', '""', "?!.", "()", "- + ^ : *", "…", "_"]


@pytest.mark.parametrize(("text", "expression"), EXPRESSIONS)
def test_words_are_quoted_and_joined(text: str, expression: str) -> None:
    """Each distinct word is quoted and OR-joined; FTS5 syntax in the text is lost."""
    assert match_expression(text) == expression


@pytest.mark.parametrize("text", NOTHING)
def test_no_words_no_query(text: str) -> None:
    """Text with no words yields no match expression at all."""
    assert match_expression(text) is None


def test_a_long_query_keeps_its_first_terms() -> None:
    """Only the first `MAX_TERMS` words of a long query are searched."""
    words = [f"w{n}" for n in range(100)]
    assert terms(" ".join(words)) == words[:MAX_TERMS]


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[SourceIndex]:
    opened = await SourceIndex.open(":memory:", {"garden": copy_corpus(tmp_path / "g")})
    try:
        await opened.refresh("garden")
        yield opened
    finally:
        await opened.aclose()


HOSTILE = [
    ('bonfires" OR "*', "rules.pdf", "page 2"),
    ("NEAR", "rules.pdf", "page 3"),  # "near the pond": a word like any other
    ("NEAR(dogs lead)", "rules.pdf", "page 3"),
    ("heading: Winter", "watering.md", "Watering › Winter"),
    ("{aphids} AND (soap)", "pests.md", "Pests and diseases › Aphids"),
    ("marrow*", "events.md", "Events › Harvest festival"),
]


@pytest.mark.parametrize(("text", "path", "location"), HOSTILE)
async def test_hostile_queries_search_for_their_words(
    index: SourceIndex, text: str, path: str, location: str
) -> None:
    """Queries shaped like FTS5 syntax find the passage holding their plain words."""
    hits = await index.search(text)
    assert (hits[0].path, hits[0].location) == (path, location)


@pytest.mark.parametrize("text", [*NOTHING, "zzzq", "xylophone quartz"])
async def test_queries_without_a_match_find_nothing(
    index: SourceIndex, text: str
) -> None:
    """Wordless or unmatched queries return no hits instead of raising."""
    assert await index.search(text) == []


async def test_a_limit_below_one_finds_nothing(index: SourceIndex) -> None:
    """A limit of zero returns no hits, and a positive limit caps the hits."""
    assert await index.search("bonfires", limit=0) == []
    assert len(await index.search("garden", limit=2)) == 2
