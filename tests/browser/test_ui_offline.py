"""The built-in offline model in the browser: a request in several parts."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.browser.ui import OpenApp
from tests.conftest import StartServer

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_every_part_of_a_request_is_answered(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A two-part request in the browser shows both conversions and a step for each."""
    harness = await start_server(llm_provider="offline")
    app = await open_app(harness)
    await app.use_settings(agent=True)

    await app.type_and_send("convert 10 miles to km and 5 kg to lb")
    await app.wait_idle()

    turn = app.assistant()
    await expect(turn.locator(".answer")).to_contain_text("10 miles is 16.0934 km")
    await expect(turn.locator(".answer")).to_contain_text("5 kg is 11.0231 lb")
    assert await turn.locator(".answer strong").all_text_contents() == [
        "16.0934 km",
        "11.0231 lb",
    ]
    await turn.locator(".trace-summary").click()
    assert await app.texts(".step .step-badge") == ["Step 1 / 10", "Step 2 / 10"]
    assert await app.texts(".tool-card .tool-name") == [
        "convert_units",
        "convert_units",
    ]
    await expect(turn.locator(".run-meta")).to_contain_text("Finished · 2 steps")
