"""The default app (offline model, built-in tools) through the real /ws endpoint."""

from __future__ import annotations

from tests.conftest import StartServer
from tests.ws_client import labels

END = ["chat_response", "agent_completion", "response_complete"]


async def test_fresh_app_runs_on_the_offline_model(start_server: StartServer) -> None:
    """The default app offers the built-in tools and answers arithmetic with them."""
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
        "read_file",
        "write_file",
    ]
    assert ready["data_sources"] == []

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
    """The offline agent asks for the missing unit and converts once it is answered."""
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
    """A plain "hello" on the offline model is answered with a streamed greeting."""
    harness = await start_server(llm_provider="offline")
    client, _ = await harness.ready_client()
    frames = await client.chat("hello")
    assert labels(frames)[-2:] == ["chat_response", "response_complete"]
    assert frames[0]["type"] == "token_stream" and frames[0]["is_first"] is True
    answer = frames[-2]["message"]
    assert answer.startswith("Hello! ") and "try “" in answer


STEP = ["agent_turn_start", "agent_reason"]


async def test_a_request_in_two_parts_takes_a_step_for_each(
    start_server: StartServer,
) -> None:
    """A two-part request takes one conversion step per part, then a joined answer."""
    harness = await start_server(llm_provider="offline")
    client, _ = await harness.ready_client()

    frames = await client.chat("convert 10 miles to km and 5 kg to lb", agent_mode=True)

    tool = ["tool_start:convert_units", "tool_complete:convert_units", "agent_observe"]
    assert labels(frames) == ["agent_start", *STEP, *tool, *STEP, *tool, *END]
    assert [f["arguments"] for f in frames if f["type"] == "tool_start"] == [
        {"value": 10, "from_unit": "miles", "to_unit": "km"},
        {"value": 5, "from_unit": "kg", "to_unit": "lb"},
    ]
    assert frames[5]["control"]["should_continue"] is True
    assert (
        frames[-3]["message"] == "10 miles is **16.0934 km**\n\n5 kg is **11.0231 lb**"
    )
    assert frames[-2]["steps"] == 2


async def test_two_kinds_of_request_in_tool_mode_and_with_a_plan(
    start_server: StartServer,
) -> None:
    """A mixed request runs both tools in tool mode and becomes a two-step plan."""
    harness = await start_server(llm_provider="offline")
    client, _ = await harness.ready_client()

    tools = ["calculator", "current_time"]
    frames = await client.chat("3*7 and the time in London", selected_tools=tools)
    names = [n for n in labels(frames) if n != "token_stream"]
    assert names == [
        "tool_start:calculator",
        "tool_complete:calculator",
        "tool_start:current_time",
        "tool_complete:current_time",
        "chat_response",
        "response_complete",
    ]
    answer = frames[-2]["message"]
    assert answer.startswith("3 × 7 = **21**\n\nIt's ")  # noqa: RUF001
    assert answer.endswith(" in Europe/London.")

    planned = await client.chat(
        "3*7 and the time in London", agent_mode=True, loop_strategy="plan_execute"
    )
    plan = next(f for f in planned if labels([f]) == ["agent_plan"])
    assert plan["steps"] == [
        "Call calculator to calculate 3*7.",
        "Call current_time to get the time in Europe/London.",
    ]
    assert planned[-3]["message"].startswith("3 × 7 = **21**\n\nIt's ")  # noqa: RUF001


async def test_a_run_out_of_steps_says_so_and_continue_finishes_it(
    start_server: StartServer,
) -> None:
    """A run out of steps says what is left, and `Continue` does only that part."""
    harness = await start_server(llm_provider="offline")
    client, _ = await harness.ready_client()
    two_parts = "what is 2+2*3 and convert 10 miles to km"

    first = await client.chat(two_parts, agent_mode=True, agent_max_steps=1)

    assert labels(first) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:calculator",
        "tool_complete:calculator",
        "agent_observe",
        "agent_max_steps_reached",
        *["token_stream"] * 3,  # the final answer, streamed
        *END,
    ]
    assert first[-2]["reason"] == "max_steps"
    assert first[-3]["message"] == (
        "2 + 2 \u00d7 3 = **8**\n\n"
        "I couldn't finish: the run ended before I could use the convert_units "
        "tool to convert 10 miles to km. Ask me to continue and I'll carry on "
        "from there."
    )

    second = await client.chat("Continue", agent_mode=True, agent_max_steps=5)

    tools = [f["tool_name"] for f in second if f["type"] == "tool_start"]
    assert tools == ["convert_units"]  # the calculator is not run again
    assert second[-2]["reason"] == "finished"
    assert second[-3]["message"] == (
        "2 + 2 \u00d7 3 = **8**\n\n10 miles is **16.0934 km**"
    )
