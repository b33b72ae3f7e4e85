"""Read-only share links (`transport/shares.py`, `chat/share_snapshot.py`,
`store/sql_shares.py`): made by the owner, read by anyone with the link
(signed in or not), revoked, capped, turned off, and kept across a restart."""

from __future__ import annotations

import asyncio
import re
from argparse import Namespace
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.chat.share_snapshot import ARGUMENT_CHARS, snapshot
from backend.cli import conversations_command
from backend.store.records import FileRecord
from backend.transcript import Message, ToolCall
from backend.transport.shares import MAX_SHARES, SHARING_OFF
from loopwire import ClientError, share, shares, unshare
from loopwire.exit_codes import ExitCode
from tests.conftest import Harness, StartServer, server_starter
from tests.fakes import ScriptedLLM, test_registry
from tests.test_export_import import agent_run, api, one_step

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"
SHARE_ID = re.compile(r"[A-Za-z0-9_-]{43}")
SHOWN = [
    {"role": "user", "text": "what is 2+3?", "tools": []},
    {
        "role": "assistant",
        "text": "",
        "tools": [
            {"name": "add", "arguments": '{"expression": "2+3"}', "status": "ok"}
        ],
    },
    {"role": "assistant", "text": "2 + 3 = 5", "tools": []},
]
"""What a share of `one_step` shows."""
NOT_FOUND = {"error_type": "not_found", "message": "no such share"}


def tokens_file(tmp_path: Path) -> Path:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {ALICE}\nbob: {BOB}\n")
    tokens.chmod(0o600)
    return tokens


async def alices(start_server: StartServer, tmp_path: Path) -> tuple[Harness, str]:
    """A server with Alice and Bob, and Alice's stored one-step agent run."""
    harness = await start_server(
        ScriptedLLM(*one_step()),
        test_registry(),
        auth_tokens_file=tokens_file(tmp_path),
    )
    return harness, await agent_run(harness, ALICE)


async def shared(http: httpx.AsyncClient, cid: str) -> dict[str, Any]:
    answer = await http.post(f"/api/conversations/{cid}/shares")
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    assert answer.headers["location"] == f"/api/shares/{body['id']}"
    return body


