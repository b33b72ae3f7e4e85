"""A real server restart (SIGTERM, then a new process on the same port and
database) with the page open: the pending approval and the pending question
come back, and the run goes on once the user answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from tests.browser.ui import App
from tests.server_process import ServerProcess, server_process

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(180)]

REFUSED = "net::ERR_CONNECTION_REFUSED"
"""In Chromium's console errors for an attempt while no server listens:
expected here, between the two processes."""


RESTARTING = "The server is restarting: the page reconnects and carries on."


async def restart(app: App, server: ServerProcess, database_url: str) -> ServerProcess:
    """SIGTERM `server`, start its successor, and have the page reconnect now;
    the page says the server restarts while it is away, and no more after."""
    await server.terminate()
    await expect(app.loc("#connection")).to_have_attribute("data-state", "reconnecting")
    await expect(app.loc(".notice")).to_have_text(["Server restarting" + RESTARTING])
    successor = ServerProcess(database_url, port=server.port, llm_provider="offline")
    await successor.start()
    await app.connection("connection.reconnectNow()")
    await app.expect_connected()
    await expect(app.loc(".notice")).to_have_count(0)
    return successor


async def test_a_pending_approval_and_question_survive_a_restart(
    browser: Browser, tmp_path: Path
) -> None:
    """After a server restart, the pending approval and question each return once."""
    database_url = f"sqlite:///{tmp_path / 'loopwire.db'}"
    async with server_process(database_url, llm_provider="offline") as first:
        app = await App.open(browser, f"http://127.0.0.1:{first.port}/")
        try:
            await app.load()
            await app.type_and_send("remember: buy milk")
            await expect(app.dialog).to_be_visible()
            await expect(app.loc("#approval-tool")).to_have_text("save_note")

            server = await restart(app, first, database_url)
            try:
                await expect(app.dialog).to_be_visible()  # asked again, once
                await expect(app.loc("#approval-tool")).to_have_text("save_note")
                await app.page.get_by_role("button", name="Approve").click()
                await app.wait_idle()
                await expect(app.answers()).to_contain_text("buy milk")
                assert app.sent_of("tool_approval_response")[0]["approved"] is True

                await app.composer.click()  # a mouse user, after the dialog
                await app.page.keyboard.type("convert 10 miles")
                await app.page.keyboard.press("Enter")
                await expect(app.banner).to_be_visible()
                server = await restart(app, server, database_url)
                await expect(app.banner).to_be_visible()
                await expect(app.loc(".question-card-text")).to_have_count(1)
                answer = app.page.get_by_role("textbox", name="Your answer")
                await answer.fill("km")
                await answer.press("Enter")
                await app.wait_idle()
                await expect(app.answers().last).to_contain_text("16.09")
                texts = await app.texts(".turn-user .bubble-text")
                assert texts == ["remember: buy milk", "convert 10 miles"]
            finally:
                await server.stop_quietly()
        finally:
            problems = [p for p in app.problems if REFUSED not in p]
            foreign = app.foreign_requests()
            await app.close()
    assert problems == [] and foreign == []
