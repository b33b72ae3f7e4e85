"""Custom instructions: the user's own and a conversation's, kept in the
store, set over HTTP and sent after the fixed system prompt of every call."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import httpx

from backend.llm.base import LLMRequest
from tests.conftest import StartServer, server_starter
from tests.fakes import ScriptedLLM, test_registry
from tests.test_export_import import api, one_step

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789"
OWN, HERE = "Answer in French.", "Call me Ada."
BLOCK = (
    "\n\n<custom_instructions>\n"
    "The user wrote these instructions for every reply. Follow them, unless "
    "they ask you to break the rules above.\n\n"
    f"<for_all_conversations>\n{OWN}\n</for_all_conversations>\n\n"
    f"<for_this_conversation>\n{HERE}\n</for_this_conversation>\n"
    "</custom_instructions>"
)
"""What follows the fixed system prompt with both set."""


def systems(requests: list[LLMRequest]) -> list[tuple[str, str]]:
    """Each call's purpose and its first (system) message."""
    first = [request.messages[0] for request in requests]
    assert {message.role for message in first} == {"system"}
    return [(r.purpose, m.content) for r, m in zip(requests, first, strict=True)]


async def set_both(http: httpx.AsyncClient, conversation_id: str) -> None:
    own = await http.put("/api/me/instructions", json={"instructions": OWN})
    assert own.json() == {"instructions": OWN, "max_chars": 4000}
    here = await http.patch(
        f"/api/conversations/{conversation_id}", json={"instructions": HERE}
    )
    assert here.status_code == 200 and here.json()["instructions"] == HERE


async def test_every_call_of_a_react_run_follows_them(
    start_server: StartServer,
) -> None:
    """Reason, act and observe get the fixed system prompt, then the user's, then the conversation's."""
    llm = ScriptedLLM(*one_step(), *one_step())
    harness = await start_server(llm, test_registry())
    client, ready = await harness.ready_client()
    await client.chat("what is 2+3?", agent_mode=True)
    before = systems(llm.requests)
    async with api(harness) as http:
        await set_both(http, ready["session_id"])
    await client.chat("what is 2+3?", agent_mode=True)
    after = systems(llm.requests[3:])
    assert [purpose for purpose, _ in before] == ["reason", "act", "observe"]
    assert after == [(purpose, fixed + BLOCK) for purpose, fixed in before]


async def test_a_plain_chat_follows_them_and_empty_text_clears_them(
    start_server: StartServer,
) -> None:
    """A plain chat gets both; set empty, the next run gets the fixed prompt alone."""
    llm = ScriptedLLM("one", "deux", "three")
    harness = await start_server(llm)
    client, ready = await harness.ready_client()
    cid = ready["session_id"]
    await client.chat("hi")
    async with api(harness) as http:
        await set_both(http, cid)
        await client.chat("hi again")
        cleared = await http.put("/api/me/instructions", json={"instructions": " "})
        assert cleared.json() == {"instructions": "", "max_chars": 4000}
        gone = await http.patch(f"/api/conversations/{cid}", json={"instructions": ""})
        assert gone.json()["instructions"] == ""
        shown = (await http.get(f"/api/conversations/{cid}")).json()
        assert (shown["title"], shown["instructions"]) == ("hi", "")
    await client.chat("and again")
    (_, fixed), (_, both), (_, none) = systems(llm.requests)
    assert (both, none) == (fixed + BLOCK, fixed)


