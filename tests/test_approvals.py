"""Tool approvals end to end: over WebSocket and HTTP, refusals, timeouts, stop."""

from __future__ import annotations

import httpx

from tests.conftest import Harness, StartServer
from tests.fakes import Saver, ScriptedLLM, approval_registry, calls, observe, reason
from tests.ws_client import Client, Frame, labels

END = ["chat_response", "agent_completion", "response_complete"]


async def start_save_run(
    start_server: StartServer,
    *replies: object,
    saver: Saver | None = None,
    **settings: object,
) -> tuple[Harness, Client, Frame, list[Frame]]:
    llm = ScriptedLLM(reason("save it"), calls(("save", {"text": "milk"})), *replies)  # type: ignore[arg-type]
    harness = await start_server(llm, approval_registry(saver), **settings)
    client, ready = await harness.ready_client()
    await client.send(type="chat", content="remember milk", agent_mode=True)
    before = await client.until_label("tool_approval_request:save")
    return harness, client, ready, before


async def test_approved_over_websocket(start_server: StartServer) -> None:
    """An approval request shows the call's arguments; approved, the tool runs."""
    saver = Saver()
    _harness, client, _, before = await start_save_run(
        start_server, observe(should_continue=False, final="Saved: milk."), saver=saver
    )
    request = before[-1]
    assert labels(before) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:save",
        "tool_approval_request:save",
    ]
    assert request["arguments"] == {"text": "milk"}
    assert request["description"] == "Save a note (asks the user first)."
    assert (
        request["step"] == 1 and request["tool_call_id"] == before[-2]["tool_call_id"]
    )

    await client.send(
        type="tool_approval_response",
        tool_call_id=request["tool_call_id"],
        approved=True,
    )
    rest = await client.run()

    assert labels(rest) == ["tool_complete:save", "agent_observe", *END]
    assert saver.saved == ["milk"]


async def test_rejected_stops_the_run_with_an_explanation(
    start_server: StartServer,
) -> None:
    """A rejection skips the tool and ends the run as `rejected`; the model explains."""
    saver = Saver()
    _harness, client, _, before = await start_save_run(
        start_server, "I did not save it, since you declined.", saver=saver
    )
    call_id = before[-1]["tool_call_id"]
    await client.send(
        type="tool_approval_response",
        tool_call_id=call_id,
        approved=False,
        reason="not now",
    )
    rest = await client.run()

    assert labels(rest) == ["tool_error:save:rejected", *["token_stream"] * 3, *END]
    assert rest[0]["error"] == "the user declined to run save (reason: not now)"
    assert rest[-3]["message"] == "I did not save it, since you declined."
    assert rest[-2]["reason"] == "rejected"
    assert saver.saved == []


async def test_rejected_with_on_reject_continue(start_server: StartServer) -> None:
    """With `approval_on_reject=continue` a rejection is observed; the run goes on."""
    _harness, client, _, before = await start_save_run(
        start_server,
        observe(should_continue=False, final="Fine, not saved."),
        approval_on_reject="continue",
    )
    await client.send(
        type="tool_approval_response",
        tool_call_id=before[-1]["tool_call_id"],
        approved=False,
    )
    rest = await client.run()
    assert labels(rest) == ["tool_error:save:rejected", "agent_observe", *END]
    assert rest[-2]["reason"] == "finished"


async def test_approval_times_out(start_server: StartServer) -> None:
    """An unanswered approval times out, the tool unrun; a late yes is refused."""
    saver = Saver()
    _harness, client, _, _ = await start_save_run(
        start_server,
        observe(should_continue=False, final="Nobody approved, so nothing was saved."),
        saver=saver,
        approval_timeout_s=0.1,
    )
    rest = await client.run()
    assert labels(rest) == ["tool_error:save:timeout", "agent_observe", *END]
    assert (
        rest[0]["error"] == "no approval decision for save within 0.1s; it was not run"
    )
    assert saver.saved == []
    # a late answer is refused and changes nothing
    await client.send(
        type="tool_approval_response",
        tool_call_id=rest[0]["tool_call_id"],
        approved=True,
    )
    late = await client.recv()
    assert late["error_type"] == "no_pending_approval"
    assert saver.saved == []


