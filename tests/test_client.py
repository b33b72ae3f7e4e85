"""`loopwire.AgentClient` against a live server with a scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from backend.protocol import (
    AgentObserve,
    AgentReason,
    AgentRequestInput,
    AgentTurnStart,
    BudgetLimits,
    ChatResponse,
    Error,
    ResponseComplete,
    ToolApprovalRequest,
    ToolComplete,
    ToolError,
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
from tests.protocol_llm import ProtocolLLM, Use
from tests.scripted_server import (
    MOVED_CLOSE,
    MOVED_DECISION,
    SEQ_GAP,
    SESSION,
    Played,
    scripted_server,
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
    """The `on_question` and `on_approval` handlers carry a run to its answer."""
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
    """Answers and refusals sent in the `chat` loop reach the run; early ones raise."""
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
    """`stop` cancels the LLM call and ends the run; the session takes more messages."""
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
    """`grant_steps` allows a second step; `stop_after_step` ends it after its tool."""
    llm = ScriptedLLM(
        reason(),
        calls(("add", {"expression": "1+1"})),
        observe(),
        reason(),
        calls(("add", {"expression": "2+2"})),
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
    # stopped after the second step's tool: neither observed nor summed up
    assert llm.purposes[-2:] == ["reason", "act"]


async def test_a_budget_is_asked_for_and_raised(start_server: StartServer) -> None:
    """`chat(budget=…)` bounds the run and `grant_budget` raises it, up to the
    server's cap, while the run works."""
    llm = ProtocolLLM(Use("add", {"expression": "1+1"}))
    harness = await start_server(llm, test_registry(), run_budget_tokens=500)
    async with AgentClient(url(harness)) as client:
        seen: list[Event] = []
        async for event in client.chat("add", budget=BudgetLimits(tokens=20)):
            seen.append(event)
            if isinstance(event, AgentTurnStart) and event.step == 1:
                await client.grant_budget(tokens=1_000)
    start = seen[0].model_dump()
    granted = next(e for e in seen if label(e.model_dump()) == "agent_budget_granted")
    assert start["budget"]["tokens"] == 20
    assert granted.model_dump()["granted"]["tokens"] == 480
    assert granted.model_dump()["budget"]["tokens"] == 500
    assert seen[-2].model_dump()["reason"] == "finished"


async def test_reconnect_replays_what_was_missed_exactly_once(
    start_server: StartServer,
) -> None:
    """After a dropped socket, the client reconnects and gets each missed event once."""
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
    """A socket the server drops mid-run reconnects; no event is lost or repeated."""
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
    """When every reconnect is refused, `ConnectionFailed` is raised after 3 tries."""
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
    """Server and local refusals raise `AgentError`; the client can still chat after."""
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
    """Breaking out of a chat leaves none of its events to the client's next run."""
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
    """A wrong or missing token raises `HandshakeRefused` with 401 and the reason."""
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
    """Connecting to a port with no server behind it raises `ConnectionFailed`."""
    target = f"ws://127.0.0.1:{free_port()}/ws"
    with pytest.raises(ConnectionFailed) as failed:
        async with AgentClient(target):
            pass
    assert str(failed.value).startswith(f"cannot connect to {target}: ")


async def test_the_sync_client_runs_where_no_loop_is_free(
    start_server: StartServer,
) -> None:
    """`SyncAgentClient` runs a whole run with handlers from a thread with no loop."""
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
    """`replace_from` removes the named run and answers the new message in its place."""
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
    """Only transient refusals at connect are retried; bad input or auth are not."""
    assert _retryable(AgentError(error_type, "refused")) is retried


# ---------------------------------------------------------------- moved decisions
#
# Several instances: a decision (an answer, an approval) that reaches an
# instance which no longer holds the conversation is refused (`moved`, seq
# 0, then close 1012), or lost as the socket closes. The client sends it
# again once reconnected, if the replay shows it still awaited; never a
# decision the replay shows acted on, nor one for a call asked about again
# (`in_doubt`). The scripted server plays each connection's frames.

CALL = "call_1"
SAVE = {"text": "milk"}
APPROVED = {"type": "tool_approval_response", "tool_call_id": CALL, "approved": True}
SAVED = [
    "tool_start:save",
    "tool_approval_request:save",
    "tool_complete:save",
    "chat_response",
    "response_complete",
]


