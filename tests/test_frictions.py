"""What tripped a new user (issue #29), each fixed and held by a test that
failed before the fix. Browser-only ones are in tests/browser/."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect

from backend.app import create_app
from backend.sources.links import document_url
from backend.store.migrate import head
from backend.store.sql import SqlStore
from tests.conftest import Harness, StartServer, make_settings
from tests.fakes import ScriptedLLM, calls, reason, test_registry
from tests.live_server import serving
from tests.test_retrieval import with_sources
from tests.ws_client import Client, labels


async def test_stop_after_step_keeps_the_waiting_question(
    start_server: StartServer,
) -> None:
    """ "Stop after this step" while a question waits leaves it answerable:
    the answer ends the step (the model gets it), then the run stops."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
    )
    harness = await start_server(llm, test_registry())
    client, ready = await harness.ready_client()
    await client.send(type="chat", content="convert 10 miles", agent_mode=True)
    question = (await client.until_label("agent_request_input"))[-1]
    await client.send(type="agent_control", action="stop_after_step")
    await client.send(
        type="agent_user_input", content="km", question_id=question["question_id"]
    )
    rest = await client.run()
    assert labels(rest) == ["agent_stopped", "agent_completion", "response_complete"]
    assert rest[1]["reason"] == "stopped"
    assert llm.purposes == ["reason", "act"]  # no observe: stopped after the step
    url = harness.server.url(f"/api/conversations/{ready['session_id']}")
    async with httpx.AsyncClient() as http:
        kept = (await http.get(url)).json()["messages"]
    assert [m["content"] for m in kept if m["role"] == "tool"] == ["km"]


async def titles(harness: Harness) -> list[tuple[str, str]]:
    """The caller's conversations as the list shows them: (id, title), in order."""
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        page = (await http.get("/api/conversations")).json()
    return [(c["id"], c["title"]) for c in page["items"]]


async def attach(harness: Harness, conversation: str, content: bytes) -> None:
    """Upload `shopping.txt` holding `content` to `conversation`."""
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        uploaded = await http.post(
            f"/api/conversations/{conversation}/files",
            files={"file": ("shopping.txt", content, "text/plain")},
        )
    assert uploaded.status_code == 201, uploaded.text


async def test_a_conversation_started_by_a_file_takes_its_first_message_as_title(
    start_server: StartServer,
) -> None:
    """A file attached first stores an untitled conversation; the first
    message then titles it, as it titles any conversation."""
    harness = await start_server(ScriptedLLM("It lists milk."), test_registry())
    client, ready = await harness.ready_client()
    conversation = ready["session_id"]
    await attach(harness, conversation, b"milk\n")
    assert await titles(harness) == [(conversation, "")]
    await client.chat("what does shopping.txt say?")
    assert await titles(harness) == [(conversation, "what does shopping.txt say?")]


async def test_editing_the_first_message_retitles_unless_renamed(
    start_server: StartServer,
) -> None:
    """An edit of the first message changes the title it gave; a title the
    person chose stays through edits."""
    llm = ScriptedLLM("Paris.", "Rome.", "Madrid.")
    harness = await start_server(llm, test_registry())
    client, ready = await harness.ready_client()
    conversation = ready["session_id"]
    first = await client.chat("capital of France?")
    edited = await client.chat("capital of Italy?", replace_from=first[-1]["run_id"])
    assert await titles(harness) == [(conversation, "capital of Italy?")]
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        url = f"/api/conversations/{conversation}"
        assert (await http.patch(url, json={"title": "Capitals"})).status_code == 200
    await client.chat("capital of Spain?", replace_from=edited[-1]["run_id"])
    assert await titles(harness) == [(conversation, "Capitals")]


async def test_renaming_keeps_the_conversations_place(
    start_server: StartServer,
) -> None:
    """The list is ordered by activity: renaming an older conversation does
    not move it to the top."""
    harness = await start_server(ScriptedLLM("one", "two"), test_registry())
    older, first = await harness.ready_client()
    await older.chat("first question")
    newer, second = await harness.ready_client()
    await newer.chat("second question")
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        url = f"/api/conversations/{first['session_id']}"
        assert (await http.patch(url, json={"title": "Renamed"})).status_code == 200
    assert await titles(harness) == [
        (second["session_id"], "second question"),
        (first["session_id"], "Renamed"),
    ]


