"""`search_documents` and its configuration: arguments, results and their
bounds, the effect, `open_sources`, and a finalize search ending a run
with its summary."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from backend.cli import settings_problem
from backend.errors import ConfigError, ToolError
from backend.settings import Settings, parse_data_sources
from backend.sources import DataSources, open_sources
from backend.sources.tool import SearchDocumentsArgs, search_result, trimmed
from backend.tools.base import ToolContext, ToolEffect, ToolRegistry
from backend.tools.builtin import builtin_tools
from backend.tools.results import compact
from tests.conftest import StartServer, make_settings
from tests.sources_corpus import copy_corpus
from tests.ws_client import labels

CTX = ToolContext(session_id="s")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return copy_corpus(tmp_path / "garden")


@pytest.fixture
async def sources(corpus: Path, tmp_path: Path) -> AsyncIterator[DataSources]:
    kitchen = tmp_path / "kitchen"
    kitchen.mkdir()
    (kitchen / "jam.md").write_text("# Jam\n\nBoil the plums with sugar.\n")
    settings = make_settings(
        data_sources=f"garden={corpus}, kitchen={kitchen}", sources_index=":memory:"
    )
    opened = await open_sources(settings)
    assert opened is not None
    try:
        await opened.refresh_all()
        yield opened
    finally:
        await opened.aclose()


async def call(data: DataSources, **arguments: Any) -> Any:
    tool = data.tool()
    return await tool(tool.args_model(**arguments), CTX)


async def test_a_search_returns_passages_and_a_summary(sources: DataSources) -> None:
    """A search returns ranked passages with locations and a quoted, trimmed summary."""
    result = await call(sources, query="are bonfires or dogs allowed?", limit=2)
    assert result == {
        "query": "are bonfires or dogs allowed?",
        "sources": ["garden", "kitchen"],
        "count": 2,
        "passages": [
            {
                "source": "garden",
                "path": "rules.pdf",
                "location": "page 2",
                "score": result["passages"][0]["score"],
                "text": "Fires and barbecues\n"
                "Bonfires are forbidden at all times: the smoke drifts into the "
                "houses.\nDiseased leaves are burnt in the brazier by the "
                "coordinator only.\nSmall gas barbecues are allowed on the lawn at "
                "weekends.",
            },
            {
                "source": "garden",
                "path": "rules.pdf",
                "location": "page 3",
                "score": result["passages"][1]["score"],
                "text": "Animals and children\nDogs are welcome if they are kept on "
                "a lead and away from the beds.\nChildren must be supervised by an "
                "adult at all times, near the pond above all.",
            },
        ],
        "summary": "Found 2 passages in garden for “are bonfires or dogs allowed?”:\n"
        "- garden/rules.pdf, page 2: “Fires and barbecues Bonfires are forbidden "
        "at all times: the smoke drifts into the houses. Diseased leaves are "
        "burnt in the brazier by the coordinator only…”\n"
        "- garden/rules.pdf, page 3: “Animals and children Dogs are welcome if "
        "they are kept on a lead and away from the beds. Children must be "
        "supervised by an adult at all times, near the pond…”",
    }
    first, second = (p["score"] for p in result["passages"])
    assert first > second > 0


async def test_sources_narrow_the_search_and_unknown_ones_are_listed(
    sources: DataSources,
) -> None:
    """Naming sources narrows the search; an unknown name fails, listing known ones."""
    result = await call(sources, query="plums", sources=["kitchen"])
    assert (result["sources"], result["count"]) == (["kitchen"], 1)
    assert result["summary"] == (
        "Found 1 passage in kitchen for “plums”:\n"
        "- kitchen/jam.md, Jam: “Boil the plums with sugar.”"
    )
    with pytest.raises(ToolError) as caught:
        await call(sources, query="plums", sources=["kitchen", "pantry"])
    assert str(caught.value) == (
        "unknown data source(s): pantry; available: garden, kitchen"
    )
    nothing = await call(sources, query="xylophone", sources=["garden"])
    assert (nothing["count"], nothing["passages"]) == (0, [])
    assert nothing["summary"] == "No passages in garden match “xylophone”."
    words = await call(sources, query="?!*")
    assert words["summary"] == "No passages in garden and kitchen match “?!*”."


async def test_the_conversation_s_chosen_sources_bound_the_search(
    sources: DataSources,
) -> None:
    """A conversation's chosen sources bound the search; asking past them is refused."""
    tool = sources.tool()
    kitchen_only = ToolContext(session_id="s", data_sources=("kitchen",))
    found = await tool(tool.args_model(query="plums marrow"), kitchen_only)
    assert (found["sources"], found["count"]) == (["kitchen"], 1)
    asked = tool.args_model(query="marrow", sources=["garden", "kitchen"])
    with pytest.raises(ToolError) as caught:
        await tool(asked, kitchen_only)
    assert str(caught.value) == (
        "data source(s) not chosen for this conversation: garden; chosen: kitchen"
    )
    both = ToolContext(session_id="s", data_sources=("garden", "kitchen"))
    narrowed = await tool(tool.args_model(query="marrow", sources=["garden"]), both)
    assert narrowed["sources"] == ["garden"]
    assert narrowed["passages"][0]["path"] == "events.md"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"query": ""}, "String should have at least 1 character"),
        ({"query": "x" * 501}, "String should have at most 500 characters"),
        ({"query": "x", "limit": 0}, "Input should be greater than or equal to 1"),
        ({"query": "x", "limit": 11}, "Input should be less than or equal to 10"),
        ({"query": "x", "sources": []}, "List should have at least 1 item"),
        ({"query": "x", "sources": "garden"}, "Input should be a valid list"),
        ({}, "Field required"),
    ],
)
def test_arguments_are_validated(arguments: dict[str, Any], error: str) -> None:
    """Empty or long queries, out-of-range limits and bad source lists are refused."""
    with pytest.raises(ValidationError, match=error):
        SearchDocumentsArgs(**arguments)
    assert SearchDocumentsArgs(query="x").limit == 5


