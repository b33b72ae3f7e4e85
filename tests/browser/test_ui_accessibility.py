"""axe-core (vendored, tests only) finds no serious or critical violation in
the page's main states: empty, a finished agent run, a question waiting, an
approval asked, the tools popover, the model card, a message being edited,
the shortcuts dialog, light and dark, and on a phone with the conversations
drawer or the tools popover open."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, expect

from tests.browser.ui import PHONE, App
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

AXE = Path(__file__).resolve().parent / "vendor" / "axe" / "axe.min.js"
SERIOUS = {"serious", "critical"}


async def violations(app: App) -> list[str]:
    """Serious and critical axe violations on the page as it is now."""
    if not await app.page.evaluate("typeof window.axe !== 'undefined'"):
        await app.page.add_script_tag(path=str(AXE))
    result: dict[str, Any] = await app.page.evaluate(
        "axe.run(document, {resultTypes: ['violations']})"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — "
        + "; ".join(n["target"][0] for n in v["nodes"][:3])
        for v in result["violations"]
        if v["impact"] in SERIOUS
    ]


async def open_page(browser: Browser, url: str, **options: Any) -> App:
    app = await App.open(browser, url, bypass_csp=True, **options)
    return await app.load()


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_the_main_states_have_no_serious_violations(
    start_server: StartServer, browser: Browser, scheme: str
) -> None:
    """Each main page state, light or dark, has no serious or critical axe violation."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("km it is"),
        reason("done", finish=True, final="10 miles is **16.09 km**"),
    )
    harness = await start_server(llm, test_registry())
    app = await open_page(browser, harness.server.url("/"), color_scheme=scheme)
    try:
        assert await violations(app) == [], "empty page"
        await app.type_and_send("convert 10 miles")
        await expect(app.banner).to_be_visible()
        found = await violations(app)
        assert found == [], found
        await app.page.keyboard.type("km")
        await app.page.keyboard.press("Enter")
        await app.wait_idle()
        assert await violations(app) == [], "a finished run"
        await app.open_tools()
        assert await violations(app) == [], "the tools popover"
        await app.page.keyboard.press("Escape")
        await app.loc("#model-chip").click()
        await expect(app.loc("#model-popover")).to_be_visible()
        assert await violations(app) == [], "the model card"
        await app.page.keyboard.press("Escape")
        await app.loc(".turn-user").get_by_role("button", name="Edit message").click()
        assert await violations(app) == [], "editing a message"
        await app.page.keyboard.press("Escape")
        await app.page.get_by_role("button", name="Keyboard shortcuts").click()
        await expect(app.page.get_by_role("dialog")).to_be_visible()
        assert await violations(app) == [], "the shortcuts dialog"
        assert app.problems == []
    finally:
        await app.close()


async def test_on_a_phone_with_the_drawer_open(
    start_server: StartServer, browser: Browser
) -> None:
    """On a phone, the open drawer and the tools popover have no serious violation."""
    harness = await start_server(ScriptedLLM(), test_registry())
    app = await open_page(browser, harness.server.url("/"), viewport=PHONE, touch=True)
    try:
        await app.page.get_by_role("button", name="Conversations").click()
        await expect(app.loc("#sidebar")).to_be_visible()
        assert await violations(app) == [], "phone, drawer open"
        await app.page.get_by_role("button", name="Conversations").click()
        await app.open_tools()
        assert await violations(app) == [], "phone, tools popover"
        assert app.problems == []
    finally:
        await app.close()


async def test_with_the_approval_dialog_open(
    start_server: StartServer, browser: Browser
) -> None:
    """The open tool-approval dialog has no serious or critical axe violation."""
    harness = await start_server(llm_provider="offline")
    app = await open_page(browser, harness.server.url("/"))
    try:
        await app.type_and_send("remember: buy milk")
        await expect(app.dialog).to_be_visible()
        found = await violations(app)
        assert found == [], found
        await app.page.get_by_role("button", name="Reject").click()
        await app.wait_idle()
        assert app.problems == []
    finally:
        await app.close()
