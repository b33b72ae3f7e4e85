"""Through the real /ws endpoint on a live uvicorn: the exact frames a client gets."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.exceptions import InvalidStatus

from backend.llm.base import Completion
from tests.conftest import StartServer
from tests.fakes import (
    Hang,
    ScriptedLLM,
    SlowTool,
    calls,
    observe,
    reason,
    stops_taken,
    test_registry,
)
from tests.ws_client import Frame, labels

STEP = [
    "agent_turn_start",
    "agent_reason",
    "tool_start:add",
    "tool_complete:add",
    "agent_observe",
]
END = ["chat_response", "agent_completion", "response_complete"]


def one_step_script() -> list[object]:
    return [
        reason("Add them.", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe("It is 5.", should_continue=False, final="2 + 3 = 5"),
    ]


def assert_envelopes(frames: list[Frame], session_id: str, run_id: str | None) -> None:
    seqs = [f["seq"] for f in frames]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(f["session_id"] == session_id for f in frames)
    assert all(f["run_id"] == run_id for f in frames)
    assert all(isinstance(f["ts"], float) for f in frames)


async def test_session_ready_is_the_first_frame(start_server: StartServer) -> None:
    """`session_ready` comes first, at seq 0, with limits, model, tools, strategies."""
    harness = await start_server(ScriptedLLM(), test_registry(), agent_max_steps_cap=20)
    _, ready = await harness.ready_client()
    assert ready["seq"] == 0 and ready["last_seq"] == 0 and ready["resumed"] is False
    assert ready["protocol"] == 1 and ready["run_id"] is None
    assert ready["limits"] == {
        "max_steps_cap": 20,
        "default_max_steps": 10,
        "max_message_bytes": 65536,
        "run_budget": {"tokens": None, "cost_usd": None, "time_s": None},
        "daily_budget": {"tokens": None, "cost_usd": None, "time_s": None},
    }
    assert (ready["model"], ready["provider"]) == ("scripted-model", "scripted")
    assert [t["name"] for t in ready["tools"]] == ["add", "fail", "slow"]
    assert ready["tools"][0]["effect"] == {
        "read_only": True,
        "idempotent": True,
        "requires_approval": False,
        "asks_after_untrusted": False,
        "untrusted_result": False,
        "finalize": False,
    }
    assert ready["strategies"] == ["react", "act", "plan_execute", "llm_only"]


async def test_plain_chat_streams_then_answers(start_server: StartServer) -> None:
    """The scripted model sends its three pieces at once: the first goes out
    at once, the two that follow within the tick (20 ms) as one frame."""
    llm = ScriptedLLM("Hello there, human.")
    harness = await start_server(llm, test_registry())
    client, ready = await harness.ready_client()

    frames = await client.chat("hi")

    assert labels(frames) == [
        "token_stream",
        "token_stream",
        "token_stream",
        "chat_response",
        "response_complete",
    ]
    assert [f["token"] for f in frames[:3]] == ["Hello ", "there, human.", ""]
    assert [(f["is_first"], f["is_last"]) for f in frames[:3]] == [
        (True, False),
        (False, False),
        (False, True),
    ]
    assert frames[3]["message"] == "Hello there, human."
    assert [f["seq"] for f in frames] == [1, 2, 3, 4, 5]
    assert_envelopes(frames, ready["session_id"], frames[0]["run_id"])
    request = llm.requests[0]
    assert (
        request.purpose == "chat"
        and request.tools == ()
        and request.tool_choice is None
    )
    assert [m.role for m in request.messages] == ["system", "user"]


async def test_without_batching_every_piece_is_a_frame(
    start_server: StartServer,
) -> None:
    """With `token_batch_ms=0` each streamed piece goes out as its own frame."""
    harness = await start_server(
        ScriptedLLM("Hello there, human."), test_registry(), token_batch_ms=0
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("hi")

    assert [(f["token"], f["is_first"], f["is_last"]) for f in frames[:4]] == [
        ("Hello ", True, False),
        ("there, ", False, False),
        ("human.", False, False),
        ("", False, True),
    ]
    assert labels(frames[4:]) == ["chat_response", "response_complete"]


async def test_tool_mode_runs_tools_then_answers(start_server: StartServer) -> None:
    """A chat with selected tools runs the called tool, then streams the answer."""
    llm = ScriptedLLM(calls(("add", {"expression": "2+3"})), "It is 5.")
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()

    frames = await client.chat("add 2 and 3", selected_tools=["add"])

    assert labels(frames) == [
        "tool_start:add",
        "tool_complete:add",
        "token_stream",
        "token_stream",
        "token_stream",
        "chat_response",
        "response_complete",
    ]
    assert frames[0]["arguments"] == {"expression": "2+3"} and frames[0]["step"] == 1
    assert frames[1]["result"] == {"expression": "2+3", "result": 5.0}
    assert frames[-2]["message"] == "It is 5."
    first, second = llm.requests
    assert [t.name for t in first.tools] == ["add"] and first.tool_choice == "auto"
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool"]


async def test_agent_mode_one_step(start_server: StartServer) -> None:
    """A one-step agent run sends reason, tool and observe frames, then the answer."""
    llm = ScriptedLLM(*one_step_script())  # type: ignore[arg-type]
    harness = await start_server(llm, test_registry())
    client, ready = await harness.ready_client()

    frames = await client.chat("What is 2+3?", agent_mode=True, agent_max_steps=4)

    assert labels(frames) == ["agent_start", *STEP, *END]
    start, turn, reasoned, tool_start, tool_done, observed, answer, done, _ = frames
    assert (start["max_steps"], start["strategy"]) == (4, "react")
    assert (turn["step"], turn["max_steps"]) == (1, 4)
    assert reasoned["content"] == "I will work it out."
    assert reasoned["control"] == {
        "plan": "Add them.",
        "tools_to_consider": ["add"],
        "finish": False,
        "final_answer": "",
        "ask_user": "",
    }
    assert tool_start["tool_call_id"] == tool_done["tool_call_id"]
    assert observed["control"]["final_answer"] == "2 + 3 = 5"
    assert answer["message"] == "2 + 3 = 5"
    assert done["steps"] == 1 and done["reason"] == "finished"
    assert done["usage"]["llm_calls"] == 3 and done["duration_ms"] > 0
    assert_envelopes(frames, ready["session_id"], start["run_id"])


async def test_agent_mode_three_steps(start_server: StartServer) -> None:
    """An agent run repeats the step frames once per step and reports three steps."""
    llm = ScriptedLLM(
        reason(),
        calls(("add", {"expression": "1+1"})),
        observe("two"),
        reason(),
        calls(("add", {"expression": "2+2"})),
        observe("four"),
        reason(),
        calls(("add", {"expression": "4+4"})),
        observe(should_continue=False, final="8"),
    )
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()

    frames = await client.chat("go", agent_mode=True)

    assert labels(frames) == ["agent_start", *STEP, *STEP, *STEP, *END]
    assert [
        f["step"] for f in frames if f.get("update_type") == "agent_turn_start"
    ] == [1, 2, 3]
    assert frames[-2]["steps"] == 3


async def test_request_input_answered(start_server: StartServer) -> None:
    """The answer to `request_input` becomes the tool result and the run goes on."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("km it is"),
        reason("done", finish=True, final="16.09 km"),
    )
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="convert 10 miles", agent_mode=True)

    before = await client.until_label("agent_request_input")
    question = before[-1]
    assert question["question"] == "Which unit?" and question["step"] == 1
    await client.send(
        type="agent_user_input", content="km", question_id=question["question_id"]
    )
    after = await client.run()

    assert labels(before + after) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "agent_request_input",
        "agent_observe",
        "agent_turn_start",
        "agent_reason",
        *END,
    ]
    session = harness.service.sessions[question["session_id"]]
    roles = [(m.role, m.content) for m in session.history]
    assert roles[-2:] == [("tool", "km"), ("assistant", "16.09 km")]