async def test_the_tool_is_read_only_idempotent_and_finalizes_when_told(
    sources: DataSources, corpus: Path
) -> None:
    """The search tool is read-only, idempotent and citing; it finalizes if set to."""
    tool = sources.tool()
    assert tool.name == "search_documents"
    assert tool.effect == ToolEffect(read_only=True, idempotent=True)
    assert tool.cites
    assert (
        tool.summary
        == "Searches your documents (garden, kitchen) and cites what it finds."
    )
    assert "data sources: garden, kitchen" in tool.description
    schema = tool.spec().parameters
    assert schema["required"] == ["query"]
    assert set(schema["properties"]) == {"query", "sources", "limit"}
    settings = make_settings(
        data_sources=f"garden={corpus}", sources_index=":memory:", search_finalize=True
    )
    finalizing = await open_sources(settings)
    assert finalizing is not None
    try:
        assert finalizing.tool().effect.finalize
    finally:
        await finalizing.aclose()


async def test_ten_passages_fit_in_what_the_model_is_shown(
    sources: DataSources,
) -> None:
    """Ten passages fit the tool-result limit, so the model sees the JSON whole."""
    result = await call(sources, query="the garden plot beds shed water", limit=10)
    assert result["count"] == 10
    shown = compact(result, make_settings().tool_result_max_chars)
    assert json.loads(shown) == result  # nothing cut: the JSON stays whole
    long_hit = search_result("q", ["garden"], [])
    assert long_hit["summary"] == "No passages in garden match “q”."


def test_trimming_cuts_between_words() -> None:
    """Trimming ends at a word boundary with an ellipsis, or mid-word for one word."""
    assert trimmed("short", 10) == "short"
    assert trimmed("one two three four", 12) == "one two…"
    assert trimmed("abcdefghijklmnop", 6) == "abcde…"


# --- configuration --------------------------------------------------------------


