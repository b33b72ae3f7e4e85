"""The default app (offline model, built-in tools) through the real /ws endpoint."""

from __future__ import annotations

from tests.conftest import StartServer
from tests.ws_client import labels

END = ["chat_response", "agent_completion", "response_complete"]


async def test_fresh_app_runs_on_the_offline_model(start_server: StartServer) -> None:
    harness = await start_server(llm_provider="offline")
    client, ready = await harness.ready_client()
    assert (ready["model"], ready["provider"]) == ("loopwire-offline", "offline")
    assert [t["name"] for t in ready["tools"]] == [
        "calculator",
        "current_time",
        "convert_units",
        "save_note",
        "list_notes",
        "delete_note",
    ]

    frames = await client.chat("What is 2+2*3?", agent_mode=True)

    assert labels(frames) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:calculator",
        "tool_complete:calculator",
        "agent_observe",
        *END,
    ]
    assert frames[4]["result"] == {"expression": "2+2*3", "result": 8}
    assert "8" in frames[-3]["message"]
    assert frames[-2]["reason"] == "finished"


async def test_offline_agent_asks_for_the_missing_unit(
    start_server: StartServer,
) -> None:
    harness = await start_server(llm_provider="offline")
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="convert 10 miles", agent_mode=True)

    first = await client.until_label("agent_request_input")
    assert first[-1]["question"] == "What unit should I convert 10 miles to?"
    await client.send(
        type="agent_user_input", content="km", question_id=first[-1]["question_id"]
    )
    rest = await client.run()

    assert labels(first + rest) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "agent_request_input",
        "agent_observe",
        "agent_turn_start",
        "agent_reason",
        "tool_start:convert_units",
        "tool_complete:convert_units",
        "agent_observe",
        *END,
    ]
    assert rest[-3]["message"] == "10 miles is **16.0934 km**"
    assert rest[-2]["steps"] == 2


async def test_offline_plain_chat_greets(start_server: StartServer) -> None:
    harness = await start_server(llm_provider="offline")
    client, _ = await harness.ready_client()
    frames = await client.chat("hello")
    assert labels(frames)[-2:] == ["chat_response", "response_complete"]
    assert frames[0]["type"] == "token_stream" and frames[0]["is_first"] is True