async def test_request_input_timeout(start_server: StartServer) -> None:
    """An unanswered question times out, the model answers, and none stays pending."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        "No answer came, so I could not convert.",
    )
    harness = await start_server(llm, test_registry(), request_input_timeout_s=0.1)
    client, _ = await harness.ready_client()

    frames = await client.chat("convert 10 miles", agent_mode=True)

    assert labels(frames) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "agent_request_input",
        "agent_request_input_timeout",
        *["token_stream"] * 3,  # the first piece, the rest joined, the end
        *END,
    ]
    assert frames[-2]["reason"] == "timeout"
    assert frames[-3]["message"] == "No answer came, so I could not convert."
    # the session is usable afterwards and no question is pending
    await client.send(type="agent_user_input", content="km")
    error = await client.recv()
    assert (error["type"], error["error_type"]) == ("error", "no_pending_input")


async def test_stop_during_a_slow_llm_call_cancels_it(
    start_server: StartServer,
) -> None:
    """A stop cancels the model call; the next chat sees a note of the stopped run."""
    hang = Hang()
    llm = ScriptedLLM(reason(), hang, "Hi again.")
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="go", agent_mode=True)
    await client.until_label("agent_reason")
    await hang.started.wait()

    await client.send(type="agent_control", action="stop")
    frames = await client.run()

    assert hang.cancelled.is_set()
    assert labels(frames) == ["agent_stopped", "agent_completion", "response_complete"]
    assert frames[0]["mode"] == "immediate" and frames[0]["step"] == 1
    assert frames[1]["reason"] == "stopped" and frames[1]["steps"] == 1
    # the next chat starts a fresh run with the history so far
    again = await client.chat("hello?")
    assert labels(again)[-2:] == ["chat_response", "response_complete"]
    # what the stopped run got to is kept, so "continue" could pick it up
    roles = [m.role for m in llm.requests[-1].messages]
    assert roles == ["system", "user", "assistant", "user"]
    kept = llm.requests[-1].messages[2].content
    assert kept == "(This run was stopped by the user at step 1 before it answered.)"


async def test_stop_during_a_slow_tool_reports_it_cancelled(
    start_server: StartServer,
) -> None:
    """A stop cancels the running tool, skips the queued one, closes both in history."""
    slow = SlowTool()
    llm = ScriptedLLM(
        reason(), calls(("slow", {"label": "x"}), ("add", {"expression": "1+1"}))
    )
    harness = await start_server(llm, test_registry(slow))
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="go", agent_mode=True)
    await client.until_label("tool_start:slow")
    await slow.started.wait()

    await client.send(type="agent_control", action="stop")
    frames = await client.run()

    assert slow.cancelled.is_set()
    assert labels(frames) == [
        "tool_error:slow:cancelled",
        "tool_error:add:cancelled",
        "agent_stopped",
        "agent_completion",
        "response_complete",
    ]
    assert frames[0]["error"] == (
        "Cancelled: the user stopped the run before this tool finished."
    )
    assert frames[1]["error"] == "Not run: the user stopped the run before this call."
    session = harness.service.sessions[frames[0]["session_id"]]
    # both calls closed in history, so the model never sees orphans
    tool_results = [(m.content, m.status) for m in session.history if m.role == "tool"]
    assert tool_results == [
        ("Cancelled: the user stopped the run before this tool finished.", "cancelled"),
        ("Not run: the user stopped the run before this call.", "not_run"),
    ]


async def test_stop_after_step_finishes_the_current_tool(
    start_server: StartServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stop_after_step` lets the running tool finish and ends before the next call."""
    taken = stops_taken(monkeypatch)
    slow = SlowTool()
    llm = ScriptedLLM(reason(), calls(("slow", {"label": "x"})))
    harness = await start_server(llm, test_registry(slow))
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="go", agent_mode=True)
    await client.until_label("tool_start:slow")
    await slow.started.wait()

    await client.send(type="agent_control", action="stop_after_step")
    await taken.wait()  # the server took the control frame
    slow.release.set()
    frames = await client.run()

    assert labels(frames) == [
        "tool_complete:slow",
        "agent_stopped",
        "agent_completion",
        "response_complete",
    ]
    assert frames[1]["mode"] == "after_step"
    assert llm.purposes == ["reason", "act"]


