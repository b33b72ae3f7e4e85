"""Real servers' reply shapes through the `openai` provider and the whole
server: thinking shown apart as `thinking`, never as the answer; tool
calls written as text run as tools; ids a server reuses never collide."""

from __future__ import annotations

from tests.conftest import StartServer
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.fakes import observe, reason, test_registry
from tests.ws_client import labels

HERMES_ADD = (
    '<tool_call>\n{"name": "add", "arguments": {"expression": "2+3"}}\n</tool_call>'
)


async def test_a_react_run_on_a_reasoning_model_that_calls_tools_in_text(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """Thinking in `<think>` tags and in `reasoning_content` comes as
    `thinking` before each phase's update, and a Hermes text call runs."""
    fake_openai.script(
        Reply(content="<think>The user wants a sum.</think>\n" + reason("Add them.")),
        Reply(content="<think>Use add.</think>" + HERMES_ADD),
        Reply(
            reasoning="It is 5.",
            content=observe("Done.", should_continue=False, final="2 + 3 = 5"),
        ),
    )
    harness = await start_server(
        None, test_registry(), llm_base_url=fake_openai.base_url
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("What is 2+3?", agent_mode=True)

    assert labels(frames) == [
        "agent_start",
        "agent_turn_start",
        "thinking",
        "agent_reason",
        "thinking",
        "tool_start:add",
        "tool_complete:add",
        "thinking",
        "agent_observe",
        "chat_response",
        "agent_completion",
        "response_complete",
    ]
    thinking = [
        (f["phase"], f["step"], f["content"]) for f in frames if f["type"] == "thinking"
    ]
    assert thinking == [
        ("reason", 1, "The user wants a sum."),
        ("act", 1, "Use add."),
        ("observe", 1, "It is 5."),
    ]
    assert "<think>" not in frames[3]["content"] and frames[3]["control"] is not None
    assert frames[5]["arguments"] == {"expression": "2+3"}
    assert frames[6]["result"]["result"] == 5.0
    assert frames[9]["message"] == "2 + 3 = 5"
    act_reply = fake_openai.requests[2]["messages"][-3]  # what observe was shown
    assert act_reply["role"] == "assistant" and "content" not in act_reply
    assert [c["function"]["name"] for c in act_reply["tool_calls"]] == ["add"]


async def test_a_streamed_chat_shows_neither_thinking_nor_a_text_call(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """In tool mode, streamed thinking and a streamed text call never reach the
    user as tokens; the call runs and the answer streams after it."""
    fake_openai.script(
        Reply(reasoning="Let me add.", content=HERMES_ADD, chunk_chars=3),
        Reply(content="<think>5, surely</think>The sum is 5.", chunk_chars=2),
    )
    harness = await start_server(
        None, test_registry(), llm_base_url=fake_openai.base_url
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("add 2 and 3", selected_tools=["add"])

    tokens = "".join(f["token"] for f in frames if f["type"] == "token_stream")
    assert tokens == "The sum is 5."
    assert labels(frames)[:3] == [
        "thinking",
        "tool_start:add",
        "tool_complete:add",
    ]
    assert frames[-2]["message"] == "The sum is 5."
    assert [f["content"] for f in frames if f["type"] == "thinking"] == [
        "Let me add.",
        "5, surely",
    ]


async def test_a_call_of_a_tool_not_offered_stays_the_models_text(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """Text naming a tool the request did not offer runs nothing: it is the answer."""
    text = '<tool_call>{"name": "format_disk", "arguments": {}}</tool_call>'
    fake_openai.script(Reply(content=text))
    harness = await start_server(
        None, test_registry(), llm_base_url=fake_openai.base_url
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("wipe it", selected_tools=["add"])

    assert not [f for f in frames if f["type"].startswith("tool_")]
    assert frames[-2]["message"] == text


async def test_call_ids_a_server_reuses_in_every_reply_never_collide(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """Two steps whose calls both come as `call_fake_1` run both calls, and
    the second gets a fresh id, so each result answers its own call."""
    fake_openai.script(
        Reply(content=reason("Add first.")),
        Reply(tool_calls=[("add", {"expression": "1+1"})]),
        Reply(content=observe("2 so far.")),
        Reply(content=reason("Add again.")),
        Reply(tool_calls=[("add", {"expression": "2+2"})]),
        Reply(content=observe("4.", should_continue=False, final="2 and 4")),
    )
    harness = await start_server(
        None, test_registry(), llm_base_url=fake_openai.base_url
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("add twice", agent_mode=True)

    started = [f for f in frames if f["type"] == "tool_start"]
    assert [f["tool_call_id"] for f in started] == ["call_fake_1", "call_fake_1~2"]
    last = fake_openai.requests[-1]["messages"]
    ids = [
        call["id"]
        for m in last
        if m["role"] == "assistant"
        for call in m.get("tool_calls", [])
    ]
    answered = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert ids == answered == ["call_fake_1", "call_fake_1~2"]
    results = [f["result"]["result"] for f in frames if f["type"] == "tool_complete"]
    assert results == [2.0, 4.0]
