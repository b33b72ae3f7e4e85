"""Data sources in a live server: the plain retrieval ("RAG") mode, the
sources a run may search, citations on `chat_response`, a `finalize`
search ending the loop with its summary, the refusals, and the offline
model answering "what do my documents say about X" from the test corpus and
from the demo corpus shipped in demo/documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry
from tests.sources_corpus import copy_corpus
from tests.ws_client import Client, Frame, labels

ROOT = Path(__file__).resolve().parent.parent


async def with_sources(
    start_server: StartServer, tmp_path: Path, llm: Any = None, **settings: Any
) -> tuple[Harness, Client]:
    """A server whose data source `garden` is the test corpus, indexed."""
    corpus = copy_corpus(tmp_path / "garden")
    harness = await start_server(
        llm,
        test_registry() if llm is not None else None,
        data_sources=f"garden={corpus}",
        sources_index=":memory:",
        **settings,
    )
    await harness.server.app.state.library.ready.wait()
    client, ready = await harness.ready_client()
    assert ready["data_sources"] == ["garden"]
    return harness, client


def of_type(frames: list[Frame], kind: str) -> list[Frame]:
    return [f for f in frames if f["type"] == kind]


async def test_a_chat_naming_data_sources_is_a_retrieval_with_citations(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A chat with data sources searches, then one model call answers with citations."""
    llm = ScriptedLLM("The gates open at 7 [garden/rules.pdf, page 1].")
    harness, client = await with_sources(start_server, tmp_path, llm)
    frames = await client.chat(
        "When do the garden gates open?", selected_data_sources=["garden"]
    )
    assert labels(frames)[:2] == [
        "tool_start:search_documents",
        "tool_complete:search_documents",
    ]
    assert labels(frames)[-2:] == ["chat_response", "response_complete"]
    [start] = of_type(frames, "tool_start")
    assert start["arguments"] == {
        "query": "When do the garden gates open?",
        "sources": ["garden"],
    }
    [complete] = of_type(frames, "tool_complete")
    top = complete["result"]["passages"][0]
    assert (top["source"], top["path"], top["location"]) == (
        "garden",
        "rules.pdf",
        "page 1",
    )
    [answer] = of_type(frames, "chat_response")
    assert answer["message"] == "The gates open at 7 [garden/rules.pdf, page 1]."
    cited = answer["sources"]
    assert cited[0]["source"] == "garden" and cited[0]["path"] == "rules.pdf"
    assert "7 in the morning" in cited[0]["excerpt"]
    assert len({(c["path"], c["location"]) for c in cited}) == len(cited)

    # one model call: the answer, with the passages in the history before it
    [request] = llm.requests
    assert request.purpose == "chat" and request.tools == ()
    contents = [m.content or "" for m in request.messages]
    assert any("7 in the morning" in c for c in contents)
    assert "cite it in square brackets" in contents[-1]

    stored = await harness.service.store.runs(client_session(frames))
    assert [(r.strategy, r.status) for r in stored] == [("retrieve", "finished")]


def client_session(frames: list[Frame]) -> str:
    return str(frames[0]["session_id"])


async def test_nothing_found_says_so(start_server: StartServer, tmp_path: Path) -> None:
    """A search that finds nothing gives no citations and tells the model so."""
    llm = ScriptedLLM("Nothing in your documents mentions that.")
    _, client = await with_sources(start_server, tmp_path, llm)
    frames = await client.chat("xylophone quartz", selected_data_sources=["garden"])
    [complete] = of_type(frames, "tool_complete")
    assert complete["result"]["count"] == 0
    [answer] = of_type(frames, "chat_response")
    assert answer["sources"] == []
    assert "found nothing that matches" in (llm.requests[0].messages[-1].content or "")


