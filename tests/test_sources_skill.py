"""What `search_documents` teaches the offline model: which requests ask
what the documents say (and which do not), the question a bare "search my
documents" asks, the answer worded from a result — and, end to end, the
offline model answering from the demo corpus shipped with the project,
citing the source and location."""

# ruff: noqa: RUF001 (locations are written with a guillemet)

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backend.llm.offline_skill import Call, Question, Reply
from backend.sources import DataSources, open_sources
from backend.sources.skill import SearchDocumentsSkill
from backend.tools.base import ToolRegistry
from backend.tools.builtin import builtin_tools
from backend.tools.notes import MemoryNotebook, note_tools
from tests.conftest import StartServer, make_settings
from tests.ws_client import labels

DEMO = Path(__file__).resolve().parent.parent / "demo" / "documents"
SKILL = SearchDocumentsSkill(("handbook", "release-notes"))

REQUESTS = [
    ("what do my documents say about backups?", {"query": "backups"}),
    ("What do my docs say on port 7070", {"query": "port 7070"}),
    (
        "What does the handbook say about resetting a forgotten password?",
        {"query": "resetting a forgotten password", "sources": ["handbook"]},
    ),
    ("please search my docs for port 7070", {"query": "port 7070"}),
    (
        "According to the handbook, how do I restore a backup?",
        {"query": "how do I restore a backup", "sources": ["handbook"]},
    ),
    (
        "according to my documents how many users can one server hold",
        {"query": "how many users can one server hold"},
    ),
    (
        "How do I turn on two-factor sign-in, according to the docs?",
        {"query": "How do I turn on two-factor sign-in"},
    ),
    ("find the rate limits in my documents", {"query": "the rate limits"}),
    ("look up keyboard shortcuts in the manual", {"query": "keyboard shortcuts"}),
    ("Do my documents mention PostgreSQL?", {"query": "PostgreSQL"}),
    (
        "what's in the release notes about importing?",
        {"query": "importing", "sources": ["release-notes"]},
    ),
    (
        "Can you check my documents for 'database is locked'?",
        {"query": "database is locked"},
    ),
    (
        "in my documents: what port does Kestrel use",
        {"query": "what port does Kestrel use"},
    ),
    (
        "what do our docs tell me about the browser extension",
        {"query": "the browser extension"},
    ),
    ("based on the knowledge base, is Kestrel free?", {"query": "is Kestrel free"}),
]


@pytest.mark.parametrize(("text", "arguments"), REQUESTS)
def test_requests_about_the_documents_become_searches(
    text: str, arguments: dict[str, Any]
) -> None:
    """A request about what the documents say becomes a search with query and source."""
    need = SKILL.match(text)
    assert isinstance(need, Call), text
    assert need.arguments == arguments


def test_the_goal_says_what_is_searched() -> None:
    """A search's goal names the query and where it looks: the documents or a source."""
    assert SKILL.match("what do my documents say about backups") == Call(
        {"query": "backups"}, "search your documents for “backups”"
    )
    named = SKILL.match("according to the handbook, what port?")
    assert named == Call(
        {"query": "what port", "sources": ["handbook"]},
        "search the handbook for “what port”",
    )


@pytest.mark.parametrize(
    "text",
    [
        "what is 2+2",
        "search for bonfires",
        "documents",
        "tell me about backups",
        "remember that my documents are in the attic",
        "convert 10 miles to km",
        "what do you remember?",
        "what does the notes say about backups",  # no source is called notes
        "what do my documents say about",
        "search my documents for ???",
    ],
)
def test_other_requests_are_not_searches(text: str) -> None:
    """Requests not about the documents, or with nothing to seek, match no search."""
    assert SKILL.match(text) is None


def test_a_bare_search_asks_what_to_look_for() -> None:
    """A search with no topic asks what to look for; the reply completes the call."""
    asked = SKILL.match("Search my documents")
    assert asked == Question(
        "What should I look for in your documents?",
        "what to look for in your documents",
        "search your documents",
    )
    assert SKILL.complete("Search my documents", "“nightly backups”") == Call(
        {"query": "nightly backups"}, "search your documents for “nightly backups”"
    )
    assert SKILL.complete("search my documents", " ?! ") is None
    assert SKILL.complete("what is 2+2", "backups") is None
    handbook = SKILL.match("please look through the handbook")
    assert isinstance(handbook, Question)
    assert handbook.question == "What should I look for in the handbook?"
    assert SKILL.complete("please look through the handbook", "ports") == Call(
        {"query": "ports", "sources": ["handbook"]}, "search the handbook for “ports”"
    )


def result(*passages: dict[str, Any]) -> dict[str, Any]:
    return {
        "query": "backups",
        "sources": ["handbook"],
        "count": len(passages),
        "passages": list(passages),
        "summary": "…",
    }


def passage(path: str, location: str, text: str) -> dict[str, Any]:
    return {
        "source": "handbook",
        "path": path,
        "location": location,
        "score": 1.0,
        "text": text,
    }