async def test_approved_over_http(start_server: StartServer) -> None:
    """An approval posted over HTTP runs the tool, and posting it again gets a 409."""
    saver = Saver()
    harness, client, ready, before = await start_save_run(
        start_server, observe(should_continue=False, final="Saved."), saver=saver
    )
    call_id = before[-1]["tool_call_id"]
    url = harness.server.url(f"/api/sessions/{ready['session_id']}/approvals/{call_id}")
    async with httpx.AsyncClient() as http:
        response = await http.post(url, json={"approved": True})
        assert (response.status_code, response.json()) == (
            200,
            {"tool_call_id": call_id, "status": "approved"},
        )
        rest = await client.run()
        replay = await http.post(url, json={"approved": True})

    assert labels(rest)[0] == "tool_complete:save" and saver.saved == ["milk"]
    assert replay.status_code == 409
    assert replay.json()["error_type"] == "no_pending_approval"


async def test_http_refusals_change_nothing(start_server: StartServer) -> None:
    """Wrong session, unknown call or bad body over HTTP leave the approval pending."""
    saver = Saver()
    harness, client, ready, before = await start_save_run(
        start_server, observe(should_continue=False, final="Saved."), saver=saver
    )
    call_id = before[-1]["tool_call_id"]
    base = harness.server.url("/api/sessions")
    async with httpx.AsyncClient() as http:
        other = await http.post(
            f"{base}/nope/approvals/{call_id}", json={"approved": True}
        )
        unknown = await http.post(
            f"{base}/{ready['session_id']}/approvals/call_999", json={"approved": True}
        )
        bad = await http.post(
            f"{base}/{ready['session_id']}/approvals/{call_id}",
            json={"approved": "yes"},
        )
        garbage = await http.post(
            f"{base}/{ready['session_id']}/approvals/{call_id}",
            content=b"{oops",
            headers={"Content-Type": "application/json"},
        )
    assert (other.status_code, other.json()["error_type"]) == (404, "not_found")
    assert (unknown.status_code, unknown.json()["error_type"]) == (
        409,
        "no_pending_approval",
    )
    assert (bad.status_code, bad.json()["message"]) == (
        400,
        "invalid approval: approved: Input should be a valid boolean",
    )
    assert bad.json()["fields"] == [
        {"field": "approved", "problem": "Input should be a valid boolean"}
    ]
    assert garbage.status_code == 400
    assert saver.saved == []
    # still pending: the real answer works
    await client.send(
        type="tool_approval_response", tool_call_id=call_id, approved=True
    )
    assert labels(await client.run())[0] == "tool_complete:save"


async def test_http_approval_needs_the_token(start_server: StartServer) -> None:
    """The HTTP approval endpoint refuses a request without the bearer token."""
    harness = await start_server(
        ScriptedLLM(), approval_registry(), auth_token="s3cret"
    )
    url = harness.server.url("/api/sessions/x/approvals/y")
    async with httpx.AsyncClient() as http:
        refused = await http.post(url, json={"approved": True})
        allowed = await http.post(
            url, json={"approved": True}, headers={"Authorization": "Bearer s3cret"}
        )
    assert refused.status_code == 401
    assert allowed.status_code == 404  # past auth: the session does not exist


async def test_another_session_cannot_answer(start_server: StartServer) -> None:
    """A different session cannot answer another session's pending approval."""
    saver = Saver()
    harness, client, _, before = await start_save_run(
        start_server, observe(should_continue=False, final="Saved."), saver=saver
    )
    call_id = before[-1]["tool_call_id"]
    intruder, _ = await harness.ready_client()
    await intruder.send(
        type="tool_approval_response", tool_call_id=call_id, approved=True
    )
    refused = await intruder.recv()
    assert refused["error_type"] == "no_pending_approval"
    assert saver.saved == []
    await client.send(
        type="tool_approval_response", tool_call_id=call_id, approved=False
    )
    assert labels(await client.run())[0] == "tool_error:save:rejected"