def test_data_sources_parse_into_names_and_folders() -> None:
    """`name=path` entries parse into a folder map; source settings have defaults."""
    assert parse_data_sources("") == {}
    assert parse_data_sources(" handbook=/srv/docs/handbook , notes = ./notes ,") == {
        "handbook": Path("/srv/docs/handbook"),
        "notes": Path("notes"),
    }
    settings = make_settings(data_sources="a_b-1=/tmp")
    assert settings.data_source_folders == {"a_b-1": Path("/tmp")}
    assert settings.sources_index == "data/sources.db"
    assert settings.sources_max_file_bytes == 10 * 1024 * 1024
    assert settings.sources_max_files == 10_000
    assert (settings.embeddings_model, settings.search_finalize) == ("", False)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (
            "handbook",
            "LOOPWIRE_DATA_SOURCES entry 'handbook' must be name=path",
        ),
        ("notes=", "LOOPWIRE_DATA_SOURCES entry 'notes=' must be name=path"),
        (
            "Hand Book=/srv",
            "LOOPWIRE_DATA_SOURCES entry 'Hand Book=/srv': the name 'Hand Book' "
            "must be 1-40 of a-z, 0-9, _ and -",
        ),
        (
            f"{'x' * 41}=/srv",
            f"LOOPWIRE_DATA_SOURCES entry '{'x' * 41}=/srv': the name '{'x' * 41}' "
            "must be 1-40 of a-z, 0-9, _ and -",
        ),
        (
            "a=/one,a=/two",
            "LOOPWIRE_DATA_SOURCES entry 'a=/two': the name 'a' is used twice",
        ),
    ],
)
def test_a_bad_entry_is_a_config_error_naming_it(
    value: str, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad data source entry fails parsing and settings with the same message."""
    with pytest.raises(ConfigError) as caught:
        parse_data_sources(value)
    assert str(caught.value) == error
    monkeypatch.setenv("LOOPWIRE_DATA_SOURCES", value)
    with pytest.raises(ValidationError) as invalid:
        Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings_problem(invalid.value) == f"invalid setting {error}"


async def test_open_sources_checks_the_folders(tmp_path: Path) -> None:
    """No sources opens nothing; a missing folder, a file or embeddings are refused."""
    assert await open_sources(make_settings()) is None
    missing = tmp_path / "missing"
    with pytest.raises(ConfigError) as caught:
        await open_sources(make_settings(data_sources=f"docs={missing}"))
    assert str(caught.value) == (
        f"LOOPWIRE_DATA_SOURCES: the folder of 'docs', {missing}, does not exist"
    )
    afile = tmp_path / "file.md"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="is not a folder"):
        await open_sources(make_settings(data_sources=f"docs={afile}"))
    with pytest.raises(ConfigError, match="LOOPWIRE_EMBEDDINGS_MODEL is set"):
        await open_sources(
            make_settings(data_sources=f"docs={tmp_path}", embeddings_model="e5")
        )


async def test_the_index_file_is_made_where_configured(
    corpus: Path, tmp_path: Path
) -> None:
    """The sources index is written at the configured path and serves searches."""
    path = tmp_path / "state" / "sources.db"
    settings = make_settings(data_sources=f"garden={corpus}", sources_index=str(path))
    opened = await open_sources(settings)
    assert opened is not None
    try:
        assert opened.names == ("garden",)
        [report] = await opened.refresh_all()
        assert (report.added, report.refused) == (8, ())
        assert (await opened.search("bonfires"))[0].path == "rules.pdf"
        assert await opened.problems("garden") == []
    finally:
        await opened.aclose()
    assert path.is_file()


# --- a finalize search ends the run ------------------------------------------------


async def test_a_finalize_search_ends_the_run_with_its_summary(
    start_server: StartServer, corpus: Path
) -> None:
    """With finalize on, the first search ends the run with its summary as answer."""
    settings = make_settings(
        data_sources=f"garden={corpus}", sources_index=":memory:", search_finalize=True
    )
    opened = await open_sources(settings)
    assert opened is not None
    try:
        await opened.refresh_all()
        registry = ToolRegistry([*builtin_tools(), opened.tool()])
        harness = await start_server(registry=registry, llm_provider="offline")
        client, _ = await harness.ready_client()

        frames = await client.chat(
            "What do my documents say about bonfires?", agent_mode=True
        )

        assert labels(frames) == [
            "agent_start",
            "agent_turn_start",
            "agent_reason",
            "tool_start:search_documents",
            "tool_complete:search_documents",
            "chat_response",
            "agent_completion",
            "response_complete",
        ]
        assert frames[3]["arguments"] == {"query": "bonfires"}
        summary = frames[4]["result"]["summary"]
        assert frames[-3]["message"] == summary
        assert summary.startswith(
            "Found 1 passage in garden for “bonfires”:\n"
            "- garden/rules.pdf, page 2: “Fires and barbecues Bonfires are forbidden"
        )
        assert frames[-2]["reason"] == "finished"
    finally:
        await opened.aclose()
