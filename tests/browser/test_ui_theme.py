"""The theme button: as the system, light, dark; the choice outlives a reload
and the code highlighting follows it."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

LIGHT_BG = "rgb(246, 247, 249)"
DARK_BG = "rgb(15, 18, 23)"


async def background(app: App) -> str:
    color: str = await app.page.evaluate(
        "getComputedStyle(document.body).backgroundColor"
    )
    return color


async def test_the_theme_button_cycles_and_is_remembered(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """The theme button cycles system, light and dark; the choice outlives a reload."""
    harness = await start_server(ScriptedLLM(), test_registry())
    app = await open_app(harness, color_scheme="dark")  # the system says dark
    button = app.loc("#theme-button")
    html = app.loc("html")
    await expect(button).to_have_attribute("aria-label", "Theme: as the system")
    assert await background(app) == DARK_BG

    await button.click()
    await expect(button).to_have_attribute("aria-label", "Theme: light")
    await expect(html).to_have_attribute("data-theme", "light")
    assert await background(app) == LIGHT_BG
    await expect(app.loc("#code-light")).to_have_attribute("media", "all")
    await expect(app.loc("#code-dark")).to_have_attribute("media", "not all")

    await app.page.reload()
    await app.expect_connected()
    await expect(html).to_have_attribute("data-theme", "light")
    assert await background(app) == LIGHT_BG

    await button.click()
    await expect(html).to_have_attribute("data-theme", "dark")
    assert await background(app) == DARK_BG
    await button.click()
    await expect(button).to_have_attribute("aria-label", "Theme: as the system")
    await expect(html).not_to_have_attribute("data-theme", "dark")
    assert await background(app) == DARK_BG
    await expect(app.loc("#code-dark")).to_have_attribute(
        "media", "(prefers-color-scheme: dark)"
    )


async def test_on_a_light_system_the_first_click_goes_dark(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Every click changes what is seen: on a light system the first goes
    dark (it went to "light" and seemed to do nothing), then light, then
    back to the system's."""
    harness = await start_server(ScriptedLLM(), test_registry())
    app = await open_app(harness, color_scheme="light")
    button, html = app.loc("#theme-button"), app.loc("html")
    assert await background(app) == LIGHT_BG
    await button.click()
    await expect(html).to_have_attribute("data-theme", "dark")
    assert await background(app) == DARK_BG
    await button.click()
    await expect(html).to_have_attribute("data-theme", "light")
    await button.click()
    await expect(button).to_have_attribute("aria-label", "Theme: as the system")
    assert await background(app) == LIGHT_BG
