"""Search from the sidebar after a server restart: the index lives in the
database, so a conversation from before the restart is found by a word of
its answer and opens with its messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import expect

from tests.browser.ui import OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_conversation_from_before_a_restart_is_found_and_opens(
    start_server: StartServer, open_app: OpenApp, tmp_path: Path
) -> None:
    """After a restart on the same database, searching a word of an old
    answer lists its conversation, and clicking it shows the conversation."""
    database = f"sqlite:///{tmp_path / 'loopwire.db'}"
    llm = ScriptedLLM("The capital is Paris.", "Noted: oat milk.")
    harness = await start_server(llm, test_registry(), database_url=database)
    for question in ("capital of France?", "remember the milk"):
        client, _ = await harness.ready_client("client=page")
        await client.chat(question, selected_tools=[])
    await harness.server.stop()

    restarted = await start_server(
        ScriptedLLM(), test_registry(), database_url=database
    )
    app = await open_app(restarted)
    box = app.page.get_by_role("searchbox", name="Search conversations")
    await box.fill("paris")
    titles = app.loc(".conversation-title")
    await expect(titles).to_have_text(["capital of France?"])
    await titles.first.click()
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(
        ["capital of France?"]
    )
    await expect(app.answers()).to_have_text(["The capital is Paris."])
