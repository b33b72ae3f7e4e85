"""Approval decisions beyond yes and no: approve with edited arguments
(checked against the tool's schema), and "always allow" remembered for the
conversation or the user, listed and revoked over HTTP."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

from backend.app import create_app
from backend.tools.base import Tool, ToolContext
from backend.tools.mcp import MCPArguments
from tests.conftest import Harness, StartServer, make_settings
from tests.fakes import Saver, ScriptedLLM, approval_registry, calls, observe, reason
from tests.live_server import serving
from tests.ws_client import Client, labels

END = ["chat_response", "agent_completion", "response_complete"]
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"


def saving(text: str, *after: Any) -> list[Any]:
    """A react step that saves `text` (a tool that asks first), then `after`."""
    return [reason("save it"), calls(("save", {"text": text})), *after]


def done(final: str = "Saved.") -> str:
    return observe(should_continue=False, final=final)


async def users(
    start_server: StartServer, tmp_path: Path, llm: ScriptedLLM, saver: Saver
) -> Harness:
    """A server with two signed-in users, alice and bob."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {ALICE}\nbob: {BOB}\n")
    tokens.chmod(0o600)
    return await start_server(llm, approval_registry(saver), auth_tokens_file=tokens)


async def as_user(harness: Harness, token: str, query: str = "") -> Client:
    client, ready = await harness.ready_client(query, Authorization=f"Bearer {token}")
    client.session_id = ready["session_id"]  # type: ignore[attr-defined]
    return client


def http(harness: Harness, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=harness.server.url(""),
        timeout=30,
        headers={"Authorization": f"Bearer {token}"},
    )


async def ask_to_save(client: Client, text: str = "milk") -> dict[str, Any]:
    await client.send(type="chat", content=f"remember {text}", agent_mode=True)
    return (await client.until_label("tool_approval_request:save"))[-1]


async def test_approved_with_edited_arguments(start_server: StartServer) -> None:
    """The call runs with the person's arguments; the frame and the model
    say they were changed."""
    saver, llm = Saver(), ScriptedLLM(*saving("milk", done()))
    harness = await start_server(llm, approval_registry(saver))
    client, _ = await harness.ready_client()
    asked = await ask_to_save(client)
    await client.send(
        type="tool_approval_response",
        tool_call_id=asked["tool_call_id"],
        approved=True,
        arguments={"text": "oat milk"},
    )
    rest = await client.run()
    assert labels(rest) == [
        "tool_approval_decided",
        "tool_complete:save",
        "agent_observe",
        *END,
    ]
    assert (rest[0]["arguments"], rest[0]["remember"]) == ({"text": "oat milk"}, None)
    assert saver.saved == ["oat milk"]
    (result,) = [m for m in llm.requests[2].messages if m.role == "tool"]
    assert result.content == (
        '{\n  "saved": "oat milk"\n}\n'
        '(The user changed the arguments before approving: {"text": "oat milk"})'
    )


async def test_edited_arguments_that_break_the_schema_are_refused(
    start_server: StartServer,
) -> None:
    """Arguments that do not fit are refused naming the field; the request
    still waits, and a later "yes" runs the call as the model asked."""
    saver = Saver()
    harness = await start_server(
        ScriptedLLM(*saving("milk", done())), approval_registry(saver)
    )
    client, _ = await harness.ready_client()
    asked = await ask_to_save(client)
    decision = {"type": "tool_approval_response", "tool_call_id": asked["tool_call_id"]}
    await client.send(**decision, approved=True, arguments={"text": 5})
    refused = await client.until_label("error:invalid_answer")
    assert refused[-1]["about"] == asked["tool_call_id"]
    assert refused[-1]["message"] == (
        "invalid arguments for save: text: Input should be a valid string; the "
        "approval still waits (send it again with arguments that fit, or as "
        "they were)"
    )
    await client.send(**decision, approved=False, arguments={"text": "x"})
    mixed = await client.until_label("error:invalid_message")
    assert "arguments and remember go with approved: true only" in mixed[-1]["message"]
    await client.send(**decision, approved=True)
    rest = await client.run()
    assert labels(rest) == ["tool_complete:save", "agent_observe", *END]
    assert saver.saved == ["milk"]


