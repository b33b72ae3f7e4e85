"""The Python client and versions: `branches()` lists where the
conversation forks after an edit, `switch_branch()` brings the first
version back (its event and the frames sent again), and the model is then
sent that version; refusals raise `AgentError` with the server's words."""

from __future__ import annotations

import pytest

from backend.protocol import ChatResponse, ResponseComplete
from loopwire import AgentClient, AgentError, branches
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, test_registry


def url(harness: Harness) -> str:
    return harness.server.url("/ws", scheme="ws")


async def test_a_client_lists_the_versions_and_switches_back(
    start_server: StartServer,
) -> None:
    """After an edit, the fork has two versions; switching back returns the
    restored run's frames and the model next sees the first version."""
    llm = ScriptedLLM("one", "edited", "two")
    harness = await start_server(llm, test_registry())
    async with AgentClient(url(harness)) as client:
        first = await client.run("first", agent=False)
        first_id = first.events[-1].run_id  # type: ignore[attr-defined]
        await client.run("first, edited", agent=False, replace_from=first_id)
        await harness.service.flush_all()
        (fork,) = await client.branches()
        assert await branches(url(harness), client.session_id) == [fork]
        assert [(v["branch_id"] is None, v["request"]) for v in fork["versions"]] == [
            (False, "first"),
            (True, "first, edited"),
        ]

        switched, resent = await client.switch_branch(fork["versions"][0]["branch_id"])

        assert [r.run_id for r in switched.restored] == [first_id]
        assert isinstance(resent[-1], ResponseComplete)
        assert [e.message for e in resent if isinstance(e, ChatResponse)] == ["one"]
        again = await client.run("go on", agent=False)
        assert again.answer == "two"
    assert [m.content for m in llm.requests[-1].messages[1:]] == [
        "first",
        "one",
        "go on",
    ]


async def test_a_refused_switch_raises_the_servers_reason(
    start_server: StartServer,
) -> None:
    """An unknown branch id is refused with the server's message."""
    harness = await start_server(ScriptedLLM(), test_registry())
    async with AgentClient(url(harness)) as client:
        with pytest.raises(AgentError) as refused:
            await client.switch_branch("nope")
    assert refused.value.error_type == "invalid_message"
    assert str(refused.value) == (
        "invalid_message: switch_branch: nope is not a branch of this conversation"
    )