def test_the_answer_quotes_the_best_passage_and_cites_the_others() -> None:
    """The reply quotes the top passage and cites the rest; no passages says so."""
    found = result(
        passage(
            "backups.md", "Backups › Restoring", "Stop the server.\n\nThen restore."
        ),
        passage("faq.html", "FAQ", "Back up both."),
        passage("release-notes.txt", "lines 1–22", "2.3.0"),
    )
    call = Call({"query": "backups"}, "search your documents for “backups”")
    assert SKILL.reply(call, found) == Reply(
        "According to **handbook/backups.md, Backups › Restoring**:\n\n"
        "> Stop the server.\n>\n> Then restore.\n\n"
        "Also relevant: handbook/faq.html, FAQ; handbook/release-notes.txt, lines 1–22.",
        "The search_documents tool found 3 passages; the best is in "
        "handbook/backups.md, Backups › Restoring.",
    )
    assert SKILL.reply(call, result()) == Reply(
        "I found nothing about “backups” in the handbook.",
        "The search_documents tool found no passages for “backups”.",
    )
    assert SKILL.reply(call, {"passages": "?"}) is None
    assert SKILL.reply(call, result({"source": "handbook"})) is None
    assert SKILL.reply(call, "not a dict") is None


def test_a_long_passage_is_quoted_in_part() -> None:
    """A long top passage is quoted cut to about 500 characters, ending in `…`."""
    words = " ".join(["backup"] * 200)
    reply = SKILL.reply(
        Call({"query": "backups"}, "search"), result(passage("b.md", "B", words))
    )
    assert reply is not None
    quote = reply.text.split("\n\n")[1]
    assert quote.startswith("> backup backup")
    assert quote.endswith("backup…")
    assert len(quote) <= 2 + 500


# --- end to end: the offline model and the demo corpus ----------------------------


@pytest.fixture
async def demo() -> AsyncIterator[DataSources]:
    settings = make_settings(data_sources=f"handbook={DEMO}", sources_index=":memory:")
    sources = await open_sources(settings)
    assert sources is not None
    try:
        [report] = await sources.refresh_all()
        assert (report.added, report.refused) == (12, ())
        yield sources
    finally:
        await sources.aclose()


async def test_the_offline_model_answers_from_the_demo_corpus(
    start_server: StartServer, demo: DataSources
) -> None:
    """The offline model searches the demo handbook and answers citing the section."""
    registry = ToolRegistry(
        [*builtin_tools(), *note_tools(MemoryNotebook()), demo.tool()]
    )
    harness = await start_server(registry=registry, llm_provider="offline")
    client, ready = await harness.ready_client()
    assert "search_documents" in [tool["name"] for tool in ready["tools"]]

    frames = await client.chat(
        "What do my documents say about restoring a backup?", agent_mode=True
    )

    assert labels(frames) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:search_documents",
        "tool_complete:search_documents",
        "agent_observe",
        "chat_response",
        "agent_completion",
        "response_complete",
    ]
    assert frames[2]["content"] == (
        "I'll use the search_documents tool to search your documents for "
        "“restoring a backup”."
    )
    assert frames[3]["arguments"] == {"query": "restoring a backup"}
    answer = frames[-3]["message"]
    assert answer.startswith(
        "According to **handbook/backups.md, Backups › Restoring**:\n\n"
        "> Stop the server, then run `kestrel restore /path/to/kestrel-backup.tar.gz`."
    )
    assert "Also relevant: handbook/backups.md, Backups › " in answer
    assert frames[5]["control"]["observation"] == (
        "The search_documents tool found 5 passages; the best is in "
        "handbook/backups.md, Backups › Restoring."
    )

    named = await client.chat(
        "According to the handbook, what is the default port?", agent_mode=True
    )
    assert named[3]["arguments"] == {
        "query": "what is the default port",
        "sources": ["handbook"],
    }
    assert named[-3]["message"].startswith(
        "According to **handbook/configuration.md, Configuration › Network**:"
    )

    helped = await client.chat("what can you do?")
    assert (
        "- search your documents, with tools on — “what do my documents say about "
        "backups”" in helped[-2]["message"]
    )


PATHOLOGICAL = {
    "commas": ", " * 1000,
    "according to": "according to " * 160,
    "in my documents": "in my documents " * 125,
    "what do my documents say": "what do my documents say about " * 65,
    "search for in": "search for " * 100 + "x in " * 200,
    "commas then according": "x, " * 600 + "according to my documents",
    "find in the": "find " + "x in the " * 220 + "docs",
}


@pytest.mark.parametrize("name", PATHOLOGICAL)
def test_a_pathological_request_costs_milliseconds(name: str) -> None:
    """What the offline model reads of a request (2,000 characters) is
    matched in bounded time (the bound: 50x the worst measured)."""
    text = PATHOLOGICAL[name][:2000]
    started = time.thread_time()
    SKILL.match(text)
    SKILL.complete("search my documents", text)
    assert time.thread_time() - started < 0.1