async def test_always_allow_in_this_conversation(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Remembered for the conversation: its later calls run without asking,
    in this run and the next; another conversation and another user still
    ask; revoked over HTTP, it asks again."""
    saver = Saver()
    llm = ScriptedLLM(
        *saving("milk", observe("Saved milk; eggs next.")),
        *saving("eggs", done()),
        *saving("bread", done()),
        *saving("tea"),
        *saving("jam", done("Saved jam.")),
    )
    harness = await users(start_server, tmp_path, llm, saver)
    alice = await as_user(harness, ALICE)
    asked = await ask_to_save(alice)
    await alice.send(
        type="tool_approval_response",
        tool_call_id=asked["tool_call_id"],
        approved=True,
        remember="conversation",
    )
    first = await alice.run()
    assert labels(first) == [
        "tool_approval_decided",
        "tool_complete:save",
        "agent_observe",
        "agent_turn_start",
        "agent_reason",
        "tool_start:save",
        "tool_complete:save",
        "agent_observe",
        *END,
    ]
    await alice.send(type="chat", content="and bread", agent_mode=True)
    assert "tool_approval_request:save" not in labels(await alice.run())
    assert saver.saved == ["milk", "eggs", "bread"]

    other = await as_user(harness, ALICE)  # another conversation of alice's
    await ask_to_save(other, "tea")
    await other.send(type="agent_control", action="stop")
    await other.run()

    async with http(harness, ALICE) as api:
        (grant,) = (await api.get("/api/tool-grants")).json()["grants"]
        assert (grant["tool"], grant["conversation_id"]) == (
            "save",
            alice.session_id,  # type: ignore[attr-defined]
        )
        revoked = await api.delete(f"/api/tool-grants/{grant['id']}")
        again = await api.delete(f"/api/tool-grants/{grant['id']}")
    assert revoked.json()["revoked"]["id"] == grant["id"]
    assert (again.status_code, again.json()["error_type"]) == (404, "not_found")
    asked = await ask_to_save(alice, "jam")
    await alice.send(
        type="tool_approval_response", tool_call_id=asked["tool_call_id"], approved=True
    )
    assert labels(await alice.run())[0] == "tool_complete:save"
    assert saver.saved == ["milk", "eggs", "bread", "jam"]


async def test_always_allow_for_me_reaches_all_my_conversations(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Remembered for the user: a new conversation of theirs runs the tool
    without asking; another user's grant list is empty and they are asked."""
    saver = Saver()
    llm = ScriptedLLM(
        *saving("milk", done()),
        *saving("eggs", done()),
        *saving("bob's"),
    )
    harness = await users(start_server, tmp_path, llm, saver)
    alice = await as_user(harness, ALICE)
    asked = await ask_to_save(alice)
    await alice.send(
        type="tool_approval_response",
        tool_call_id=asked["tool_call_id"],
        approved=True,
        remember="user",
    )
    await alice.run()
    later = await as_user(harness, ALICE)
    await later.send(type="chat", content="remember eggs", agent_mode=True)
    assert labels(await later.run())[:4] == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:save",
    ]
    assert saver.saved == ["milk", "eggs"]
    bob = await as_user(harness, BOB)
    await ask_to_save(bob, "bob's")
    async with http(harness, BOB) as api:
        assert (await api.get("/api/tool-grants")).json() == {"grants": []}
    async with http(harness, ALICE) as api:
        (grant,) = (await api.get("/api/tool-grants")).json()["grants"]
    assert (grant["tool"], grant["conversation_id"]) == ("save", None)
    await bob.send(type="agent_control", action="stop")
    await bob.run()


async def test_decisions_over_http(start_server: StartServer) -> None:
    """`POST …/approvals/{id}` takes edited arguments and `remember`; bad
    arguments are a 422 and the request still waits."""
    saver = Saver()
    harness = await start_server(
        ScriptedLLM(*saving("milk", done())), approval_registry(saver)
    )
    client, ready = await harness.ready_client()
    asked = await ask_to_save(client)
    url = f"/api/conversations/{ready['session_id']}/approvals/{asked['tool_call_id']}"
    async with httpx.AsyncClient(base_url=harness.server.url(""), timeout=30) as api:
        bad = await api.post(url, json={"approved": True, "arguments": {}})
        mixed = await api.post(url, json={"approved": False, "remember": "user"})
        good = await api.post(
            url,
            json={"approved": True, "arguments": {"text": "soy"}, "remember": "user"},
        )
    assert (bad.status_code, bad.json()["error_type"]) == (422, "invalid_answer")
    assert bad.json()["message"].startswith(
        "invalid arguments for save: text: Field required"
    )
    assert (mixed.status_code, mixed.json()["error_type"]) == (400, "invalid_message")
    assert good.json() == {"tool_call_id": asked["tool_call_id"], "status": "approved"}
    rest = await client.run()
    assert labels(rest)[:2] == ["tool_approval_decided", "tool_complete:save"]
    assert saver.saved == ["soy"]


async def test_an_edited_approval_survives_a_restart(tmp_path: Path) -> None:
    """A request waiting across a restart takes edited arguments and a
    remembered grant afterwards; the grant outlives the server too."""
    settings = make_settings(database_url=f"sqlite:///{tmp_path / 'loopwire.db'}")
    saver = Saver()
    first = ScriptedLLM(*saving("milk"))
    async with AsyncExitStack() as stack:
        app = create_app(settings, llm=first, registry=approval_registry(saver))
        harness = Harness(
            await stack.enter_async_context(serving(app, settings=settings)), stack
        )
        client, ready = await harness.ready_client()
        asked = await ask_to_save(client)
    again = ScriptedLLM(done(), *saving("eggs", done()))
    async with AsyncExitStack() as stack:
        app = create_app(settings, llm=again, registry=approval_registry(saver))
        harness = Harness(
            await stack.enter_async_context(serving(app, settings=settings)), stack
        )
        client, _ = await harness.ready_client(f"session_id={ready['session_id']}")
        await client.send(
            type="tool_approval_response",
            tool_call_id=asked["tool_call_id"],
            approved=True,
            arguments={"text": "oat milk"},
            remember="conversation",
        )
        rest = await client.until_label("response_complete")
        await client.send(type="chat", content="remember eggs", agent_mode=True)
        after = await client.run()
    assert labels(rest)[-6:] == [
        "tool_approval_decided",
        "tool_complete:save",
        "agent_observe",
        *END,
    ]
    assert "tool_approval_request:save" not in labels(after)
    assert saver.saved == ["oat milk", "eggs"]


def test_an_mcp_tools_edited_arguments_are_checked_by_its_schema() -> None:
    """A person's arguments for an MCP tool are checked against the server's
    JSON Schema (naming the field); a model's call is left to the server."""
    schema = {
        "type": "object",
        "properties": {"word": {"type": "string"}},
        "required": ["word"],
    }

    async def lookup(args: MCPArguments, ctx: ToolContext) -> str:
        return "found"

    tool = Tool("lookup", "Look a word up.", MCPArguments, lookup, parameters=schema)
    assert tool.validate({"word": 3}, by_schema=True) == (
        "invalid arguments for lookup: word: 3 is not of type 'string'"
    )
    assert isinstance(tool.validate({}), MCPArguments)