async def test_stop_while_waiting_for_approval(start_server: StartServer) -> None:
    """A stop while an approval is pending cancels the call; a later yes is refused."""
    saver = Saver()
    _harness, client, _, before = await start_save_run(start_server, saver=saver)
    await client.send(type="agent_control", action="stop")
    rest = await client.run()
    assert labels(rest) == [
        "tool_error:save:cancelled",
        "agent_stopped",
        "agent_completion",
        "response_complete",
    ]
    await client.send(
        type="tool_approval_response",
        tool_call_id=before[-1]["tool_call_id"],
        approved=True,
    )
    assert (await client.recv())["error_type"] == "no_pending_approval"
    assert saver.saved == []


async def test_several_approvals_in_one_run(start_server: StartServer) -> None:
    """Two approval-gated calls in one step each ask, and both run once approved."""
    saver = Saver()
    llm = ScriptedLLM(
        reason("save two"),
        calls(("save", {"text": "milk"}), ("save", {"text": "eggs"})),
        observe(should_continue=False, final="Saved both."),
    )
    harness = await start_server(llm, approval_registry(saver))
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="remember milk and eggs", agent_mode=True)
    for _ in range(2):
        request = (await client.until_label("tool_approval_request:save"))[-1]
        await client.send(
            type="tool_approval_response",
            tool_call_id=request["tool_call_id"],
            approved=True,
        )
    rest = await client.run()
    assert labels(rest) == ["tool_complete:save", "agent_observe", *END]
    assert saver.saved == ["milk", "eggs"]


async def test_pending_approval_survives_a_reconnect(start_server: StartServer) -> None:
    """A reconnecting client gets the approval request replayed and can answer it."""
    saver = Saver()
    harness, client, ready, before = await start_save_run(
        start_server, observe(should_continue=False, final="Saved."), saver=saver
    )
    await client.connection.close()
    again = await harness.connect(f"session_id={ready['session_id']}&last_seq=0")
    assert (await again.recv())["resumed"] is True
    replayed = await again.until_label("tool_approval_request:save")
    assert [f["seq"] for f in replayed] == [f["seq"] for f in before]
    await again.send(
        type="tool_approval_response",
        tool_call_id=replayed[-1]["tool_call_id"],
        approved=True,
    )
    assert labels(await again.run())[-3:] == END
    assert saver.saved == ["milk"]


async def test_tool_mode_asks_too_and_a_rejection_ends_the_rounds(
    start_server: StartServer,
) -> None:
    """Tool-mode chat asks approval too; a rejection forbids tools in the next call."""
    saver = Saver()
    llm = ScriptedLLM(calls(("save", {"text": "milk"})), "Not saved.")
    harness = await start_server(llm, approval_registry(saver))
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="remember milk", selected_tools=["save"])
    request = (await client.until_label("tool_approval_request:save"))[-1]
    await client.send(
        type="tool_approval_response",
        tool_call_id=request["tool_call_id"],
        approved=False,
    )
    rest = await client.run()
    assert labels(rest)[0] == "tool_error:save:rejected"
    assert labels(rest)[-2:] == ["chat_response", "response_complete"]
    assert llm.requests[-1].tool_choice == "none"
    assert saver.saved == []


async def test_read_only_session_blocks_a_mutating_call(
    start_server: StartServer,
) -> None:
    """A read-only run blocks a mutating call and hides such tools from the model."""
    saver = Saver()
    llm = ScriptedLLM(
        reason(),
        calls(("save", {"text": "milk"})),
        observe(should_continue=False, final="Read-only, so not saved."),
    )
    harness = await start_server(llm, approval_registry(saver))
    client, _ = await harness.ready_client()
    frames = await client.chat("remember milk", agent_mode=True, read_only=True)
    assert labels(frames)[3:5] == ["tool_start:save", "tool_error:save:blocked"]
    assert [t.name for t in llm.requests[1].tools] == ["add", "finish", "request_input"]
    assert saver.saved == []