async def test_a_greeting_in_retrieval_mode_gets_a_greeting(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Agent off, tools none, documents on: "hi there" is small talk, not a
    question for the documents (the offline model said "I found nothing
    about 'hi there'")."""
    _, client = await with_sources(start_server, tmp_path)  # the offline model
    frames = await client.chat(
        "hi there", selected_tools=[], selected_data_sources=["garden"]
    )
    answer = next(f for f in frames if f["type"] == "chat_response")["message"]
    assert answer.startswith("Hello! I'm loopwire's built-in offline demo model.")
    assert "found nothing" not in answer


async def test_a_greeting_with_a_question_answers_the_question(
    start_server: StartServer,
) -> None:
    """ "Hello! What is the capital of France?" is the question, greeted: the
    offline model says it cannot answer it, naming it; "Hello! what is
    2+3*4" is worked out (both were a bare greeting before)."""
    harness = await start_server()  # the offline model, every tool
    client, _ = await harness.ready_client()
    capital = (await client.chat("Hello! What is the capital of France?"))[-2]
    assert capital["message"].startswith(
        "Hello! I'm loopwire's built-in offline demo model: simple rules, no "
        "network and no AI, so I can't answer “What is the capital of France?”."
    )
    sums = await client.chat("Hello! what is 2+3*4", selected_tools=["calculator"])
    assert labels(sums)[:2] == ["tool_start:calculator", "tool_complete:calculator"]
    assert "14" in sums[-2]["message"]


async def test_the_offline_model_reads_an_attached_file_by_name(
    start_server: StartServer,
) -> None:
    """ "what does shopping.txt say?" reads the attached file (by its name)
    and quotes it (the offline model said "I can't answer that one")."""
    harness = await start_server()
    client, ready = await harness.ready_client()
    conversation = ready["session_id"]
    await attach(harness, conversation, b"milk\neggs\n")
    assert (await client.recv())["type"] == "files_update"
    frames = await client.chat(
        "what does shopping.txt say?", selected_tools=["read_file", "calculator"]
    )
    assert labels(frames)[:2] == ["tool_start:read_file", "tool_complete:read_file"]
    assert frames[0]["arguments"] == {"file_id": "shopping.txt"}
    assert frames[-2]["message"] == "shopping.txt says:\n\n> milk\n> eggs"


async def test_a_citation_opens_its_document_and_quotes_whole_lines(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A citation carries the URL its document opens at (served as plain
    text, sandboxed); the quoted passage joins the file's hard line breaks
    (they cut sentences in the answer before)."""
    harness, client = await with_sources(start_server, tmp_path)
    frames = await client.chat(
        "how do I keep slugs away?", selected_tools=[], selected_data_sources=["garden"]
    )
    answer = next(f for f in frames if f["type"] == "chat_response")
    assert (
        "> Slugs eat seedlings overnight. Sink beer traps level with the soil and "
        "put copper tape around the strawberry bed. Never use slug pellets: "
        "hedgehogs visit the garden." in answer["message"]
    )
    url = answer["sources"][0]["url"]
    assert url == "/api/sources/garden/documents/pests.md"
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        opened = await http.get(url)
        missing = await http.get("/api/sources/garden/documents/nope.md")
        escape = await http.get("/api/sources/garden/documents/..%2F..%2Fetc%2Fpasswd")
        unknown = await http.get("/api/sources/attic/documents/pests.md")
    assert opened.status_code == 200
    assert opened.text == (tmp_path / "garden" / "pests.md").read_text()
    assert opened.headers["content-type"] == "text/plain; charset=utf-8"
    assert opened.headers["x-content-type-options"] == "nosniff"
    assert opened.headers["content-security-policy"] == "sandbox"
    assert [r.status_code for r in (missing, escape, unknown)] == [404, 404, 404]


def test_a_pdf_citation_opens_at_its_page() -> None:
    """A PDF passage's link names its page; names are escaped."""
    assert document_url("garden", "rules.pdf", "page 2") == (
        "/api/sources/garden/documents/rules.pdf#page=2"
    )
    assert document_url("my docs", "a b/c#d.md", "Intro") == (
        "/api/sources/my%20docs/documents/a%20b/c%23d.md"
    )


async def test_a_new_database_says_one_line_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`make run` on a fresh clone: the new database is one line of log, not
    Alembic's account of each migration (read as errors by a newcomer); a
    second start says nothing of it."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    for _ in range(2):
        store = SqlStore(url)
        with caplog.at_level(logging.INFO):  # as the server logs
            await store.open()
        await store.close()
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert [s for s in said if s[0].startswith("alembic")] == []
    assert [s for s in said if "schema" in s[2]] == [
        (
            "backend.store.migrate",
            logging.INFO,
            f"database schema created (revision {head()})",
        )
    ]


async def test_the_first_message_retitles_after_a_restart(tmp_path: Path) -> None:
    """The title the first message gave is known to the next server too: an
    edit of that message there retitles the conversation."""
    settings = make_settings(database_url=f"sqlite:///{tmp_path / 'titles.db'}")
    app = create_app(settings, llm=ScriptedLLM("Paris."), registry=test_registry())
    async with (
        serving(app, settings=settings) as server,
        connect(server.url("/ws", scheme="ws")) as connection,
    ):
        client = Client(connection)
        conversation = (await client.recv())["session_id"]
        first = await client.chat("capital of France?")
    app = create_app(settings, llm=ScriptedLLM("Rome."), registry=test_registry())
    query = f"/ws?session_id={conversation}&last_seq={first[-1]['seq']}"
    async with (
        serving(app, settings=settings) as server,
        connect(server.url(query, scheme="ws")) as connection,
    ):
        client = Client(connection)
        assert (await client.recv())["resumed"] is True
        await client.chat("capital of Italy?", replace_from=first[-1]["run_id"])
        async with httpx.AsyncClient(base_url=server.url("")) as http:
            listed = (await http.get("/api/conversations")).json()["items"]
    assert [(c["id"], c["title"]) for c in listed] == [
        (conversation, "capital of Italy?")
    ]
