"""Keyboard shortcuts: new chat, focus the message box, the sidebar, and the
dialog that lists them (which axe finds no serious fault in)."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.browser.ui import OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_the_shortcuts_work_and_are_listed(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Each shortcut works as listed, and the shortcut dialog opens and closes."""
    harness = await start_server(ScriptedLLM("Four."), test_registry())
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("what is 2+2?")
    await app.wait_idle()
    keyboard = app.page.keyboard

    await app.page.get_by_role("link", name="what is 2+2?").focus()
    await keyboard.press("Shift+Escape")
    await expect(app.composer).to_be_focused()

    toggle = app.page.get_by_role("button", name="Conversations")
    await keyboard.press("Control+Shift+S")
    await expect(toggle).to_have_attribute("aria-expanded", "false")
    await expect(app.loc("#sidebar")).to_be_hidden()
    await keyboard.press("Control+Shift+S")
    await expect(toggle).to_have_attribute("aria-expanded", "true")

    await keyboard.press("Control+Shift+O")
    await expect(app.loc("#messages > *")).to_have_count(0)
    await expect(app.composer).to_be_focused()
    await app.expect_connected()

    await keyboard.press("Control+/")
    dialog = app.page.get_by_role("dialog", name="Keyboard shortcuts")
    await expect(dialog).to_be_visible()
    await expect(dialog.locator("th")).to_have_text(
        [
            "New chat",
            "Focus the message box",
            "Show or hide the conversations",
            "Stop the run",
            "Send (or answer the agent's question)",
            "New line",
            "These shortcuts",
        ]
    )
    await keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    await app.page.get_by_role("button", name="Keyboard shortcuts").click()
    await expect(dialog).to_be_visible()
    await dialog.get_by_role("button", name="Close").click()
    await expect(dialog).to_be_hidden()
