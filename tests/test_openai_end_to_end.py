"""The whole server on the `openai` provider, against a fake OpenAI-compatible app."""

from __future__ import annotations

from tests.conftest import StartServer
from tests.fake_openai import FakeOpenAIServer, HangReply, Reply
from tests.fakes import observe, reason, test_registry
from tests.ws_client import labels


async def test_agent_run_over_the_openai_provider(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """An agent run over the `openai` provider lets only act call tools, and answers."""
    fake_openai.script(
        Reply(content=reason("Add 2 and 3.", tools=["add"])),
        Reply(tool_calls=[("add", {"expression": "2+3"})]),
        Reply(content=observe("It is 5.", should_continue=False, final="2 + 3 = 5")),
    )
    harness = await start_server(
        None, test_registry(), llm_base_url=fake_openai.base_url, llm_model="fake-gpt"
    )
    client, ready = await harness.ready_client()
    assert (ready["model"], ready["provider"]) == ("fake-gpt", "openai")

    frames = await client.chat("What is 2+3?", agent_mode=True)

    assert labels(frames) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:add",
        "tool_complete:add",
        "agent_observe",
        "chat_response",
        "agent_completion",
        "response_complete",
    ]
    assert frames[4]["result"] == {"expression": "2+3", "result": 5.0}
    assert frames[6]["message"] == "2 + 3 = 5"
    reason_body, act_body, observe_body = fake_openai.requests
    # every call offers the same tools (a prefix a prompt cache keeps)
    assert reason_body["tools"] == act_body["tools"] == observe_body["tools"]
    assert reason_body["tool_choice"] == observe_body["tool_choice"] == "none"
    assert reason_body["model"] == "fake-gpt"
    assert act_body["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in act_body["tools"]] == [
        "add",
        "fail",
        "slow",
        "request_input",
    ]
    assert [m["role"] for m in observe_body["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "system",
    ]


async def test_tool_mode_with_streamed_tool_call_fragments(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """In tool mode a tool call streamed in fragments runs, then the answer streams."""
    fake_openai.script(
        Reply(tool_calls=[("add", {"expression": "20+22"})], argument_fragments=5),
        Reply(content="The sum is 42."),
    )
    harness = await start_server(
        None, test_registry(), llm_base_url=fake_openai.base_url
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("add 20 and 22", selected_tools=["add"])

    assert labels(frames)[:2] == ["tool_start:add", "tool_complete:add"]
    assert frames[0]["arguments"] == {"expression": "20+22"}
    assert frames[1]["result"]["result"] == 42.0
    tokens = [f["token"] for f in frames if f["type"] == "token_stream"]
    assert "".join(tokens) == "The sum is 42." and len(tokens) > 2
    assert labels(frames)[-2:] == ["chat_response", "response_complete"]
    assert all(body["stream"] is True for body in fake_openai.requests)


async def test_stop_closes_the_upstream_request(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """A stop during an agent run cancels the hanging upstream request."""
    fake_openai.script(HangReply())
    harness = await start_server(
        None, test_registry(), llm_base_url=fake_openai.base_url
    )
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="go", agent_mode=True)
    await client.until_label("agent_turn_start")
    await fake_openai.wait_for_requests(1)

    await client.send(type="agent_control", action="stop")
    frames = await client.run()

    await fake_openai.cancelled.wait()
    assert labels(frames) == ["agent_stopped", "agent_completion", "response_complete"]


async def test_llm_server_down_is_reported(start_server: StartServer) -> None:
    """An unreachable LLM server yields an `llm_error` that does not reveal its URL."""
    harness = await start_server(
        None, test_registry(), llm_base_url="http://127.0.0.1:9/v1", llm_max_retries=0
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("hello")

    assert labels(frames) == ["error:llm_error", "response_complete"]
    # the user is told what failed, never where: the URL is in the server log
    assert frames[0]["message"] == "cannot reach the LLM server: connection refused"
    assert frames[0]["run_id"] == frames[1]["run_id"] is not None
