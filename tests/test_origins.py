"""Where a conversation came from (`backend/origins.py`): each kind of
client tags the conversations it starts, `GET /api/conversations?origin=`
lists those of the kinds asked for, and the Python client and the CLI ask
for them."""

from __future__ import annotations

import asyncio
import io
import time
import uuid
from argparse import Namespace
from typing import Any

import httpx
import pytest

from backend.cli import _chat, conversations_command
from backend.origins import ORIGINS, parse_origins, ws_origin
from backend.store.records import ConversationRecord
from loopwire import AgentClient, ClientError, conversations
from tests.conftest import Harness, StartServer
from tests.test_cli import _args

ALLOWED = ", ".join(ORIGINS)


async def serve(start_server: StartServer) -> Harness:
    return await start_server(llm_provider="offline")


def api(harness: Harness) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=harness.server.url(""), timeout=30)


async def ws_chat(harness: Harness, query: str, text: str) -> str:
    """A conversation started over a bare WebSocket with `query`; its id."""
    client, ready = await harness.ready_client(query)
    await client.chat(text)
    return str(ready["session_id"])


async def listed(http: httpx.AsyncClient, query: str = "") -> list[dict[str, Any]]:
    answer = await http.get(f"/api/conversations?limit=100{query}")
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


async def an_old_conversation(harness: Harness, title: str) -> str:
    """A conversation stored before origins were kept (`unknown`)."""
    now = time.time()
    record = ConversationRecord(
        id=uuid.uuid4().hex, owner="local", title=title, created_at=now, updated_at=now
    )
    await harness.service.store.create_conversation(record)
    return record.id


