"""`loopwire.AgentClient`'s approval decisions against a live server: approve
with edited arguments, refused ones that do not fit, always allow, reject
with a reason; from the loop body, from `on_approval`, and blocking."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from backend.protocol import Error, ToolApprovalDecided, ToolApprovalRequest
from loopwire import AgentClient, AgentError, Decision, Event, SyncAgentClient
from tests.conftest import Harness, StartServer
from tests.fakes import Saver, ScriptedLLM, approval_registry, calls, observe, reason
from tests.ws_client import label

END = ["chat_response", "agent_completion", "response_complete"]
ASKED = [
    "agent_start",
    "agent_turn_start",
    "agent_reason",
    "tool_start:save",
    "tool_approval_request:save",
]
MISFIT = (
    "invalid arguments for save: text: Input should be a valid string; the "
    "approval still waits (send it again with arguments that fit, or as they were)"
)


def names(events: Sequence[Event]) -> list[str]:
    return [label(event.model_dump()) for event in events]


def url(harness: Harness) -> str:
    return harness.server.url("/ws", "ws")


def saving(text: str, *after: Any) -> list[Any]:
    """A react step that saves `text` (a tool that asks first), then `after`."""
    return [reason("save it"), calls(("save", {"text": text})), *after]


def done(final: str = "Saved.") -> str:
    return observe(should_continue=False, final=final)


def tool_results(llm: ScriptedLLM) -> list[str | None]:
    """What the model was told of each tool call, in its last request."""
    return [m.content for m in llm.requests[-1].messages if m.role == "tool"]


async def test_approve_with_edited_arguments_after_a_misfit(
    start_server: StartServer,
) -> None:
    """Arguments that do not fit come back as an `invalid_answer` event and the
    request waits; approved again with ones that fit, the call runs with them."""
    saver, llm = Saver(), ScriptedLLM(*saving("milk", done()))
    harness = await start_server(llm, approval_registry(saver))
    seen: list[Event] = []
    async with AgentClient(url(harness)) as client:
        async for event in client.chat("remember milk"):
            seen.append(event)
            if isinstance(event, ToolApprovalRequest):
                await client.approve(event.tool_call_id, True, arguments={"text": 5})
            elif isinstance(event, Error):
                assert event.message == MISFIT
                await client.approve(
                    seen[4].tool_call_id,  # type: ignore[attr-defined]
                    True,
                    arguments={"text": "oat milk"},
                )
    assert names(seen) == [
        *ASKED,
        "error:invalid_answer",
        "tool_approval_decided",
        "tool_complete:save",
        "agent_observe",
        *END,
    ]
    decided = seen[6]
    assert isinstance(decided, ToolApprovalDecided)
    assert (decided.arguments, decided.remember) == ({"text": "oat milk"}, None)
    assert saver.saved == ["oat milk"]
    assert tool_results(llm) == [
        '{\n  "saved": "oat milk"\n}\n'
        '(The user changed the arguments before approving: {"text": "oat milk"})'
    ]


async def test_a_handlers_misfit_is_raised(start_server: StartServer) -> None:
    """An `on_approval` decision whose arguments do not fit raises
    `invalid_answer`: no one else would decide again."""
    saver = Saver()
    harness = await start_server(ScriptedLLM(*saving("milk")), approval_registry(saver))
    seen: list[Event] = []
    async with AgentClient(
        url(harness), on_approval=lambda r: Decision(True, arguments={"text": 5})
    ) as client:
        with pytest.raises(AgentError) as refused:
            async for event in client.chat("remember milk"):
                seen.append(event)
        assert (refused.value.error_type, refused.value.message) == (
            "invalid_answer",
            MISFIT,
        )
        await client.stop()
        await client.wait_for_run_end()
    assert names(seen) == ASKED and saver.saved == []


async def test_always_allow_from_the_handler(start_server: StartServer) -> None:
    """`Decision(True, remember="conversation")` from `on_approval`: the next
    call of the tool in the conversation runs without a request, in this run
    and the next."""
    saver = Saver()
    llm = ScriptedLLM(
        *saving("milk", observe("Saved milk; eggs next.")),
        *saving("eggs", done()),
        *saving("bread", done()),
    )
    harness = await start_server(llm, approval_registry(saver))
    asked: list[str] = []

    def always(request: ToolApprovalRequest) -> Decision:
        asked.append(request.tool_call_id)
        return Decision(True, remember="conversation")

    async with AgentClient(url(harness), on_approval=always) as client:
        first = await client.run("remember milk and eggs")
        second = await client.run("and bread")
    assert names(first.events) == [
        *ASKED,
        "tool_approval_decided",
        "tool_complete:save",
        "agent_observe",
        "agent_turn_start",
        "agent_reason",
        "tool_start:save",
        "tool_complete:save",
        "agent_observe",
        *END,
    ]
    decided = first.events[5]
    assert isinstance(decided, ToolApprovalDecided)
    assert (decided.arguments, decided.remember) == (None, "conversation")
    assert "tool_approval_request:save" not in names(second.events)
    assert len(asked) == 1 and saver.saved == ["milk", "eggs", "bread"]


async def test_reject_with_a_reason_reaches_the_model(
    start_server: StartServer,
) -> None:
    """`Decision(False, reason=…)`: the call is not run and the model is told
    the reason as its result."""
    saver, llm = Saver(), ScriptedLLM(*saving("milk"), "I did not save it.")
    harness = await start_server(llm, approval_registry(saver))
    async with AgentClient(
        url(harness), on_approval=lambda r: Decision(False, reason="not today")
    ) as client:
        result = await client.run("remember milk")
    assert names(result.events) == [
        *ASKED,
        "tool_error:save:rejected",
        *["token_stream"] * 3,
        *END,
    ]
    assert result.reason == "rejected" and saver.saved == []
    assert tool_results(llm) == [
        "Error (rejected): the user declined to run save (reason: not today)"
    ]


async def test_the_sync_client_approves_with_arguments_and_remember(
    start_server: StartServer,
) -> None:
    """`SyncAgentClient.approve` takes `arguments` and `remember` too."""
    saver = Saver()
    llm = ScriptedLLM(*saving("milk", done()))
    harness = await start_server(llm, approval_registry(saver))

    def run() -> list[Event]:
        seen: list[Event] = []
        with SyncAgentClient(url(harness)) as client:
            for event in client.chat("remember milk"):
                seen.append(event)
                if isinstance(event, ToolApprovalRequest):
                    client.approve(
                        event.tool_call_id,
                        True,
                        arguments={"text": "soy"},
                        remember="user",
                    )
        return seen

    seen = await asyncio.to_thread(run)
    decided = seen[5]
    assert isinstance(decided, ToolApprovalDecided)
    assert (decided.arguments, decided.remember) == ({"text": "soy"}, "user")
    assert saver.saved == ["soy"]
