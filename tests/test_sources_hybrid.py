"""Hybrid ranking: passages and queries embedded through an OpenAI-compatible
`/v1/embeddings` endpoint (the fake server, over real HTTP), BM25 and cosine
rankings fused by reciprocal rank; the calls the server got are checked,
and a failing endpoint costs only the vectors."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.errors import LLMError
from backend.llm.openai_compat.embedder import OpenAIEmbedder
from backend.sources import open_sources
from backend.sources.documents import Problem
from backend.sources.index import SourceIndex
from backend.sources.ranking import RRF_K
from tests.conftest import make_settings
from tests.fake_openai import ErrorReply, FakeOpenAIServer

MODEL = "fake-embed-1"
DOCUMENTS = {
    "car.md": "# Car\n\nThe car needs new tyres before the winter.\n",
    "kitchen.md": "# Kitchen\n\nThe oven gets cleaned on Fridays.\n",
    "clinic.md": "# Clinic\n\nThe doctor sees patients on Tuesdays.\n",
}
TEXTS = [  # the title and path, the heading path (here the title), the text
    "Car\ncar.md\n\nThe car needs new tyres before the winter.",
    "Clinic\nclinic.md\n\nThe doctor sees patients on Tuesdays.",
    "Kitchen\nkitchen.md\n\nThe oven gets cleaned on Fridays.",
]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text)
    return folder


def embedder(server: FakeOpenAIServer, **options: int) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        model=MODEL,
        base_url=server.base_url,
        api_key="sk-embed",
        batch_size=options.get("batch_size", 2),
        max_retries=options.get("max_retries", 0),
    )


@pytest.fixture
async def hybrid(
    folder: Path, fake_openai: FakeOpenAIServer
) -> AsyncIterator[SourceIndex]:
    index = await SourceIndex.open(
        ":memory:", {"notes": folder}, embedder=embedder(fake_openai)
    )
    try:
        yield index
    finally:
        await index.aclose()


async def test_passages_are_embedded_in_batches_at_refresh(
    hybrid: SourceIndex, fake_openai: FakeOpenAIServer
) -> None:
    """A refresh embeds new passages in batches and re-embeds nothing unchanged."""
    report = await hybrid.refresh("notes")
    assert (report.added, report.passages, report.embedded) == (3, 3, 3)
    assert fake_openai.embedding_requests == [
        {"model": MODEL, "input": TEXTS[:2], "encoding_format": "float"},
        {"model": MODEL, "input": TEXTS[2:], "encoding_format": "float"},
    ]
    assert fake_openai.requests == []  # no chat completion was asked for
    again = await hybrid.refresh("notes")
    assert (again.unchanged, again.embedded) == (3, 0)
    assert len(fake_openai.embedding_requests) == 2


async def test_a_synonym_only_the_vectors_know_is_found(
    hybrid: SourceIndex, folder: Path, fake_openai: FakeOpenAIServer
) -> None:
    """A query that matches only in meaning is found through the vectors, not BM25."""
    await hybrid.refresh("notes")
    [hit] = await hybrid.search("automobile", limit=1)
    assert (hit.path, hit.location) == ("car.md", "Car")
    assert hit.snippet == "The car needs new tyres before the winter."
    assert hit.score == round(1 / (RRF_K + 1), 6)  # first by cosine, no BM25 match
    assert fake_openai.embedding_requests[-1] == {
        "model": MODEL,
        "input": ["automobile"],
        "encoding_format": "float",
    }
    lexical = await SourceIndex.open(":memory:", {"notes": folder})
    try:
        await lexical.refresh("notes")
        assert await lexical.search("automobile") == []
    finally:
        await lexical.aclose()


async def test_both_rankings_agreeing_add_up(hybrid: SourceIndex) -> None:
    """A passage first in both BM25 and cosine rankings gets both rank scores."""
    await hybrid.refresh("notes")
    hits = await hybrid.search("physician Tuesdays", limit=3)
    assert hits[0].path == "clinic.md"
    assert hits[0].score == round(2 / (RRF_K + 1), 6)  # first in both
    assert "**Tuesdays**" in hits[0].snippet
    assert all(h.path != "kitchen.md" for h in hits)  # in neither ranking


async def test_a_failing_endpoint_costs_only_the_vectors(
    hybrid: SourceIndex,
    fake_openai: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failing embeddings endpoint falls back to BM25; a later refresh embeds."""
    fake_openai.fail_embeddings(ErrorReply(503, "overloaded"))
    report = await hybrid.refresh("notes")
    assert (report.added, report.embedded) == (3, 0)
    assert report.refused == (
        Problem(
            ".",
            "embeddings",
            "3 passages could not be embedded (the embeddings server answered "
            "HTTP 503); BM25 alone ranks them until a refresh embeds them",
        ),
    )
    fake_openai.fail_embeddings(ErrorReply(500, "down"))
    with caplog.at_level(logging.WARNING, logger="backend.sources.index"):
        hits = await hybrid.search("doctor")
    assert [h.path for h in hits] == ["clinic.md"]  # BM25 alone
    assert "search without embeddings this time" in caplog.text
    retried = await hybrid.refresh("notes")
    assert (retried.unchanged, retried.embedded, retried.refused) == (3, 3, ())


async def test_the_embedder_reports_what_went_wrong(
    fake_openai: FakeOpenAIServer,
) -> None:
    """The embedder embeds a blank as zeros and names HTTP and connection failures."""
    client = embedder(fake_openai, batch_size=10)
    try:
        vectors = await client.embed(["car", "automobile", ""])
        assert vectors[0] == vectors[1]
        assert vectors[2] == [0.0] * len(vectors[0])
        fake_openai.fail_embeddings(ErrorReply(401, "bad key"))
        with pytest.raises(
            LLMError, match=r"^the embeddings server answered HTTP 401$"
        ):
            await client.embed(["x"])
    finally:
        await client.aclose()
    unreachable = OpenAIEmbedder(
        model=MODEL, base_url="http://127.0.0.1:9/v1", max_retries=0
    )
    try:
        with pytest.raises(
            LLMError, match=r"^the embeddings server could not be reached$"
        ):
            await unreachable.embed(["x"])
    finally:
        await unreachable.aclose()


async def test_settings_turn_hybrid_ranking_on(
    folder: Path, fake_openai: FakeOpenAIServer
) -> None:
    """Setting an embeddings model makes the configured sources rank hybrid."""
    settings = make_settings(
        data_sources=f"notes={folder}",
        sources_index=":memory:",
        embeddings_model=MODEL,
        llm_base_url=fake_openai.base_url,
        llm_api_key="sk-embed",
        llm_max_retries=0,
    )
    sources = await open_sources(settings)
    assert sources is not None
    try:
        assert sources.index.hybrid
        [report] = await sources.refresh_all()
        assert report.embedded == 3
        assert [h.path for h in await sources.search("vehicle")] == ["car.md"]
        assert [r["model"] for r in fake_openai.embedding_requests] == [MODEL] * 2
    finally:
        await sources.aclose()