async def test_grant_steps_raises_the_budget_up_to_the_cap(
    start_server: StartServer,
) -> None:
    """Granting more steps than the cap allows raises the budget only up to the cap."""
    hang_gate = Hang()
    llm = ScriptedLLM(hang_gate)
    harness = await start_server(llm, test_registry(), agent_max_steps_cap=8)
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="go", agent_mode=True, agent_max_steps=1)
    await client.until_label("agent_turn_start")
    await hang_gate.started.wait()
    await client.send(type="agent_control", action="grant_steps", steps=20)
    granted = await client.recv()
    assert (granted["update_type"], granted["granted"], granted["max_steps"]) == (
        "agent_steps_granted",
        7,
        8,
    )
    await client.send(type="agent_control", action="stop")
    await client.run()


async def test_max_steps_reached_then_forced_final_answer(
    start_server: StartServer,
) -> None:
    """At the step limit a final call forbids tools and the run ends as `max_steps`."""
    llm = ScriptedLLM(
        reason(),
        Completion(content="No action needed."),
        observe("more"),
        reason(),
        Completion(content="No action needed."),
        observe("more"),
        "Partial answer.",
    )
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()

    frames = await client.chat("go", agent_mode=True, agent_max_steps=2)

    step = ["agent_turn_start", "agent_reason", "agent_observe"]
    assert labels(frames) == [
        "agent_start",
        *step,
        *step,
        "agent_max_steps_reached",
        "token_stream",
        "token_stream",
        "token_stream",
        *END,
    ]
    assert (
        frames[-2]["reason"] == "max_steps"
        and frames[-3]["message"] == "Partial answer."
    )
    assert llm.requests[-1].tool_choice == "none"


