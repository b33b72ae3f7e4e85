"""Approvals asked together: when a reply holds several calls that ask
first, the first request names the others (`also`); each may be decided at
once, while the first waits, and is taken when its turn comes. One left
undecided is asked in turn. A decision taken ahead is stored at once: it
outlives the server."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

from backend.app import create_app
from tests.conftest import Harness, StartServer, make_settings
from tests.fakes import Saver, ScriptedLLM, approval_registry, calls, observe, reason
from tests.live_server import serving
from tests.ws_client import Client, labels

END = ["chat_response", "agent_completion", "response_complete"]


def saving_three(ending: str | None = None) -> list[Any]:
    """One reply saving milk, eggs and bread (each asks first; a read-only
    sum in between), then done (`ending`: the final answer written after a
    rejection stopped the run)."""
    done = observe(should_continue=False, final="Saved.")
    return [
        reason("save them"),
        calls(
            ("save", {"text": "milk"}),
            ("add", {"expression": "1+1"}),
            ("save", {"text": "eggs"}),
            ("save", {"text": "bread"}),
        ),
        done if ending is None else ending,
    ]


async def asked(client: Client) -> dict[str, Any]:
    await client.send(type="chat", content="remember three things", agent_mode=True)
    return (await client.until_label("tool_approval_request:save"))[-1]


async def decide(client: Client, call_id: str, **decision: Any) -> None:
    await client.send(type="tool_approval_response", tool_call_id=call_id, **decision)


def tool_messages(llm: ScriptedLLM, request: int) -> list[str]:
    return [m.content for m in llm.requests[request].messages if m.role == "tool"]


async def test_the_first_request_names_the_others(start_server: StartServer) -> None:
    """The request for the first call lists the later calls that ask too (not
    the read-only one), with their arguments and what the tool does."""
    harness = await start_server(ScriptedLLM(*saving_three()[:2]), approval_registry())
    client, _ = await harness.ready_client()
    first = await asked(client)
    assert first["arguments"] == {"text": "milk"}
    assert [(a["tool_name"], a["arguments"]) for a in first["also"]] == [
        ("save", {"text": "eggs"}),
        ("save", {"text": "bread"}),
    ]
    assert first["also"][0]["description"] == first["description"]
    assert (
        len({first["tool_call_id"], *(a["tool_call_id"] for a in first["also"])}) == 3
    )


async def test_each_decided_at_once(start_server: StartServer) -> None:
    """Bread approved with an edit and eggs approved, ahead of their turn,
    then milk approved: the run asks nothing more and runs each as decided."""
    saver, llm = Saver(), ScriptedLLM(*saving_three())
    harness = await start_server(llm, approval_registry(saver))
    client, _ = await harness.ready_client()
    first = await asked(client)
    eggs, bread = (a["tool_call_id"] for a in first["also"])
    await decide(client, bread, approved=True, arguments={"text": "rye bread"})
    await decide(client, eggs, approved=True)
    await decide(client, first["tool_call_id"], approved=True)
    rest = await client.run()
    assert labels(rest) == [
        "tool_complete:save",
        "tool_start:add",
        "tool_complete:add",
        "tool_start:save",
        "tool_complete:save",
        "tool_start:save",
        "tool_approval_decided",
        "tool_complete:save",
        "agent_observe",
        *END,
    ]
    assert rest[6]["arguments"] == {"text": "rye bread"}
    assert saver.saved == ["milk", "eggs", "rye bread"]
    assert "rye bread" in tool_messages(llm, 2)[3]


async def test_a_rejection_ahead_is_the_calls_result(start_server: StartServer) -> None:
    """Bread rejected ahead with a reason: when its turn comes it is not
    run, and the model is told the reason (the run then stops, as any
    rejection stops it)."""
    saver, llm = Saver(), ScriptedLLM(*saving_three("Saved milk and eggs."))
    harness = await start_server(llm, approval_registry(saver))
    client, _ = await harness.ready_client()
    first = await asked(client)
    eggs, bread = (a["tool_call_id"] for a in first["also"])
    await decide(client, bread, approved=False, reason="we have bread")
    await decide(client, eggs, approved=True)
    await decide(client, first["tool_call_id"], approved=True)
    rest = await client.run()
    assert labels(rest)[3:7] == [
        "tool_start:save",
        "tool_complete:save",
        "tool_start:save",
        "tool_error:save:rejected",
    ]
    assert rest[6]["error"] == "the user declined to run save (reason: we have bread)"
    assert saver.saved == ["milk", "eggs"]
    assert rest[-3]["message"] == "Saved milk and eggs."


async def test_one_left_undecided_is_asked_in_turn(start_server: StartServer) -> None:
    """Only the first decided: the second is asked when its turn comes,
    naming the one after it; a decision on a call no longer asked about
    ahead is refused."""
    saver = Saver()
    harness = await start_server(ScriptedLLM(*saving_three()), approval_registry(saver))
    client, _ = await harness.ready_client()
    first = await asked(client)
    await decide(client, first["tool_call_id"], approved=True)
    second = (await client.until_label("tool_approval_request:save"))[-1]
    assert second["tool_call_id"] == first["also"][0]["tool_call_id"]
    assert [a["tool_call_id"] for a in second["also"]] == [
        first["also"][1]["tool_call_id"]
    ]
    await decide(client, second["also"][0]["tool_call_id"], approved=True)
    await decide(client, second["tool_call_id"], approved=True)
    rest = await client.run()
    assert "tool_approval_request:save" not in labels(rest)
    assert saver.saved == ["milk", "eggs", "bread"]


async def test_deciding_ahead_twice_is_refused(start_server: StartServer) -> None:
    """A call decided ahead cannot be decided again while it waits its turn."""
    harness = await start_server(ScriptedLLM(*saving_three()[:2]), approval_registry())
    client, _ = await harness.ready_client()
    first = await asked(client)
    eggs = first["also"][0]["tool_call_id"]
    await decide(client, eggs, approved=True)
    await decide(client, eggs, approved=False)
    error = await client.recv()
    assert (error["type"], error["error_type"]) == ("error", "no_pending_approval")
    assert "decided already" in error["message"]


async def test_deciding_ahead_over_http(start_server: StartServer) -> None:
    """`POST …/approvals/{id}` decides a call asked about ahead too."""
    saver = Saver()
    harness = await start_server(ScriptedLLM(*saving_three()), approval_registry(saver))
    client, ready = await harness.ready_client()
    first = await asked(client)
    base = f"/api/conversations/{ready['session_id']}/approvals"
    async with httpx.AsyncClient(base_url=harness.server.url(""), timeout=30) as api:
        for upcoming in first["also"]:
            answer = await api.post(
                f"{base}/{upcoming['tool_call_id']}", json={"approved": True}
            )
            assert answer.json()["status"] == "approved"
        await api.post(f"{base}/{first['tool_call_id']}", json={"approved": True})
    rest = await client.run()
    assert "tool_approval_request:save" not in labels(rest)
    assert saver.saved == ["milk", "eggs", "bread"]


async def test_a_decision_ahead_outlives_the_server(tmp_path: Path) -> None:
    """Eggs approved ahead, then the server stops while milk's request
    waits; the next server on the same database asks only for milk."""
    settings = make_settings(database_url=f"sqlite:///{tmp_path / 'loopwire.db'}")
    saver = Saver()
    script = saving_three("Saved milk and eggs.")
    async with AsyncExitStack() as stack:
        app = create_app(
            settings, llm=ScriptedLLM(*script[:2]), registry=approval_registry(saver)
        )
        harness = Harness(
            await stack.enter_async_context(serving(app, settings=settings)), stack
        )
        client, ready = await harness.ready_client()
        first = await asked(client)
        eggs, bread = (a["tool_call_id"] for a in first["also"])
        await decide(client, eggs, approved=True)
        await decide(client, bread, approved=False)
        await decide(client, "no-such-call", approved=True)  # in order: the two are in
        assert (await client.recv())["error_type"] == "no_pending_approval"
    again = ScriptedLLM(*script[2:])
    async with AsyncExitStack() as stack:
        app = create_app(settings, llm=again, registry=approval_registry(saver))
        harness = Harness(
            await stack.enter_async_context(serving(app, settings=settings)), stack
        )
        client, _ = await harness.ready_client(f"session_id={ready['session_id']}")
        await decide(client, first["tool_call_id"], approved=True)
        seen = await client.until_label("response_complete")  # the replay, then on
    assert labels(seen).count("tool_approval_request:save") == 1  # milk's, replayed
    assert labels(seen).count("tool_error:save:rejected") == 1
    assert saver.saved == ["milk", "eggs"]