def approval_request(*, in_doubt: bool = False) -> ToolApprovalRequest:
    return ToolApprovalRequest(
        tool_call_id=CALL,
        tool_name="save",
        arguments=SAVE,
        description="Save a note.",
        step=1,
        in_doubt=in_doubt,
    )


async def asked_to_approve(played: Played) -> None:
    """A first connection: the chat, then the call waits for approval (seq 2)."""
    await played.ready(last_seq=0, resumed=False)
    assert (await played.recv())["type"] == "chat"
    start = ToolStart(tool_call_id=CALL, tool_name="save", arguments=SAVE, step=1)
    await played.send(start, seq=1)
    await played.send(approval_request(), seq=2)


async def saved_from(played: Played, seq: int) -> None:
    """The call's result and the run's end, numbered from `seq`."""
    done = ToolComplete(
        tool_call_id=CALL, tool_name="save", result=SAVE, duration_ms=1.0, step=1
    )
    await played.send(done, seq=seq)
    await played.send(ChatResponse(message="Saved."), seq=seq + 1)
    await played.send(ResponseComplete(), seq=seq + 2)


async def refused_as_moved(played: Played) -> None:
    """The decision reached an instance that let the conversation go."""
    await played.recv()
    moved = Error(message=MOVED_DECISION, error_type="moved")
    await played.send(moved, seq=0, run_id=None)
    await played.close(1012, MOVED_CLOSE)


async def test_an_approval_refused_as_moved_is_sent_again_after_the_reconnect() -> None:
    """An approval refused as `moved` is resent once to the new owner on reconnect."""

    async def stale(played: Played) -> None:
        await asked_to_approve(played)
        await refused_as_moved(played)

    async def owner(played: Played) -> None:
        # taken over after a crash: seqs skip ahead, nothing new to replay
        await played.ready(last_seq=2 + SEQ_GAP)
        assert await played.recv() == APPROVED
        await saved_from(played, 3 + SEQ_GAP)

    async with scripted_server(stale, owner) as server:
        client = AgentClient(server.url, on_approval=lambda r: True, backoff=NOW)
        async with client:
            result = await client.run("remember milk", agent=False)
            assert client.reconnects == 1
    first, second = server.played
    assert [f["type"] for f in first.received] == ["chat", "tool_approval_response"]
    assert first.received[1] == APPROVED
    assert second.query == {"session_id": SESSION, "last_seq": "2"}
    assert second.received == [APPROVED]  # once, and nothing else
    assert names(result.events) == SAVED
    assert seqs(result.events) == [1, 2, *(n + SEQ_GAP for n in (3, 4, 5))]


async def test_an_answer_refused_as_moved_is_sent_again_after_the_reconnect() -> None:
    """An answer refused as `moved` is resent once to the new owner on reconnect."""
    answer = {"type": "agent_user_input", "content": "milk", "question_id": CALL}

    async def stale(played: Played) -> None:
        await played.ready(last_seq=0, resumed=False)
        await played.recv()
        question = AgentRequestInput(
            step=1, question="What should I save?", question_id=CALL, timeout_s=300
        )
        await played.send(question, seq=1)
        await refused_as_moved(played)

    async def owner(played: Played) -> None:
        await played.ready(last_seq=1)  # handed over cleanly: nothing to replay
        assert await played.recv() == answer
        await played.send(AgentObserve(step=1, content="milk", control=None), seq=2)
        await played.send(ChatResponse(message="Saved."), seq=3)
        await played.send(ResponseComplete(), seq=4)

    async with (
        scripted_server(stale, owner) as server,
        AgentClient(server.url, on_question=lambda q: "milk", backoff=NOW) as client,
    ):
        result = await client.run("remember something")
    first, second = server.played
    assert first.received[1:] == [answer]
    assert second.query == {"session_id": SESSION, "last_seq": "1"}
    assert second.received == [answer]
    assert names(result.events) == [
        "agent_request_input",
        "agent_observe",
        "chat_response",
        "response_complete",
    ]