async def test_client_max_steps_is_capped_by_the_server(
    start_server: StartServer,
) -> None:
    """A client's `agent_max_steps` above the server's cap is cut down to the cap."""
    llm = ScriptedLLM(reason(finish=True, final="ok"))
    harness = await start_server(
        llm, test_registry(), agent_max_steps_cap=3, agent_max_steps=2
    )
    client, _ = await harness.ready_client()
    frames = await client.chat("go", agent_mode=True, agent_max_steps=99)
    assert frames[0]["max_steps"] == 3


async def test_busy_while_a_run_is_active(start_server: StartServer) -> None:
    """A chat sent while a run is active is refused with a `busy` error."""
    hang = Hang()
    harness = await start_server(ScriptedLLM(hang), test_registry())
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="first")
    await hang.started.wait()

    await client.send(type="chat", content="second")
    error = await client.recv()

    assert error["type"] == "error" and error["error_type"] == "busy"
    assert error["run_id"] is None and "already active" in error["message"]
    await client.send(type="agent_control", action="stop")
    assert labels(await client.run()) == ["response_complete"]


async def test_answer_with_nothing_pending(start_server: StartServer) -> None:
    """An answer sent when no question is waiting gets a `no_pending_input` error."""
    harness = await start_server(ScriptedLLM(), test_registry())
    client, _ = await harness.ready_client()
    await client.send(type="agent_user_input", content="km")
    error = await client.recv()
    assert (error["error_type"], error["message"]) == (
        "no_pending_input",
        "no question is waiting for an answer",
    )


async def test_control_with_no_active_run(start_server: StartServer) -> None:
    """A stop sent when no run is active gets a `no_active_run` error."""
    harness = await start_server(ScriptedLLM(), test_registry())
    client, _ = await harness.ready_client()
    await client.send(type="agent_control", action="stop")
    error = await client.recv()
    assert error["error_type"] == "no_active_run"


