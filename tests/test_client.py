"""`loopwire.AgentClient` against a live server with a scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from backend.protocol import (
    AgentReason,
    AgentRequestInput,
    AgentTurnStart,
    ToolApprovalRequest,
    ToolStart,
)
from loopwire import (
    AgentClient,
    AgentError,
    Backoff,
    ConnectionFailed,
    Event,
    HandshakeRefused,
    NoPendingQuestion,
    RunResult,
    SyncAgentClient,
    events,
)
from loopwire.connection import _retryable, envelope
from tests.conftest import Harness, StartServer
from tests.fakes import (
    Hang,
    Saver,
    ScriptedLLM,
    approval_registry,
    calls,
    observe,
    reason,
    test_registry,
)
from tests.server_process import free_port
from tests.ws_client import label

END = ["chat_response", "agent_completion", "response_complete"]
TOKEN = "a-long-enough-token-123"
NOW = Backoff(attempts=3, first_delay_s=0)
"""Reconnect at once: the tests wait on events, never on the clock."""


def names(events: Sequence[Event]) -> list[str]:
    return [label(event.model_dump()) for event in events]


def seqs(events: Sequence[Event]) -> list[int]:
    return [envelope(event).seq for event in events]


def url(harness: Harness) -> str:
    return harness.server.url("/ws", "ws")


def save_milk(*after: object) -> ScriptedLLM:
    """Ask which note, save the answer (needs approval), then finish."""
    return ScriptedLLM(
        reason("ask what to save"),
        calls(("request_input", {"question": "What should I save?"})),
        observe("the user said milk"),
        reason("save it"),
        calls(("save", {"text": "milk"})),
        *after,  # type: ignore[arg-type]
    )


async def test_handlers_answer_and_approve_a_whole_run(
    start_server: StartServer,
) -> None:
    saver = Saver()
    llm = save_milk(observe(should_continue=False, final="Saved **milk**."))
    harness = await start_server(llm, approval_registry(saver))
    asked: list[str] = []

    async def answer(question: AgentRequestInput) -> str:
        asked.append(question.question)
        return "milk"

    async with AgentClient(
        url(harness), on_question=answer, on_approval=lambda request: True
    ) as client:
        result = await client.run("remember something", max_steps=3)

    assert names(result.events) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "agent_request_input",
        "agent_observe",
        "agent_turn_start",
        "agent_reason",
        "tool_start:save",
        "tool_approval_request:save",
        "tool_complete:save",
        "agent_observe",
        *END,
    ]
    assert seqs(result.events) == list(range(1, 15))
    assert (result.answer, result.reason, result.steps) == (
        "Saved **milk**.",
        "finished",
        2,
    )
    assert asked == ["What should I save?"] and saver.saved == ["milk"]
    assert "milk" in (llm.requests[2].messages[-1].content or "")
    assert client.run_open is False and client.pending_question is None


async def test_answer_and_approve_from_the_loop_body(
    start_server: StartServer,
) -> None:
    llm = save_milk("I did not save it, since you declined.")
    harness = await start_server(llm, approval_registry())
    seen: list[Event] = []
    async with AgentClient(url(harness)) as client:
        with pytest.raises(NoPendingQuestion):
            await client.answer("too early")
        async for event in client.chat("remember something"):
            seen.append(event)
            if isinstance(event, AgentRequestInput):
                assert client.pending_question == event
                await client.answer("milk")
            elif isinstance(event, ToolApprovalRequest):
                await client.approve(event.tool_call_id, False, "not now")
    assert names(seen) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "agent_request_input",
        "agent_observe",
        "agent_turn_start",
        "agent_reason",
        "tool_start:save",
        "tool_approval_request:save",
        "tool_error:save:rejected",
        *["token_stream"] * 3,
        *END,
    ]
    assert seen[-2].model_dump()["reason"] == "rejected"


async def test_stop_ends_the_run_and_the_session_goes_on(
    start_server: StartServer,
) -> None:
    hang = Hang()
    llm = ScriptedLLM(reason(), hang, "Hello again.")
    harness = await start_server(llm, test_registry())
    async with AgentClient(url(harness)) as client:
        seen: list[Event] = []
        async for event in client.chat("go"):
            seen.append(event)
            if isinstance(event, AgentReason):
                await hang.started.wait()
                await client.stop()
        assert names(seen) == [
            "agent_start",
            "agent_turn_start",
            "agent_reason",
            "agent_stopped",
            "agent_completion",
            "response_complete",
        ]
        assert seen[-2].model_dump()["reason"] == "stopped"
        assert hang.cancelled.is_set()
        await client.stop()  # no run open: nothing is sent, nothing breaks
        again = await client.run("hello?", agent=False)
    assert again.answer == "Hello again." and again.reason == "finished"


async def test_grant_steps_and_stop_after_step(start_server: StartServer) -> None:
    llm = ScriptedLLM(
        reason(),
        calls(("add", {"expression": "1+1"})),
        observe(),
        reason(),
        calls(("add", {"expression": "2+2"})),
        observe(),
        "Stopped after two sums.",
    )
    harness = await start_server(llm, test_registry())
    async with AgentClient(url(harness)) as client:
        seen: list[Event] = []
        async for event in client.chat("add things", max_steps=1):
            seen.append(event)
            if isinstance(event, AgentTurnStart) and event.step == 1:
                await client.grant_steps(1)
            if isinstance(event, ToolStart) and event.step == 2:
                await client.stop_after_step()
    assert "agent_steps_granted" in names(seen)
    assert [e.model_dump()["step"] for e in seen if isinstance(e, AgentTurnStart)] == [
        1,
        2,
    ]
    stopped = next(e for e in seen if label(e.model_dump()) == "agent_stopped")
    assert stopped.model_dump()["mode"] == "after_step"
    assert seen[-2].model_dump()["reason"] == "stopped"


async def test_reconnect_replays_what_was_missed_exactly_once(
    start_server: StartServer,
) -> None:
    llm = ScriptedLLM(
        reason("save it"),
        calls(("save", {"text": "milk"})),
        observe(should_continue=False, final="Saved."),
    )
    harness = await start_server(llm, approval_registry())
    seen: list[Event] = []
    async with AgentClient(url(harness), backoff=NOW) as client:
        async for event in client.chat("remember milk"):
            seen.append(event)
            if not isinstance(event, ToolApprovalRequest):
                continue
            # the network drops; meanwhile the run goes on and ends
            client.connection.socket.transport.abort()
            query = f"session_id={client.session_id}&last_seq={envelope(event).seq}"
            other, _ = await harness.ready_client(query)
            await other.send(
                type="tool_approval_response",
                tool_call_id=event.tool_call_id,
                approved=True,
            )
            missed = await other.run()
        assert client.reconnects == 1

    assert names(seen) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:save",
        "tool_approval_request:save",
        "tool_complete:save",
        "agent_observe",
        *END,
    ]
    assert seqs(seen) == list(range(1, 11))
    assert [e.model_dump(mode="json") for e in seen[5:]] == missed


async def test_a_server_side_drop_mid_run_loses_and_repeats_nothing(
    start_server: StartServer,
) -> None:
    llm = ScriptedLLM(
        reason("save it"),
        calls(("save", {"text": "milk"})),
        observe(should_continue=False, final="Saved."),
    )
    harness = await start_server(llm, approval_registry())

    def drop_then_approve(request: ToolApprovalRequest) -> bool:
        session = harness.service.sessions[client.session_id]
        session.outbox.close_all(1012, "going away for a moment")
        return True  # sent after the socket closed: it goes on the new one

    client = AgentClient(url(harness), on_approval=drop_then_approve, backoff=NOW)
    async with client:
        result = await client.run("remember milk")
        assert client.reconnects == 1
    assert names(result.events) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:save",
        "tool_approval_request:save",
        "tool_complete:save",
        "agent_observe",
        *END,
    ]
    assert seqs(result.events) == list(range(1, 11))
    assert result.answer == "Saved."


async def test_reconnecting_gives_up_after_its_attempts(
    start_server: StartServer,
) -> None:
    llm = ScriptedLLM(reason("save it"), calls(("save", {"text": "milk"})))
    harness = await start_server(llm, approval_registry(), shutdown_grace_s=0)
    async with AgentClient(url(harness), backoff=NOW) as client:
        with pytest.raises(ConnectionFailed) as failed:
            async for event in client.chat("remember milk"):
                if isinstance(event, ToolApprovalRequest):
                    await harness.service.drain()  # refuses every reconnect
    assert failed.value.attempts == 3
    assert str(failed.value).startswith(
        f"lost the connection to {url(harness)} and could not reconnect after "
        "3 attempt(s): server_restarting: the server is restarting"
    )


async def test_an_error_frame_raises_and_the_client_stays_usable(
    start_server: StartServer,
) -> None:
    harness = await start_server(ScriptedLLM("Hi."), test_registry())
    async with AgentClient(url(harness)) as client:
        with pytest.raises(AgentError) as refused:
            async for _ in client.chat("hi", strategy="nope"):
                pass
        assert refused.value.error_type == "invalid_message"
        assert "unknown loop_strategy 'nope'" in refused.value.message
        assert refused.value.frame is not None and client.run_open is False

        for blank in ("", "   "):
            with pytest.raises(AgentError) as local:
                await client.run(blank)
            assert (local.value.error_type, local.value.frame) == (
                "invalid_message",
                None,
            )
            assert local.value.message == (
                "invalid chat message: message: content must not be blank"
                if blank
                else "invalid chat message: content: String should have at least 1 character"
            )
        with pytest.raises(AgentError, match="agent_max_steps: Input should be"):
            await client.run("hi", max_steps=0)
        with pytest.raises(AgentError) as no_prompt:
            await client.run("hi", system_prompt=" ")
        assert no_prompt.value.message == (
            "invalid chat message: message: "
            "system_prompt must not be blank (leave it out for none)"
        )

        assert (await client.run("hi", agent=False)).answer == "Hi."


async def test_leaving_a_chat_early_does_not_leak_into_the_next(
    start_server: StartServer,
) -> None:
    hang = Hang()
    harness = await start_server(ScriptedLLM(reason(), hang, "Fresh."), test_registry())
    async with AgentClient(url(harness)) as client:
        async for event in client.chat("go"):
            if isinstance(event, AgentReason):
                break
        await hang.started.wait()
        await client.stop()  # the run is still open: this stops it
        await client.wait_for_run_end()
        assert client.run_open is False
        fresh = await client.run("again", agent=False)
    assert names(fresh.events) == [
        *["token_stream"] * 2,
        "chat_response",
        "response_complete",
    ]
    assert fresh.answer == "Fresh."


async def test_a_refused_handshake_raises_with_the_servers_reason(
    start_server: StartServer,
) -> None:
    harness = await start_server(ScriptedLLM("Hi."), auth_token=TOKEN)
    for token in ("wrong-token-000000000", None):
        with pytest.raises(HandshakeRefused) as refused:
            async with AgentClient(url(harness), token=token):
                pass
        assert (refused.value.status, refused.value.error_type) == (
            401,
            "unauthorized",
        )
        assert refused.value.message.startswith("sign in first")
    async with AgentClient(url(harness), token=TOKEN) as client:
        assert (await client.run("hi", agent=False)).answer == "Hi."


async def test_nothing_listening_is_a_connection_failure() -> None:
    target = f"ws://127.0.0.1:{free_port()}/ws"
    with pytest.raises(ConnectionFailed) as failed:
        async with AgentClient(target):
            pass
    assert str(failed.value).startswith(f"cannot connect to {target}: ")


async def test_the_sync_client_runs_where_no_loop_is_free(
    start_server: StartServer,
) -> None:
    llm = save_milk(observe(should_continue=False, final="Saved."))
    harness = await start_server(llm, approval_registry())

    def script() -> tuple[str | None, str, str]:
        with SyncAgentClient(
            url(harness), on_question=lambda q: "milk", on_approval=lambda r: True
        ) as client:
            result = client.run("remember something")
            kinds = [label(e.model_dump()) for e in client.chat("hi", agent=False)]
            assert kinds[-2:] == ["chat_response", "response_complete"]
            return result.answer, result.reason, client.session_id

    llm.add("Hello.")
    answer, reason_, session_id = await asyncio.to_thread(script)
    assert (answer, reason_) == ("Saved.", "finished")
    assert len(session_id) == 32


async def test_replace_from_sends_a_message_in_place_of_a_run(
    start_server: StartServer,
) -> None:
    llm = ScriptedLLM("One.", "Two.", "Two, again.")
    harness = await start_server(llm, test_registry())
    async with AgentClient(url(harness)) as client:
        first = await client.run("one", agent=False)
        second = await client.run("two", agent=False)
        replaced = await client.run("two?", agent=False, replace_from=run_id_of(second))
    removed, *rest = replaced.events
    assert isinstance(removed, events.RunsRemoved)
    assert removed.run_ids == [run_id_of(second)]
    *tokens, answer, complete = names(rest)
    assert set(tokens) == {"token_stream"}
    assert (answer, complete) == ("chat_response", "response_complete")
    assert replaced.answer == "Two, again."
    assert [m.content for m in llm.requests[-1].messages if m.role != "system"] == [
        "one",
        "One.",
        "two?",
    ]
    assert run_id_of(first) != run_id_of(second)


def run_id_of(result: RunResult) -> str:
    """The run id of `result`'s frames."""
    run_id = envelope(result.events[-1]).run_id
    assert run_id is not None
    return run_id


@pytest.mark.parametrize(
    ("error_type", "retried"),
    [
        ("server_restarting", True),
        ("busy", True),
        ("store_error", True),
        ("unavailable", True),  # several instances: the owner not reachable yet
        ("invalid_message", False),
        ("unauthorized", False),
    ],
)
def test_which_refusals_at_connect_are_tried_again(
    error_type: str, retried: bool
) -> None:
    assert _retryable(AgentError(error_type, "refused")) is retried
