"""The data-source index: retrieval over a small corpus (a table of questions
and the passage each must find first), incremental refresh (the report's
counts exactly, unchanged files not read), persistence, source filters."""

# ruff: noqa: RUF001 (locations are written with a guillemet and an en dash)

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.sources.documents import Problem
from backend.sources.index import SourceIndex, UnknownSource
from backend.sources.passages import MAX_CHARS
from backend.sources.refresh import Limits, RefreshReport
from tests.sources_corpus import DOCUMENTS, PASSAGES, copy_corpus

SECOND = 1_000_000_000


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return copy_corpus(tmp_path / "garden")


@pytest.fixture
async def index(corpus: Path) -> AsyncIterator[SourceIndex]:
    opened = await SourceIndex.open(":memory:", {"garden": corpus})
    try:
        report = await opened.refresh("garden")
        assert counts(report) == (8, 0, 0, 0, 8)
        yield opened
    finally:
        await opened.aclose()


def counts(report: RefreshReport) -> tuple[int, int, int, int, int]:
    """(added, updated, removed, unchanged, read)."""
    return (
        report.added,
        report.updated,
        report.removed,
        report.unchanged,
        report.read,
    )


def later(path: Path, seconds: int = 10) -> None:
    """Move `path`'s mtime on (a touch the index cannot miss)."""
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + seconds * SECOND))


QUESTIONS = [
    (
        "when are the beds watered in summer",
        "watering.md",
        "Watering › Summer schedule",
    ),
    ("drain the hoses before frost", "watering.md", "Watering › Winter"),
    ("timer batteries", "watering.md", "Watering › Drip irrigation"),
    ("how do I get rid of aphids", "pests.md", "Pests and diseases › Aphids"),
    ("copper tape around strawberries", "pests.md", "Pests and diseases › Slugs"),
    ("tomato blight", "pests.md", "Pests and diseases › Blight"),
    ("what goes in the compost", "compost.html", "Compost › What goes in"),
    (
        "how often should the pile be turned",
        "compost.html",
        "Compost › Turning the pile",
    ),
    ("padlock code for the shed", "tools/shed.txt", "lines 1–7"),
    ("wheelbarrow tyre", "tools/shed.txt", "lines 1–7"),
    ("how much is the membership fee", "membership.rst", "lines 1–17"),
    ("are bonfires allowed", "rules.pdf", "page 2"),
    ("are dogs allowed in the garden", "rules.pdf", "page 3"),
    ("gates open", "rules.pdf", "page 1"),
    ("seed swap", "events.md", "Events › Seed swap"),
    ("harvest festival marrow", "events.md", "Events › Harvest festival"),
    ("Margaret Okafor", "history.txt", "lines 1–18"),
    ("how many plots does the garden have today", "history.txt", "lines 20–26"),
]


@pytest.mark.parametrize(("question", "path", "location"), QUESTIONS)
async def test_each_question_finds_its_passage_first(
    index: SourceIndex, question: str, path: str, location: str
) -> None:
    """Each corpus question ranks its expected passage first, scores descending."""
    hits = await index.search(question)
    assert hits, question
    assert (hits[0].source, hits[0].path, hits[0].location) == (
        "garden",
        path,
        location,
    )
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.score > 0 for h in hits)


async def test_a_hit_has_its_text_title_and_a_snippet(index: SourceIndex) -> None:
    """A hit carries its document title, full passage text and a bolded snippet."""
    [hit] = await index.search("bonfires", limit=1)
    assert hit.title == "Willow Lane garden rules"
    assert hit.text == (
        "Fires and barbecues\n"
        "Bonfires are forbidden at all times: the smoke drifts into the houses.\n"
        "Diseased leaves are burnt in the brazier by the coordinator only.\n"
        "Small gas barbecues are allowed on the lawn at weekends."
    )
    assert "**Bonfires**" in hit.snippet


async def test_every_document_is_split_into_bounded_passages(
    index: SourceIndex,
) -> None:
    """Every corpus document is indexed and no passage exceeds `MAX_CHARS`."""
    assert await index.documents("garden") == DOCUMENTS
    hits = await index.search("the garden and a plot", limit=PASSAGES)
    assert all(len(h.text) <= MAX_CHARS for h in hits)


async def test_what_nobody_reads_on_a_page_is_not_indexed(index: SourceIndex) -> None:
    """Script, noscript, style and nav text of an HTML page is not searchable."""
    assert await index.search("zebraquartz") == []  # in <script> only
    assert await index.search("enable scripts map") == []  # <noscript>
    assert await index.search("font family serif") == []  # <style>
    assert all(h.path != "compost.html" for h in await index.search("Home"))  # <nav>


async def test_sources_narrow_a_search_and_unknown_ones_are_named(
    corpus: Path, tmp_path: Path
) -> None:
    """`sources` limits a search, and unknown source names are listed in the error."""
    other = tmp_path / "kitchen"
    other.mkdir()
    (other / "jam.md").write_text("# Jam\n\nBoil the plums with sugar.\n")
    index = await SourceIndex.open(":memory:", {"garden": corpus, "kitchen": other})
    try:
        await index.refresh_all()
        everywhere = await index.search("plums jam marrow", limit=3)
        assert {h.source for h in everywhere} == {"garden", "kitchen"}
        kitchen = await index.search("plums jam marrow", sources=["kitchen"])
        assert [(h.source, h.path) for h in kitchen] == [("kitchen", "jam.md")]
        with pytest.raises(UnknownSource) as caught:
            await index.search("jam", sources=["kitchen", "attic", "cellar"])
        assert str(caught.value) == (
            "unknown data source(s): attic, cellar; available: garden, kitchen"
        )
        assert caught.value.available == ("garden", "kitchen")
        with pytest.raises(UnknownSource):
            await index.refresh("attic")
    finally:
        await index.aclose()