BAD_FRAMES = [
    (
        "{not json",
        "invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
    ),
    ("[1, 2]", "a frame must be a JSON object, not list"),
    ('{"content": "hi"}', "the frame has no 'type' field"),
    (
        '{"type": "shout"}',
        "unknown message type 'shout'; expected one of: chat, agent_control, "
        "agent_user_input, tool_approval_response, tool_result, cancel_input, "
        "reset_session, switch_branch",
    ),
    ('{"type": "chat"}', "invalid chat message: content: Field required"),
    (
        '{"type": "chat", "content": "   "}',
        "invalid chat message: message: content must not be blank",
    ),
    (
        '{"type": "chat", "content": "hi", "agent_max_steps": "5"}',
        "invalid chat message: agent_max_steps: Input should be a valid integer",
    ),
    (
        '{"type": "chat", "content": "hi", "agent_mode": "yes"}',
        "invalid chat message: agent_mode: Input should be a valid boolean",
    ),
    (
        '{"type": "chat", "content": "hi", "agent_max_steps": 0}',
        "invalid chat message: agent_max_steps: Input should be greater than or equal to 1",
    ),
    (
        '{"type": "chat", "content": "hi", "colour": "red"}',
        "invalid chat message: colour: unknown field",
    ),
    (
        '{"type": "agent_control", "action": "grant_steps"}',
        "invalid agent_control message: message: grant_steps needs 'steps' (a positive integer)",
    ),
    (
        '{"type": "agent_control", "action": "pause"}',
        "invalid agent_control message: action: Input should be 'stop', 'stop_after_step', 'grant_steps' or 'grant_budget'",
    ),
]


async def test_malformed_frames_get_errors_and_the_connection_survives(
    start_server: StartServer,
) -> None:
    """Each malformed, oversized or binary frame gets its exact error; chat goes on."""
    harness = await start_server(
        ScriptedLLM("still here"), test_registry(), max_message_bytes=1024
    )
    client, _ = await harness.ready_client()

    for raw, message in BAD_FRAMES:
        await client.send_raw(raw)
        error = await client.recv()
        assert (error["type"], error["error_type"], error["message"]) == (
            "error",
            "invalid_message",
            message,
        ), raw
    await client.send_raw(json.dumps({"type": "chat", "content": "x" * 2000}))
    assert (await client.recv())[
        "message"
    ] == "frame is 2031 bytes; the limit is 1024 bytes"
    await client.send_raw(b"\x00\x01")
    assert (await client.recv())["message"] == (
        "binary frames are not supported; send JSON text frames"
    )
    frames = await client.chat("hello")
    assert frames[-2]["message"] == "still here"


async def test_unknown_tools_and_strategy_are_refused(
    start_server: StartServer,
) -> None:
    """A chat naming an unknown tool or strategy is refused, listing what exists."""
    harness = await start_server(ScriptedLLM(), test_registry())
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="hi", selected_tools=["add", "rm_rf"])
    assert (await client.recv())["message"] == (
        "unknown tool(s) in selected_tools: rm_rf; available: add, fail, slow"
    )
    await client.send(type="chat", content="hi", agent_mode=True, loop_strategy="magic")
    assert (await client.recv())[
        "message"
    ] == "unknown loop_strategy 'magic'; available: react, act, plan_execute, llm_only"


async def test_reconnect_replays_missed_frames_without_duplicates(
    start_server: StartServer,
) -> None:
    """Reconnecting with `last_seq` replays just the missed frames, each seq once."""
    llm = ScriptedLLM(*one_step_script())  # type: ignore[arg-type]
    harness = await start_server(llm, test_registry())
    first, ready = await harness.ready_client()
    await first.send(type="chat", content="What is 2+3?", agent_mode=True)
    seen = await first.until_label("agent_reason")
    await first.connection.close()

    session_id = ready["session_id"]
    second = await harness.connect(
        f"session_id={session_id}&last_seq={seen[-1]['seq']}"
    )
    resumed = await second.recv()
    rest = await second.run()

    assert resumed["type"] == "session_ready" and resumed["resumed"] is True
    assert resumed["session_id"] == session_id
    everything = seen + rest
    assert labels(everything) == ["agent_start", *STEP, *END]
    assert [f["seq"] for f in everything] == list(range(1, len(everything) + 1))