async def start_one_of_each(harness: Harness, http: httpx.AsyncClient) -> None:
    """One conversation per kind of client, each titled after its client."""
    ws = harness.server.url("/ws", "ws")
    await ws_chat(harness, "client=page", "hi from the page")
    await ws_chat(harness, "", "hi from a socket")
    await ws_chat(harness, "client=browser-extension", "hi from a stranger")
    async with AgentClient(ws) as client:
        await client.run("hi from python", agent=False)
    status = await _chat(
        _args(ws, "hi from the cli", agent=False), io.StringIO(), io.StringIO(), None
    )
    assert status == 0
    agent = await http.post(
        "/api/agent", json={"query": "hi from the api", "stream": False}
    )
    assert agent.status_code == 200, agent.text
    ask = {
        "model": "loopwire-react",
        "messages": [{"role": "user", "content": "hi from openai"}],
    }
    assert (await http.post("/v1/chat/completions", json=ask)).status_code == 200
    thread = {
        "threadId": str(uuid.uuid4()),
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "hi from ag-ui"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    async with http.stream("POST", "/api/ag-ui", json=thread) as response:
        assert response.status_code == 200
        await response.aread()
    parts = [{"type": "text", "text": "hi from the ai sdk"}]
    chat = {
        "id": "chat-1",
        "messages": [{"id": "u1", "role": "user", "parts": parts}],
        "trigger": "submit-message",
    }
    async with http.stream("POST", "/api/ui-stream", json=chat) as response:
        assert response.status_code == 200
        await response.aread()


async def test_each_kind_of_client_tags_the_conversations_it_starts(
    start_server: StartServer,
) -> None:
    """Every transport stores its kind with a new conversation; a socket
    that names no known client is `ws`, an import is `import`, one stored
    before origins is `unknown`; each listed item carries its origin."""
    harness = await serve(start_server)
    await an_old_conversation(harness, "from before")
    async with api(harness) as http:
        await start_one_of_each(harness, http)
        page = await listed(http)
        exported = await http.get(f"/api/conversations/{page[0]['id']}/export")
        imported = await http.post("/api/conversations/import", json=exported.json())
        assert imported.status_code == 201, imported.text
        items = await listed(http)

    assert imported.json()["origin"] == "import"
    assert [(item["title"], item["origin"]) for item in items] == [
        ("hi from the ai sdk", "import"),
        ("hi from the ai sdk", "ai-sdk"),
        ("hi from ag-ui", "ag-ui"),
        ("hi from openai", "openai"),
        ("hi from the api", "api"),
        ("hi from the cli", "cli"),
        ("hi from python", "python"),
        ("hi from a stranger", "ws"),
        ("hi from a socket", "ws"),
        ("hi from the page", "page"),
        ("from before", "unknown"),
    ]
    assert set(items[0]) == {"id", "title", "created_at", "updated_at", "origin"}


async def test_the_listing_keeps_the_origins_asked_for_across_pages(
    start_server: StartServer,
) -> None:
    """`?origin=page,unknown` lists only those, newest first, page by page
    (the cursor keeps the filter), and a search keeps them too."""
    harness = await serve(start_server)
    old = await an_old_conversation(harness, "milk from before")
    first = await ws_chat(harness, "client=page", "milk on the page")
    await ws_chat(harness, "client=cli", "milk from a script")
    second = await ws_chat(harness, "client=page", "more milk on the page")
    async with api(harness) as http:
        ids, cursor = [], None
        while True:
            query = "?limit=1&origin=page,unknown" + (
                f"&cursor={cursor}" if cursor else ""
            )
            answer = (await http.get(f"/api/conversations{query}")).json()
            ids += [item["id"] for item in answer["items"]]
            cursor = answer["next"]
            if cursor is None:
                break
        found = (await http.get("/api/conversations?q=milk&origin=cli")).json()
        scripts = await listed(http, "&origin=cli,python")

    assert ids == [second, first, old]
    assert [item["title"] for item in found["items"]] == ["milk from a script"]
    assert [item["title"] for item in scripts] == ["milk from a script"]


async def test_an_unknown_origin_is_refused_naming_those_allowed(
    start_server: StartServer,
) -> None:
    """An origin outside the set (or none) is a 400 that lists the set."""
    harness = await serve(start_server)
    async with api(harness) as http:
        bad = await http.get("/api/conversations?origin=page,robot")
        empty = await http.get("/api/conversations?origin=")
        searched = await http.get("/api/conversations?q=x&origin=robot")

    assert (bad.status_code, bad.json()) == (
        400,
        {
            "error_type": "invalid_message",
            "message": f"origin 'robot' is not one of: {ALLOWED}",
        },
    )
    assert (empty.status_code, empty.json()["message"]) == (
        400,
        f"origin '' is not one of: {ALLOWED}",
    )
    assert searched.status_code == 400


def test_a_socket_client_name_outside_the_set_is_ws() -> None:
    """Only the page, the Python client and the CLI name themselves over
    WebSocket; anything else (or nothing) is `ws`."""
    named = ["page", "python", "cli", "api", "import", "", None, "PAGE"]
    assert [ws_origin(name) for name in named] == [
        "page",
        "python",
        "cli",
        "ws",
        "ws",
        "ws",
        "ws",
        "ws",
    ]
    assert parse_origins(" page , unknown") == {"page", "unknown"}


async def test_the_python_client_and_the_cli_list_by_origin(
    start_server: StartServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """`conversations(origin=…)` (a name or several) and `loopwire
    conversations list --origin` list only those; a bad origin is the
    server's message."""
    harness = await serve(start_server)
    ws = harness.server.url("/ws", "ws")
    page = await ws_chat(harness, "client=page", "on the page")
    async with AgentClient(ws) as client:
        await client.run("from python", agent=False)
        mine = client.session_id
        from_client = await client.conversations(origin="python")
    both = await conversations(ws, origin=["page", "python"])
    with pytest.raises(ClientError) as refused:
        await conversations(harness.server.url("/"), origin="robot")
    listing = Namespace(url=harness.server.url("/"), limit=5, token=None, origin="page")
    assert await asyncio.to_thread(conversations_command, listing) == 0

    assert [item["id"] for item in from_client] == [mine]
    assert [(item["id"], item["origin"]) for item in both] == [
        (mine, "python"),
        (page, "page"),
    ]
    assert str(refused.value) == f"400: origin 'robot' is not one of: {ALLOWED}"
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{page}  ") and line.endswith("  on the page")