async def test_a_share_is_read_without_signing_in_and_keeps_its_moment(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Alice shares; anyone reads the snapshot, which later messages do not change."""
    llm = ScriptedLLM(*one_step(), "7")
    harness = await start_server(
        llm, test_registry(), auth_tokens_file=tokens_file(tmp_path)
    )
    cid = await agent_run(harness, ALICE)
    async with api(harness, ALICE) as alice, api(harness) as anyone:
        link = await shared(alice, cid)
        client, _ = await harness.ready_client(
            f"session_id={cid}", Authorization=f"Bearer {ALICE}"
        )
        await client.chat("and 3+4?")
        await harness.service.flush_all()
        read = await anyone.get(f"/api/shares/{link['id']}")
        page = await anyone.get(f"/s/{link['id']}")
        second = await shared(alice, cid)
        listed = await alice.get(f"/api/conversations/{cid}/shares")
        unsigned = await anyone.post(f"/api/conversations/{cid}/shares")
    assert SHARE_ID.fullmatch(link["id"])
    assert link == {
        "id": link["id"],
        "url": harness.server.url(f"/s/{link['id']}"),
        "title": "what is 2+3?",
        "created_at": link["created_at"],
        "messages": 3,
    }
    assert read.status_code == 200
    assert read.json() == {
        "id": link["id"],
        "title": "what is 2+3?",
        "created_at": link["created_at"],
        "messages": SHOWN,
        "files": [],
    }
    assert read.headers["x-robots-tag"] == "noindex, nofollow"
    assert read.headers["referrer-policy"] == "no-referrer"
    assert page.status_code == 200 and "and 3+4?" not in page.text
    assert second["messages"] == 5 and second["id"] != link["id"]
    assert listed.json() == {"shares": [second, link]}
    assert unsigned.status_code == 401


async def test_the_page_shows_the_conversation_and_nothing_hidden(
    start_server: StartServer,
) -> None:
    """The page: title, messages, the tool by name, files named; no system prompt."""
    llm = ScriptedLLM(*one_step())
    harness = await start_server(llm, test_registry())
    cid = await agent_run(harness)
    async with api(harness) as http:
        upload = {"file": ("list.txt", b"milk and secrets\n", "text/plain")}
        sent = await http.post(f"/api/conversations/{cid}/files", files=upload)
        assert sent.status_code == 201, sent.text
        link = await shared(http, cid)
        page = await http.get(f"/s/{link['id']}")
        read = (await http.get(f"/api/shares/{link['id']}")).json()
    assert read["files"] == ["list.txt"]
    assert '<span class="share-file">list.txt</span>' in page.text
    assert "milk and secrets" not in page.text
    system = llm.requests[0].messages[0]
    assert system.role == "system" and system.content
    html = page.text
    assert page.status_code == 200
    assert "<title>what is 2+3? · loopwire</title>" in html
    assert '<h1 class="share-title" id="share-title">what is 2+3?</h1>' in html
    assert '<p class="bubble-text">what is 2+3?</p>' in html
    assert '<code class="share-tool-name">add</code>' in html
    assert (
        '<code class="share-tool-args">{&#34;expression&#34;: &#34;2+3&#34;}</code>'
        in html
    )
    assert "data-markdown>2 + 3 = 5</div>" in html
    assert system.content[:60] not in html
    assert "It is 5." not in html and "Add them." not in html
    headers = page.headers
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert headers["x-robots-tag"] == "noindex, nofollow"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["cache-control"] == "no-store"
    policy = headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy


async def test_revoking_is_the_owners_and_ends_the_link(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Bob can neither list nor revoke Alice's share; Alice's revoke makes it 404."""
    harness, cid = await alices(start_server, tmp_path)
    async with api(harness, ALICE) as alice, api(harness, BOB) as bob:
        link = await shared(alice, cid)
        theirs = await bob.get(f"/api/conversations/{cid}/shares")
        made = await bob.post(f"/api/conversations/{cid}/shares")
        revoked_by_bob = await bob.delete(f"/api/shares/{link['id']}")
        still = await bob.get(f"/api/shares/{link['id']}")
        revoked = await alice.delete(f"/api/shares/{link['id']}")
        again = await alice.delete(f"/api/shares/{link['id']}")
        gone = await bob.get(f"/api/shares/{link['id']}")
        page = await bob.get(f"/s/{link['id']}")
        listed = await alice.get(f"/api/conversations/{cid}/shares")
    refused = {"error_type": "not_found", "message": f"no conversation {cid!r}"}
    assert (theirs.status_code, theirs.json()) == (404, refused)
    assert (made.status_code, made.json()) == (404, refused)
    mine = {"error_type": "not_found", "message": "no such share of yours"}
    assert (revoked_by_bob.status_code, revoked_by_bob.json()) == (404, mine)
    assert still.status_code == 200
    assert (revoked.status_code, revoked.content) == (204, b"")
    assert (again.status_code, again.json()) == (404, mine)
    assert (gone.status_code, gone.json()) == (404, NOT_FOUND)
    assert page.status_code == 404
    assert '<h1 class="share-title">This link does not exist</h1>' in page.text
    assert listed.json() == {"shares": []}


async def test_malformed_and_unknown_ids_are_404(
    start_server: StartServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ids of any shape are a plain 404; only a well-formed one is looked up."""
    harness = await start_server(ScriptedLLM())
    store = harness.service.store
    looked_up: list[str] = []
    lookup = store.share

    async def share_spy(share_id: str) -> Any:
        looked_up.append(share_id)
        return await lookup(share_id)

    monkeypatch.setattr(store, "share", share_spy)
    ids = ("x", "a" * 42, "a" * 44, "a" * 42 + "!", "a" * 43)
    async with api(harness) as http:
        for share_id in ids:
            read = await http.get(f"/api/shares/{share_id}")
            assert (read.status_code, read.json()) == (404, NOT_FOUND)
            page = await http.get(f"/s/{share_id}")
            assert page.status_code == 404 and "This link does not exist" in page.text
    assert looked_up == ["a" * 43, "a" * 43]


async def test_a_conversation_has_at_most_the_cap(start_server: StartServer) -> None:
    """Past `MAX_SHARES` links a new one is refused, naming the cap."""
    harness = await start_server(ScriptedLLM(*one_step()), test_registry())
    cid = await agent_run(harness)
    async with api(harness) as http:
        for _ in range(MAX_SHARES):
            await shared(http, cid)
        over = await http.post(f"/api/conversations/{cid}/shares")
        listed = (await http.get(f"/api/conversations/{cid}/shares")).json()
    assert (over.status_code, over.json()) == (
        409,
        {
            "error_type": "too_many_shares",
            "message": f"a conversation has at most {MAX_SHARES} share links: "
            "stop sharing one of them first",
        },
    )
    assert len(listed["shares"]) == MAX_SHARES


async def test_sharing_off_refuses_every_route(start_server: StartServer) -> None:
    """With `sharing` off the owner's routes are 403 and the open ones 404."""
    harness = await start_server(
        ScriptedLLM(*one_step()), test_registry(), sharing=False
    )
    cid = await agent_run(harness)
    off = {"error_type": "sharing_off", "message": SHARING_OFF}
    async with api(harness) as http:
        made = await http.post(f"/api/conversations/{cid}/shares")
        listed = await http.get(f"/api/conversations/{cid}/shares")
        revoked = await http.delete(f"/api/shares/{'a' * 43}")
        read = await http.get(f"/api/shares/{'a' * 43}")
        page = await http.get(f"/s/{'a' * 43}")
    for answer in (made, listed, revoked):
        assert (answer.status_code, answer.json()) == (403, off)
    assert (read.status_code, read.json()) == (404, NOT_FOUND)
    assert page.status_code == 404


async def test_a_link_outlives_a_restart_not_its_conversation(tmp_path: Path) -> None:
    """A restarted server serves the link; deleting the conversation ends it."""
    url = f"sqlite:///{tmp_path / 'loopwire.db'}"
    async with AsyncExitStack() as stack:
        harness = await server_starter(stack)(
            ScriptedLLM(*one_step()), test_registry(), database_url=url
        )
        cid = await agent_run(harness)
        async with api(harness) as http:
            link = await shared(http, cid)
            before = (await http.get(f"/api/shares/{link['id']}")).json()
    async with AsyncExitStack() as stack:
        harness = await server_starter(stack)(ScriptedLLM(), database_url=url)
        async with api(harness) as http:
            after = await http.get(f"/api/shares/{link['id']}")
            page = await http.get(f"/s/{link['id']}")
            deleted = await http.delete(f"/api/conversations/{cid}")
            gone = await http.get(f"/api/shares/{link['id']}")
            gone_page = await http.get(f"/s/{link['id']}")
    assert (after.status_code, after.json()) == (200, before)
    assert before["messages"] == SHOWN
    assert page.status_code == 200 and "2 + 3 = 5" in page.text
    assert deleted.status_code in (200, 204)
    assert (gone.status_code, gone.json()) == (404, NOT_FOUND)
    assert gone_page.status_code == 404


async def test_the_link_is_under_the_public_url(start_server: StartServer) -> None:
    """With `public_url` set the link is built from it, not from the request."""
    harness = await start_server(
        ScriptedLLM(*one_step()), test_registry(), public_url="https://chat.example.com"
    )
    cid = await agent_run(harness)
    async with api(harness) as http:
        link = await shared(http, cid)
    assert link["url"] == f"https://chat.example.com/s/{link['id']}"


def test_a_snapshot_keeps_words_and_calls_not_outputs() -> None:
    """System prompts, tool outputs and empty turns are left out; files named."""
    long = '{"text": "' + "x" * 300 + '"}'
    messages = [
        Message.system("You are secret."),
        Message.user("hi"),
        Message.assistant(None, [ToolCall(id="c1", name="echo", arguments=long)]),
        Message.tool("c1", "echo", "the hidden output", status="failed"),
        Message.assistant(None, [ToolCall(id="c2", name="add", arguments="{}")]),
        Message.assistant(None),
        Message.assistant("done"),
    ]
    file = FileRecord(
        id="f1",
        conversation_id="c",
        name="list.txt",
        media_type="text/plain",
        size=5,
        sha256="0" * 64,
        origin="upload",
        created_at=0.0,
    )
    shot = snapshot(messages, [file]).model_dump(mode="json")
    cut = long[: ARGUMENT_CHARS - 1] + "\u2026"
    assert shot == {
        "messages": [
            {"role": "user", "text": "hi", "tools": []},
            {
                "role": "assistant",
                "text": "",
                "tools": [{"name": "echo", "arguments": cut, "status": "failed"}],
            },
            {
                "role": "assistant",
                "text": "",
                "tools": [{"name": "add", "arguments": "{}", "status": "not_run"}],
            },
            {"role": "assistant", "text": "done", "tools": []},
        ],
        "files": ["list.txt"],
    }


@pytest.mark.parametrize("path", ["/api/shares/{}", "/s/{}"])
async def test_reading_needs_no_sign_in_but_revoking_does(
    start_server: StartServer, tmp_path: Path, path: str
) -> None:
    """Reading a link is open with sign-in required; a DELETE without a user is 401."""
    harness = await start_server(ScriptedLLM(), auth_tokens_file=tokens_file(tmp_path))
    share_id = "a" * 43
    async with api(harness) as anyone:
        read = await anyone.get(path.format(share_id))
        revoke = await anyone.delete(f"/api/shares/{share_id}")
    assert read.status_code == 404
    assert revoke.status_code == 401


async def test_the_python_client_shares_lists_and_unshares(
    start_server: StartServer, tmp_path: Path
) -> None:
    """`share`, `shares`, `unshare` over the WebSocket URL; Bob's calls raise 404."""
    harness, cid = await alices(start_server, tmp_path)
    url = harness.server.url("/ws", scheme="ws")
    link = await share(url, cid, token=ALICE)
    assert link["url"] == harness.server.url(f"/s/{link['id']}")
    assert await shares(url, cid, token=ALICE) == [link]
    with pytest.raises(ClientError, match=f"^404: no conversation {cid!r}$"):
        await shares(url, cid, token=BOB)
    with pytest.raises(ClientError, match=r"^404: no such share of yours$"):
        await unshare(url, link["id"], token=BOB)
    await unshare(url, link["id"], token=ALICE)
    assert await shares(url, cid, token=ALICE) == []
    async with api(harness) as anyone:
        assert (await anyone.get(f"/api/shares/{link['id']}")).status_code == 404


async def test_the_cli_shares_lists_and_unshares(
    start_server: StartServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """`conversations share|shares|unshare` print the URL, the list, the stop; exit codes."""
    harness = await start_server(ScriptedLLM(*one_step()), test_registry())
    cid = await agent_run(harness)
    base = harness.server.url("/")

    def run(action: str, target: str | None) -> int:
        args = Namespace(url=base, token=None, limit=5, action=action, target=target)
        return conversations_command(args)

    capsys.readouterr()
    assert await asyncio.to_thread(run, "share", cid) == ExitCode.FINISHED
    (url,) = capsys.readouterr().out.splitlines()
    share_id = url.rsplit("/", 1)[1]
    assert url == harness.server.url(f"/s/{share_id}")
    assert await asyncio.to_thread(run, "shares", cid) == ExitCode.FINISHED
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{share_id}  ") and line.endswith(f"  {url}")
    assert await asyncio.to_thread(run, "unshare", share_id) == ExitCode.FINISHED
    assert capsys.readouterr().out == f"stopped sharing {share_id}\n"
    assert await asyncio.to_thread(run, "unshare", share_id) == ExitCode.ERROR
    assert capsys.readouterr().err == (
        "loopwire: unshare: 404: no such share of yours\n"
    )
    assert await asyncio.to_thread(run, "share", None) == ExitCode.USAGE
    assert capsys.readouterr().err == (
        "loopwire: conversations share: an ID from `conversations`?\n"
    )