async def test_a_decision_the_replay_shows_acted_on_is_not_sent_again() -> None:
    """The socket closed (1012, no `moved`) after the approval went out; the
    replay shows the call's result: it was taken, so nothing is resent."""

    async def dropped(played: Played) -> None:
        await asked_to_approve(played)
        assert await played.recv() == APPROVED
        await played.close(1012, MOVED_CLOSE)

    async def owner(played: Played) -> None:
        await played.ready(last_seq=3)
        await saved_from(played, 3)  # seq 3 is the replay; the rest is live

    async with scripted_server(dropped, owner) as server:
        client = AgentClient(server.url, on_approval=lambda r: True, backoff=NOW)
        async with client:
            result = await client.run("remember milk", agent=False)
    assert server.played[1].received == []
    assert names(result.events) == SAVED
    assert seqs(result.events) == [1, 2, 3, 4, 5]


async def test_a_call_asked_about_again_in_doubt_is_left_to_the_handler() -> None:
    """The instance died (no close frame) after the approval went out and
    while the call ran; the one that took over asks again, `in_doubt`. The
    first approval is not resent (it was taken: it would run the call
    again unasked); the handler decides on the new request."""
    asked: list[bool] = []

    def approve_once(request: ToolApprovalRequest) -> bool:
        asked.append(request.in_doubt)
        return not request.in_doubt

    async def killed(played: Played) -> None:
        await asked_to_approve(played)
        assert await played.recv() == APPROVED
        played.socket.transport.abort()

    async def heir(played: Played) -> None:
        again = 3 + SEQ_GAP
        await played.ready(last_seq=again)
        await played.send(approval_request(in_doubt=True), seq=again)
        assert await played.recv() == {**APPROVED, "approved": False}
        cancelled = ToolError(
            tool_call_id=CALL,
            tool_name="save",
            error="save was interrupted: it may have run",
            status="cancelled",
            duration_ms=0.0,
            step=1,
        )
        await played.send(cancelled, seq=again + 1)
        await played.send(ResponseComplete(), seq=again + 2)

    async with scripted_server(killed, heir) as server:
        client = AgentClient(server.url, on_approval=approve_once, backoff=NOW)
        async with client:
            result = await client.run("remember milk", agent=False)
    assert asked == [False, True]
    assert server.played[1].received == [{**APPROVED, "approved": False}]
    assert names(result.events) == [
        "tool_start:save",
        "tool_approval_request:save",
        "tool_approval_request:save",
        "tool_error:save:cancelled",
        "response_complete",
    ]


async def test_an_approval_fenced_off_by_the_store_runs_the_tool_once(
    start_server: StartServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real server. While the run waits for approval another instance
    takes the conversation over (its epoch rises in the store); the
    approval reaches the old session, whose write the store refuses: the
    client is told `moved` and the socket closes (1012). It reconnects, to
    the instance that holds the conversation now (here the same process,
    taking it over as another instance would), the replay shows the
    approval still awaited, and the approval sent again runs the tool once."""
    saver = Saver()
    llm = ScriptedLLM(
        reason("save it"),
        calls(("save", {"text": "milk"})),
        observe(should_continue=False, final="Saved."),
    )
    harness = await start_server(llm, approval_registry(saver))
    service = harness.service
    opened = service.open_session

    async def taking_over(session_id: str | None, **options: Any) -> Any:
        loaded = session_id not in service.table.by_id
        session, resumed = await opened(session_id, **options)
        if loaded and resumed:
            await service.recover_session(session)
        return session, resumed

    monkeypatch.setattr(service, "open_session", taking_over)

    async def taken_over_meanwhile(request: ToolApprovalRequest) -> bool:
        await service.store.take(client.session_id, max_frame_bytes=1 << 20)
        return True

    client = AgentClient(url(harness), on_approval=taken_over_meanwhile, backoff=NOW)
    async with client:
        result = await client.run("remember milk")
        assert client.reconnects == 1
    assert saver.saved == ["milk"]
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
    numbers = seqs(result.events)
    assert numbers[:5] == [1, 2, 3, 4, 5]
    after = numbers[5]  # taken over uncleanly: seqs jump ahead, then go on
    assert after > 6 and numbers[5:] == list(range(after, after + 5))
