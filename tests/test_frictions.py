"""What tripped a new user (issue #29), each fixed and held by a test that
failed before the fix. Browser-only ones are in tests/browser/."""

from __future__ import annotations

import httpx

from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, calls, reason, test_registry
from tests.ws_client import labels


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