async def test_they_apply_after_a_restart_and_over_the_agent_api(
    tmp_path: Path,
) -> None:
    """A new server on the same SQLite file sends them, to a WebSocket run and an HTTP agent run."""
    url = f"sqlite:///{tmp_path / 'loopwire.db'}"
    async with AsyncExitStack() as stack:
        harness = await server_starter(stack)(ScriptedLLM("one"), database_url=url)
        client, ready = await harness.ready_client()
        cid = ready["session_id"]
        await client.chat("hi")
        seen = client.seen[-1]["seq"]
        async with api(harness) as http:
            await set_both(http, cid)
    llm = ScriptedLLM("deux", *one_step())
    async with AsyncExitStack() as stack:
        harness = await server_starter(stack)(llm, test_registry(), database_url=url)
        client, _ = await harness.ready_client(f"session_id={cid}&last_seq={seen}")
        await client.chat("hi again")
        async with api(harness) as http:
            shown = (await http.get(f"/api/conversations/{cid}")).json()
            assert shown["instructions"] == HERE
            body = {"query": "what is 2+3?", "conversation_id": cid, "stream": False}
            answer = await http.post("/api/agent", json=body, timeout=30)
            assert answer.status_code == 200, answer.text
    ran = systems(llm.requests)
    assert [purpose for purpose, _ in ran] == ["chat", "reason", "act", "observe"]
    assert all(system.endswith(BLOCK) for _, system in ran)


async def test_the_limit_is_refused_naming_it(start_server: StartServer) -> None:
    """Text over `instructions_max_chars` is a 400 naming the limit; nothing is kept."""
    harness = await start_server(ScriptedLLM("one"), instructions_max_chars=10)
    client, ready = await harness.ready_client()
    cid = ready["session_id"]
    await client.chat("hi")
    message = (
        "instructions are 11 characters; the limit is 10 "
        "(LOOPWIRE_INSTRUCTIONS_MAX_CHARS)"
    )
    refused = {"error_type": "invalid_message", "message": message}
    async with api(harness) as http:
        own = await http.put("/api/me/instructions", json={"instructions": "x" * 11})
        here = await http.patch(
            f"/api/conversations/{cid}", json={"instructions": "x" * 11, "title": "T"}
        )
        assert (own.status_code, own.json()) == (400, refused)
        assert (here.status_code, here.json()) == (400, refused)
        kept = (await http.get("/api/me/instructions")).json()
        assert kept == {"instructions": "", "max_chars": 10}
        shown = (await http.get(f"/api/conversations/{cid}")).json()
        assert (shown["title"], shown["instructions"]) == ("hi", "")


async def test_a_change_needs_a_title_or_instructions(
    start_server: StartServer,
) -> None:
    """A PATCH with neither is a 400; with both it renames and sets the instructions."""
    harness = await start_server(ScriptedLLM("one"))
    client, ready = await harness.ready_client()
    cid = ready["session_id"]
    await client.chat("hi")
    async with api(harness) as http:
        empty = await http.patch(f"/api/conversations/{cid}", json={})
        assert (empty.status_code, empty.json()["message"]) == (
            400,
            "give a title, instructions or both",
        )
        both = await http.patch(
            f"/api/conversations/{cid}",
            json={"title": "Greeting", "instructions": HERE},
        )
        assert (both.json()["title"], both.json()["instructions"]) == (
            "Greeting",
            HERE,
        )
        shown = (await http.get(f"/api/conversations/{cid}")).json()
        assert (shown["title"], shown["instructions"]) == ("Greeting", HERE)


async def test_they_are_each_users_own(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Another user's conversation is a 404, and each user sees only their own instructions."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {ALICE}\nbob: {BOB}\n")
    tokens.chmod(0o600)
    harness = await start_server(ScriptedLLM("one"), auth_tokens_file=tokens)
    client, ready = await harness.ready_client(Authorization=f"Bearer {ALICE}")
    cid = ready["session_id"]
    await client.chat("hi")
    async with api(harness, ALICE) as alice, api(harness, BOB) as bob:
        await set_both(alice, cid)
        theirs = await bob.patch(
            f"/api/conversations/{cid}", json={"instructions": "x"}
        )
        assert (theirs.status_code, theirs.json()["error_type"]) == (404, "not_found")
        assert (await bob.get(f"/api/conversations/{cid}")).status_code == 404
        mine = (await bob.get("/api/me/instructions")).json()
        assert mine == {"instructions": "", "max_chars": 4000}
        shown = (await alice.get(f"/api/conversations/{cid}")).json()
        assert shown["instructions"] == HERE
