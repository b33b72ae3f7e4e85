"""Export and import of a conversation (`transport/exports.py`,
`chat/transcript_export.py`, `chat/transcript_import.py`, `cli_exports.py`):
over a live server's API, across a restart, and through the CLI."""

from __future__ import annotations

import asyncio
import json
import time
from argparse import Namespace
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.chat.transcript_export import RESULT_CHARS, markdown
from backend.chat.transcript_import import NOT_RUN_NOTE, read_export
from backend.cli import conversations_command
from backend.store.records import ConversationRecord
from backend.transcript import Message, ToolCall
from backend.transport.exports import MAX_IMPORT_BYTES
from loopwire.exit_codes import ExitCode
from tests.conftest import Harness, StartServer, server_starter
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"
JSON = {"Content-Type": "application/json"}


def one_step() -> list[Any]:
    """An agent run that adds 2+3 with the `add` tool and answers."""
    return [
        reason("Add them.", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe("It is 5.", should_continue=False, final="2 + 3 = 5"),
    ]


def api(harness: Harness, token: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(base_url=harness.server.url(""), headers=headers)


async def agent_run(harness: Harness, token: str | None = None) -> str:
    """The one-step agent run in a new conversation; its id, stored."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client, ready = await harness.ready_client(**headers)
    await client.chat("what is 2+3?", agent_mode=True)
    await harness.service.flush_all()
    session_id: str = ready["session_id"]
    return session_id


async def exported(http: httpx.AsyncClient, cid: str, kind: str) -> httpx.Response:
    response = await http.get(
        f"/api/conversations/{cid}/export", params={"format": kind}
    )
    assert response.status_code == 200, response.text
    return response


ADDED = [
    {
        "role": "user",
        "content": "what is 2+3?",
        "tool_calls": [],
        "tool_call_id": None,
        "name": None,
        "meta": None,
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "name": "add", "arguments": '{"expression": "2+3"}'}
        ],
        "tool_call_id": None,
        "name": None,
        "meta": None,
    },
    {
        "role": "tool",
        "content": '{\n  "expression": "2+3",\n  "result": 5.0\n}',
        "tool_calls": [],
        "tool_call_id": "call_1",
        "name": "add",
        "meta": {"status": "ok", "error": None},
    },
    {
        "role": "assistant",
        "content": "2 + 3 = 5",
        "tool_calls": [],
        "tool_call_id": None,
        "name": None,
        "meta": None,
    },
]
"""The stored messages of `one_step`, as an export holds them (the call
ids of `tests.fakes.calls` count on per process: the test renumbers)."""


def unreasoned(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as `GET /api/conversations/{id}` shows them, without the
    `reasoning` the store never keeps (always null there)."""
    assert all(m["reasoning"] is None for m in messages)
    return [{k: v for k, v in m.items() if k != "reasoning"} for m in messages]


def renumbered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with their first call's id as `call_1` (see `ADDED`)."""
    text = json.dumps(messages)
    first = next(m for m in messages if m["tool_calls"])["tool_calls"][0]["id"]
    renamed: list[dict[str, Any]] = json.loads(text.replace(f'"{first}"', '"call_1"'))
    return renamed


def added_markdown(title: str, created_at: float, call_id: str) -> str:
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(created_at))
    return f"""# {title}

Started {started}.

## User

what is 2+3?

## Assistant

**Tool call** `add` ({call_id})

```json
{{
  "expression": "2+3"
}}
```

**Result** of `add` ({call_id}): ok

```
{{
  "expression": "2+3",
  "result": 5.0
}}
```

## Assistant

2 + 3 = 5
"""


async def test_an_agent_run_exports_as_json_and_markdown(
    start_server: StartServer,
) -> None:
    """An agent run's JSON export and Markdown transcript, exactly, as downloads."""
    harness = await start_server(ScriptedLLM(*one_step()), test_registry())
    cid = await agent_run(harness)
    async with api(harness) as http:
        upload = {"file": ("list.txt", b"milk\n", "text/plain")}
        sent = await http.post(f"/api/conversations/{cid}/files", files=upload)
        assert sent.status_code == 201, sent.text
        shown = (await http.get(f"/api/conversations/{cid}")).json()
        as_json = await exported(http, cid, "json")
        as_markdown = await exported(http, cid, "markdown")
        default = await http.get(f"/api/conversations/{cid}/export")
        bad = await http.get(f"/api/conversations/{cid}/export?format=pdf")

    document = as_json.json()
    (run,) = shown["runs"]
    assert document == {
        "loopwire_export": 1,
        "conversation": {
            key: shown[key] for key in ("id", "title", "created_at", "updated_at")
        },
        "messages": unreasoned(shown["messages"]),
        "runs": [
            {
                "id": run["id"],
                "strategy": "react",
                "status": "finished",
                "request": "what is 2+3?",
                "steps": 1,
                "usage": run["usage"],
                "started_at": run["started_at"],
                "ended_at": run["ended_at"],
            }
        ],
        "files": [{"name": "list.txt", "media_type": "text/plain", "size": 5}],
    }
    assert renumbered(document["messages"]) == ADDED
    assert as_json.headers["content-type"] == "application/json"
    assert as_json.headers["content-disposition"] == (
        'attachment; filename="what-is-2-3.json"'
    )
    assert default.content == as_json.content

    call_id = document["messages"][1]["tool_calls"][0]["id"]
    assert as_markdown.text == added_markdown(
        "what is 2+3?", shown["created_at"], call_id
    )
    assert as_markdown.headers["content-type"] == "text/markdown; charset=utf-8"
    assert as_markdown.headers["content-disposition"] == (
        'attachment; filename="what-is-2-3.md"'
    )
    assert (bad.status_code, bad.json()) == (
        400,
        {"error_type": "invalid_message", "message": "format must be json or markdown"},
    )


async def test_an_import_is_a_new_conversation_that_goes_on(
    start_server: StartServer, database_url: str
) -> None:
    """An import is a new conversation; its session goes on from its history."""
    llm = ScriptedLLM(*one_step(), "7")
    harness = await start_server(llm, test_registry(), database_url=database_url)
    cid = await agent_run(harness)
    async with api(harness) as http:
        document = (await exported(http, cid, "json")).json()
        answer = await http.post("/api/conversations/import", json=document)
        assert answer.status_code == 201, answer.text
        new = answer.json()
        assert answer.headers["location"] == f"/api/conversations/{new['id']}"
        stored = (await http.get(f"/api/conversations/{new['id']}")).json()
        listed = (await http.get("/api/conversations")).json()["items"]

    assert new == {
        "id": new["id"],
        "title": "what is 2+3?",
        "created_at": new["created_at"],
        "updated_at": new["created_at"],
        "origin": "import",
        "messages": 4,
        "closed_calls": [],
        "left_out": {"runs": 1, "files": []},
    }
    assert (
        new["id"] != cid and new["created_at"] >= document["conversation"]["updated_at"]
    )
    assert unreasoned(stored["messages"]) == document["messages"]
    assert stored["runs"] == []
    assert [item["id"] for item in listed] == [new["id"], cid]

    client, ready = await harness.ready_client(f"session_id={new['id']}")
    assert (ready["session_id"], ready["resumed"]) == (new["id"], True)
    frames = await client.chat("and 3+4?")
    assert [f["type"] for f in frames][-2:] == ["chat_response", "response_complete"]
    sent = llm.requests[-1].messages
    imported = [Message.model_validate(m) for m in document["messages"]]
    assert [m for m in sent if m.role != "system"] == [
        *imported,
        Message.user("and 3+4?"),
    ]


async def test_another_users_conversation_cannot_be_exported(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Bob gets a 404 for Alice's export; his import is his, not hers."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {ALICE}\nbob: {BOB}\n")
    tokens.chmod(0o600)
    harness = await start_server(
        ScriptedLLM(*one_step()), test_registry(), auth_tokens_file=tokens
    )
    cid = await agent_run(harness, ALICE)
    async with api(harness, ALICE) as alice, api(harness, BOB) as bob:
        document = (await exported(alice, cid, "json")).json()
        for kind in ("json", "markdown"):
            refused = await bob.get(f"/api/conversations/{cid}/export?format={kind}")
            assert (refused.status_code, refused.json()) == (
                404,
                {"error_type": "not_found", "message": f"no conversation {cid!r}"},
            )
        new = (await bob.post("/api/conversations/import", json=document)).json()
        bobs = (await bob.get("/api/conversations")).json()["items"]
        alices = (await alice.get("/api/conversations")).json()["items"]
        theirs = await alice.get(f"/api/conversations/{new['id']}/export")
    assert [c["id"] for c in bobs] == [new["id"]]
    assert [c["id"] for c in alices] == [cid]
    assert theirs.status_code == 404


def valid() -> dict[str, Any]:
    """A small export that imports: a question, a call, its result, an answer."""
    return {
        "loopwire_export": 1,
        "conversation": {"id": "x", "title": "Sums", "created_at": 1.0},
        "messages": json.loads(json.dumps(ADDED)),
        "runs": [],
        "files": [],
    }


def changed(path: str, value: Any) -> dict[str, Any]:
    """`valid()` with the value at dotted `path` replaced (`None`: removed)."""
    document = valid()
    *parents, last = path.split(".")
    where: Any = document
    for part in parents:
        where = where[int(part)] if isinstance(where, list) else where[part]
    key: Any = int(last) if isinstance(where, list) else last
    if value is None:
        del where[key]
    else:
        where[key] = value
    return document


BAD_IMPORTS = [
    pytest.param(
        [1, 2],
        "body",
        "a loopwire export is a JSON object",
        id="not-an-object",
    ),
    pytest.param(
        changed("loopwire_export", None),
        "loopwire_export",
        "missing: is this a loopwire export?",
        id="no-version",
    ),
    pytest.param(
        changed("loopwire_export", 2),
        "loopwire_export",
        "version 2; this server reads version 1",
        id="wrong-version",
    ),
    pytest.param(
        changed("messages.0.colour", "red"),
        "messages.0.colour",
        "unknown field",
        id="unknown-field",
    ),
    pytest.param(
        changed("messages.0.role", "robot"),
        "messages.0.role",
        "Input should be 'system', 'user', 'assistant' or 'tool'",
        id="unknown-role",
    ),
    pytest.param(
        changed("messages.0.content", None),
        "messages.0",
        "a user message needs content",
        id="user-without-content",
    ),
    pytest.param(
        changed("messages.2.tool_call_id", "call_9"),
        "messages.2",
        "a result for call 'call_9', which no earlier message made "
        "(or it has a result already)",
        id="result-without-its-call",
    ),
    pytest.param(
        changed("messages.2.name", "subtract"),
        "messages.2",
        "the result of a 'add' call names 'subtract'",
        id="result-of-another-tool",
    ),
    pytest.param(
        changed("messages.2", ADDED[3]),
        "messages.2",
        "comes before the result of call 'call_1'",
        id="answer-before-the-result",
    ),
]


@pytest.mark.parametrize(("document", "field", "problem"), BAD_IMPORTS)
async def test_a_bad_import_is_refused_with_its_reason_and_creates_nothing(
    start_server: StartServer, document: Any, field: str, problem: str
) -> None:
    """A bad export is a 400 naming the field and the problem; nothing is created."""
    harness = await start_server(ScriptedLLM())
    async with api(harness) as http:
        refused = await http.post("/api/conversations/import", json=document)
        listed = (await http.get("/api/conversations")).json()
    assert (refused.status_code, refused.json()) == (
        400,
        {
            "error_type": "invalid_message",
            "message": f"invalid export: {field}: {problem}",
            "fields": [{"field": field, "problem": problem}],
        },
    )
    assert listed == {"items": [], "next": None}


async def test_an_import_past_the_limit_or_not_json_is_refused(
    start_server: StartServer,
) -> None:
    """Over 5 MiB is a 413, a body that is not JSON a 415 or 400; nothing is created."""
    harness = await start_server(ScriptedLLM())
    huge = json.dumps({**valid(), "runs": ["x" * MAX_IMPORT_BYTES]})
    async with api(harness) as http:
        too_big = await http.post(
            "/api/conversations/import", content=huge, headers=JSON
        )
        as_text = await http.post("/api/conversations/import", content=b"{}")
        broken = await http.post(
            "/api/conversations/import", content=b"{", headers=JSON
        )
        listed = (await http.get("/api/conversations")).json()
    assert too_big.status_code == 413
    assert too_big.json()["message"] == (
        f"body is {len(huge)} bytes; the limit is {MAX_IMPORT_BYTES}"
    )
    assert as_text.status_code == 415
    assert broken.status_code == 400
    assert broken.json()["message"].startswith("invalid JSON: ")
    assert listed == {"items": [], "next": None}


async def test_exports_are_the_same_after_a_restart(tmp_path: Path) -> None:
    """A restarted server on the same SQLite file exports byte for byte as before."""
    url = f"sqlite:///{tmp_path / 'loopwire.db'}"
    before: dict[tuple[str, str], bytes] = {}
    async with AsyncExitStack() as stack:
        start = server_starter(stack)
        harness = await start(
            ScriptedLLM(*one_step()), test_registry(), database_url=url
        )
        cid = await agent_run(harness)
        async with api(harness) as http:
            document = (await exported(http, cid, "json")).json()
            answer = await http.post("/api/conversations/import", json=document)
            ids = [cid, answer.json()["id"]]
            for one in ids:
                for kind in ("json", "markdown"):
                    before[one, kind] = (await exported(http, one, kind)).content
    async with AsyncExitStack() as stack:
        harness = await server_starter(stack)(ScriptedLLM(), database_url=url)
        async with api(harness) as http:
            after = {key: (await exported(http, *key)).content for key in before}
    assert after == before
    assert len(before) == 4


async def test_an_import_says_what_it_left_out(start_server: StartServer) -> None:
    """Runs and files are left out and named; an untitled export gets a title."""
    harness = await start_server(ScriptedLLM())
    document = {
        **changed("conversation.title", ""),
        "runs": [{"id": "r1"}],
        "files": [{"name": "list.txt", "media_type": "text/plain", "size": 5}],
    }
    async with api(harness) as http:
        answer = await http.post("/api/conversations/import", json=document)
        files = await http.get(f"/api/conversations/{answer.json()['id']}/files")
    assert answer.status_code == 201
    assert answer.json()["title"] == "Imported conversation"
    assert answer.json()["left_out"] == {"runs": 1, "files": ["list.txt"]}
    assert files.json() == {"items": []}


def test_a_markdown_transcript_fences_and_cuts_tool_results() -> None:
    """Long results are cut with a note; fences outgrow backticks inside."""
    record = ConversationRecord(
        id="c1", owner="ann", title="", created_at=0.0, updated_at=0.0
    )
    long = "x" * (RESULT_CHARS + 5)
    messages = [
        Message.user("show ```code```"),
        Message.assistant("Looking.", [ToolCall(id="a", name="read", arguments="{")]),
        Message.tool("a", "read", long, "failed", "too long"),
        Message.system("The notes changed."),
    ]
    assert markdown(record, messages) == (
        "# Untitled conversation\n\nStarted 1970-01-01 00:00 UTC.\n\n"
        "## User\n\nshow ```code```\n\n"
        "## Assistant\n\nLooking.\n\n"
        "**Tool call** `read` (a)\n\n```\n{\n```\n\n"
        f"**Result** of `read` (a): failed\n\n```\n{'x' * RESULT_CHARS}\n```\n\n"
        f"_(cut: the first 2,000 of {RESULT_CHARS + 5:,} characters)_\n\n"
        "## Note\n\nThe notes changed.\n"
    )


def test_calls_left_without_a_result_are_closed_on_import() -> None:
    """A call left without a result gets a `cancelled` one on import."""
    document = changed("messages.3", None)
    del document["messages"][2]
    imported = read_export(document)
    assert imported.closed_calls == ["call_1"]
    assert imported.messages[2:] == [
        Message.tool(
            "call_1",
            "add",
            NOT_RUN_NOTE,
            "cancelled",
            "the conversation was exported before this call had a result",
        )
    ]
    assert len(imported.messages) == 3


async def test_the_cli_exports_and_imports(
    start_server: StartServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI exports to a file and stdout, imports, and exits 1 or 2 on failures."""
    harness = await start_server(ScriptedLLM(*one_step()), test_registry())
    cid = await agent_run(harness)
    base = harness.server.url("/")

    def run(action: str, target: str | None, **extra: Any) -> int:
        values = {"format": None, "output": None, **extra}
        args = Namespace(url=base, token=None, limit=5, action=action, target=target)
        return conversations_command(Namespace(**vars(args), **values))

    saved = tmp_path / "sums.json"
    code = await asyncio.to_thread(run, "export", cid, format="json", output=saved)
    assert code == ExitCode.FINISHED
    async with api(harness) as http:
        assert saved.read_bytes() == (await exported(http, cid, "json")).content
        as_markdown = (await exported(http, cid, "markdown")).text
    capsys.readouterr()
    assert await asyncio.to_thread(run, "export", cid) == ExitCode.FINISHED
    assert capsys.readouterr().out == as_markdown

    assert await asyncio.to_thread(run, "import", str(saved)) == ExitCode.FINISHED
    (line, left_out) = capsys.readouterr().out.splitlines()
    new, title = line.split("  ")[:2]
    assert (title, left_out) == ("what is 2+3?", "not imported: 1 run records, 0 files")
    assert line == f"{new}  what is 2+3?  (4 messages)"
    async with api(harness) as http:
        copy = (await exported(http, new, "json")).json()
    assert copy["messages"] == json.loads(saved.read_text())["messages"]

    assert await asyncio.to_thread(run, "export", "f" * 32) == ExitCode.ERROR
    assert "404" in capsys.readouterr().err
    assert await asyncio.to_thread(run, "import", str(tmp_path / "nope")) == (
        ExitCode.USAGE
    )
    assert await asyncio.to_thread(run, "export", None) == ExitCode.USAGE
    assert await asyncio.to_thread(run, "list", "x") == ExitCode.USAGE