async def test_unknown_session_id_starts_a_new_session(
    start_server: StartServer,
) -> None:
    """An unknown session id gets a fresh session instead of a resume."""
    harness = await start_server(ScriptedLLM(), test_registry())
    unknown = "0" * 32
    _, ready = await harness.ready_client(f"session_id={unknown}")
    assert ready["resumed"] is False and ready["session_id"] != unknown


async def test_reset_session_clears_history(start_server: StartServer) -> None:
    """After `reset_session` the next chat sends the model none of the earlier turns."""
    llm = ScriptedLLM("one", "two")
    harness = await start_server(llm, test_registry())
    client, _ = await harness.ready_client()
    await client.chat("first")
    await client.send(type="reset_session")
    assert (await client.recv())["type"] == "session_reset"
    await client.chat("second")
    assert [m.content for m in llm.requests[-1].messages[1:]] == ["second"]


async def test_auth_token_is_required_when_set(start_server: StartServer) -> None:
    """With an auth token set, a token in the URL is refused; a Bearer header works."""
    harness = await start_server(ScriptedLLM(), test_registry(), auth_token="s3cret")
    with pytest.raises(InvalidStatus) as refused:
        await harness.connect("token=s3cret")  # never in the URL
    assert refused.value.response.status_code == 401
    _, ready = await harness.ready_client(Authorization="Bearer s3cret")
    assert ready["type"] == "session_ready"


async def test_foreign_origin_is_refused(start_server: StartServer) -> None:
    """A handshake from a disallowed origin gets a 403 and the model is never called."""
    llm = ScriptedLLM()
    harness = await start_server(llm, test_registry())
    with pytest.raises(InvalidStatus) as refused:
        await harness.connect(Origin="http://evil.example")
    response = refused.value.response
    assert response.status_code == 403
    assert json.loads(response.body or b"") == {
        "error_type": "forbidden_origin",
        "message": "origin http://evil.example is not allowed "
        "(LOOPWIRE_ALLOWED_ORIGINS lists the ones that are)",
    }
    assert llm.requests == []


async def test_shutdown_stops_active_runs_and_leaves_no_tasks(
    start_server: StartServer,
) -> None:
    """Server shutdown cancels active runs and leaves no backend tasks behind."""
    hang = Hang()
    harness = await start_server(ScriptedLLM(reason(), hang), test_registry())
    client, _ = await harness.ready_client()
    await client.send(type="chat", content="go", agent_mode=True)
    await hang.started.wait()
    service = harness.service

    await harness.server.stop()

    assert hang.cancelled.is_set()
    assert all(session.run is None for session in service.sessions.values())
    leftovers = [
        task
        for task in asyncio.all_tasks()
        if task is not asyncio.current_task() and "backend" in repr(task.get_coro())
    ]
    assert leftovers == []


async def test_disconnect_does_not_stop_the_run(start_server: StartServer) -> None:
    """A run goes on after its client disconnects, and a reconnect gets its answer."""
    slow = SlowTool()
    llm = ScriptedLLM(
        reason(), calls(("slow", {})), observe(should_continue=False, final="ok")
    )
    harness = await start_server(llm, test_registry(slow))
    client, ready = await harness.ready_client()
    await client.send(type="chat", content="go", agent_mode=True)
    await slow.started.wait()
    await client.connection.close()

    slow.release.set()
    again = await harness.connect(f"session_id={ready['session_id']}&last_seq=0")
    await again.recv()
    frames = await again.run()
    assert labels(frames)[-3:] == END
    assert frames[-3]["message"] == "ok"