async def test_nothing_changed_nothing_read(index: SourceIndex) -> None:
    """A refresh with no file changes counts all unchanged and reads nothing."""
    report = await index.refresh("garden")
    assert counts(report) == (0, 0, 0, 8, 0)
    assert (report.passages, report.refused) == (0, ())


async def test_a_touched_file_is_hashed_not_parsed_again(
    index: SourceIndex, corpus: Path
) -> None:
    """A file with a new mtime but the same content is read once and not re-indexed."""
    later(corpus / "pests.md")
    report = await index.refresh("garden")
    assert counts(report) == (0, 0, 0, 8, 1)
    assert report.passages == 0
    assert counts(await index.refresh("garden")) == (0, 0, 0, 8, 0)  # mtime kept


async def test_changes_of_every_kind_in_one_refresh(
    index: SourceIndex, corpus: Path
) -> None:
    """One refresh counts and applies an add, an edit, a removal and a mere touch."""
    later(corpus / "pests.md")  # touched
    events = corpus / "events.md"
    events.write_text(
        events.read_text() + "\nPumpkin carving\n---------------\n\n"
        "On Halloween we carve the pumpkins nobody claimed.\n"
    )
    later(events)  # changed
    (corpus / "history.txt").unlink()  # removed
    (corpus / "tools" / "seeds.md").write_text(
        "# Seed packets\n\nSeed packets live in the biscuit tin on the shelf.\n"
    )  # added

    report = await index.refresh("garden")

    assert counts(report) == (1, 1, 1, 6, 3)
    assert report.passages == 4 + 1  # events.md again, and seeds.md
    assert report.refused == ()
    found = await index.search("carve pumpkins")
    assert (found[0].path, found[0].location) == (
        "events.md",
        "Events › Pumpkin carving",
    )
    assert (await index.search("biscuit tin"))[0].path == "tools/seeds.md"
    assert await index.search("Margaret Okafor") == []
    documents = await index.documents("garden")
    assert "history.txt" not in documents
    assert documents["events.md"] == 4


async def test_a_file_that_is_now_refused_leaves_the_index(corpus: Path) -> None:
    """A file that grows past the size limit is refused and drops out of search."""
    limits = Limits(max_file_bytes=2000)
    index = await SourceIndex.open(":memory:", {"garden": corpus}, limits=limits)
    try:
        assert counts(await index.refresh("garden")) == (8, 0, 0, 0, 8)
        shed = corpus / "tools" / "shed.txt"
        shed.write_text(shed.read_text() * 6)  # 2,292 bytes
        report = await index.refresh("garden")
        assert counts(report) == (0, 0, 1, 7, 0)
        assert report.refused == (
            Problem(
                "tools/shed.txt",
                "too_large",
                "is 2,292 bytes, over the limit of 2,000 bytes",
            ),
        )
        assert await index.search("padlock") == []
    finally:
        await index.aclose()


async def test_the_index_file_survives_a_restart(corpus: Path, tmp_path: Path) -> None:
    """A reopened index file needs no re-reading, and a renamed source's rows go."""
    path = tmp_path / "data" / "sources.db"
    path.parent.mkdir()
    first = await SourceIndex.open(path, {"garden": corpus})
    try:
        assert counts(await first.refresh("garden")) == (8, 0, 0, 0, 8)
    finally:
        await first.aclose()

    again = await SourceIndex.open(path, {"garden": corpus})
    try:
        assert counts(await again.refresh("garden")) == (0, 0, 0, 8, 0)
        assert (await again.search("bonfires"))[0].location == "page 2"
    finally:
        await again.aclose()

    renamed = await SourceIndex.open(path, {"allotment": corpus})
    try:  # the source "garden" is no longer configured: its documents go
        assert await renamed.search("bonfires") == []
        assert counts(await renamed.refresh("allotment")) == (8, 0, 0, 0, 8)
    finally:
        await renamed.aclose()


async def test_an_index_of_another_schema_is_rebuilt(
    corpus: Path, tmp_path: Path
) -> None:
    """An index file with an unknown schema is rebuilt and refilled from scratch."""
    import sqlite3

    path = tmp_path / "sources.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE documents (whatever TEXT)")
        db.execute("INSERT INTO documents VALUES ('old')")
    db.close()
    index = await SourceIndex.open(path, {"garden": corpus})
    try:
        assert counts(await index.refresh("garden")) == (8, 0, 0, 0, 8)
    finally:
        await index.aclose()


async def test_a_missing_folder_is_reported_and_the_index_kept(
    index: SourceIndex, corpus: Path
) -> None:
    """A vanished source folder is reported; its passages stay searchable."""
    await asyncio.to_thread(corpus.rename, corpus.with_name("moved"))
    report = await index.refresh("garden")
    assert counts(report) == (0, 0, 0, 0, 0)
    assert report.refused == (
        Problem(".", "unreadable", f"the folder {corpus} is missing"),
    )
    assert await index.problems("garden") == list(report.refused)
    assert (await index.search("bonfires"))[0].path == "rules.pdf"