async def test_an_agent_run_searches_only_the_chosen_sources(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Choosing data sources gives an agent run `search_documents`, its hits cited."""
    llm = ScriptedLLM(
        reason("Search.", tools=["search_documents"]),
        calls(("search_documents", {"query": "slugs"})),
        observe(should_continue=False, final="Beer traps [garden/pests.md]."),
    )
    _, client = await with_sources(start_server, tmp_path, llm)
    frames = await client.chat(
        "how do I deal with slugs?",
        agent_mode=True,
        selected_tools=["add"],
        selected_data_sources=["garden"],
    )
    # `search_documents` is offered because data sources were chosen
    [act] = [r for r in llm.requests if r.purpose == "act"]
    assert "search_documents" in [t.name for t in act.tools]
    [complete] = of_type(frames, "tool_complete")
    assert complete["result"]["sources"] == ["garden"]
    assert complete["result"]["passages"][0]["path"] == "pests.md"
    [answer] = of_type(frames, "chat_response")
    assert answer["sources"][0]["path"] == "pests.md"


async def test_a_finalize_search_ends_the_run_with_its_summary(
    start_server: StartServer, tmp_path: Path
) -> None:
    """With `search_finalize` a search's summary is the answer; no observe call runs."""
    llm = ScriptedLLM(
        reason("Search.", tools=["search_documents"]),
        calls(("search_documents", {"query": "bonfires", "limit": 1})),
    )
    _, client = await with_sources(start_server, tmp_path, llm, search_finalize=True)
    frames = await client.chat("are bonfires allowed?", agent_mode=True)
    [complete] = of_type(frames, "tool_complete")
    [answer] = of_type(frames, "chat_response")
    assert answer["message"] == complete["result"]["summary"]
    assert answer["message"].startswith("Found 1 passage in garden for “bonfires”:")
    assert "rules.pdf, page 2" in answer["message"]
    assert [r.purpose for r in llm.requests] == ["reason", "act"]  # no observe
    [completion] = [f for f in frames if f.get("update_type") == "agent_completion"]
    assert completion["reason"] == "finished"


async def test_bad_data_source_choices_are_refused(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Unknown or empty source choices, or any on a sourceless server, are refused."""
    llm = ScriptedLLM()
    _, client = await with_sources(start_server, tmp_path, llm)
    refusals = []
    for fields in (
        {"selected_data_sources": ["handbook"]},
        {"selected_data_sources": []},
        {"loop_strategy": "retrieve"},
    ):
        await client.send(type="chat", content="hi", **fields)
        refusals.append((await client.recv())["message"])
    assert refusals == [
        "unknown data source(s) in selected_data_sources: handbook; available: garden",
        "selected_data_sources is empty; leave it out to search them all",
        "unknown loop_strategy 'retrieve'; available: react, act, plan_execute, "
        "llm_only",
    ]
    assert llm.requests == []

    plain = await start_server(ScriptedLLM(), test_registry())
    other, _ = await plain.ready_client()
    await other.send(type="chat", content="hi", selected_data_sources=["garden"])
    assert (await other.recv())["message"] == (
        "this server has no data sources (LOOPWIRE_DATA_SOURCES); "
        "send the message without selected_data_sources"
    )


async def test_the_offline_model_answers_from_the_documents(
    start_server: StartServer, tmp_path: Path
) -> None:
    """The offline model searches the documents and cites the file that answers."""
    _, client = await with_sources(start_server, tmp_path)  # the offline model
    frames = await client.chat(
        "What do my documents say about watering?", agent_mode=True
    )
    [start] = of_type(frames, "tool_start")
    assert start["tool_name"] == "search_documents"
    [answer] = of_type(frames, "chat_response")
    assert "garden/watering.md" in answer["message"]
    assert answer["sources"][0]["path"] == "watering.md"


async def test_the_demo_corpus_answers_a_new_user(start_server: StartServer) -> None:
    """The shipped demo corpus indexes every file and answers a question on backups."""
    harness = await start_server(
        data_sources=f"demo={ROOT / 'demo' / 'documents'}", sources_index=":memory:"
    )
    await harness.server.app.state.library.ready.wait()
    reports = harness.server.app.state.library.reports
    assert reports["demo"].refused == ()
    assert reports["demo"].added == len(
        list((ROOT / "demo" / "documents").rglob("*.*"))
    )
    client, _ = await harness.ready_client()
    frames = await client.chat(
        "What do my documents say about backups?", agent_mode=True
    )
    [answer] = of_type(frames, "chat_response")
    assert "demo/backups.md" in answer["message"], json.dumps(answer)


async def test_the_offline_model_answers_a_plain_retrieval(
    start_server: StartServer, tmp_path: Path
) -> None:
    """The offline model answers a plain retrieval citing the top passage's heading."""
    _, client = await with_sources(start_server, tmp_path)  # the offline model
    frames = await client.chat(
        "how do I keep slugs away?", selected_tools=[], selected_data_sources=["garden"]
    )
    assert labels(frames)[0] == "tool_start:search_documents"
    [answer] = of_type(frames, "chat_response")
    assert answer["message"].startswith(
        "According to **garden/pests.md, Pests and diseases › Slugs**:"  # noqa: RUF001
    )
    assert answer["sources"][0]["path"] == "pests.md"
