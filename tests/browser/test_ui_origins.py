"""The page lists its own conversations (`render/origins.js`): those the
page started (and older untagged ones, and imports) by default; "Show
conversations from scripts" (remembered across a reload) lists all, each
started by a script marked with its kind. The switch passes the layout
checks and axe, at a desktop's size and a phone's."""

from __future__ import annotations

import pytest
from playwright.async_api import Locator, Response, expect

from loopwire import AgentClient
from tests.browser.geometry import why_not_clickable
from tests.browser.layout import layout_problems
from tests.browser.test_ui_accessibility import violations
from tests.browser.ui import App, OpenApp
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

SIZES = {
    "desktop": ({"width": 1280, "height": 800}, False),
    "phone": ({"width": 390, "height": 844}, True),
}


async def from_scripts(harness: Harness) -> None:
    """Three conversations started elsewhere: the CLI, a bare socket, Python."""
    for query, text in (("client=cli", "from the cli"), ("", "from a socket")):
        client, _ = await harness.ready_client(query)
        await client.chat(text, selected_tools=[])
    async with AgentClient(harness.server.url("/ws", "ws")) as python:
        await python.run("from python", agent=False, tools=[])


def listing(response: Response) -> bool:
    return "/api/conversations?" in response.url


async def show_list(app: App, phone: bool) -> None:
    if phone:
        await app.page.get_by_role("button", name="Conversations").click()
    await expect(app.loc("#sidebar")).to_be_visible()


async def flip(app: App, switch: Locator, on: bool) -> None:
    """Set the switch, waiting for the list it asks for."""
    async with app.page.expect_response(listing):
        await switch.set_checked(on)


@pytest.mark.parametrize("size", SIZES)
async def test_scripts_are_listed_only_when_asked_and_marked(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """By default only the page's conversation is listed; the switch lists
    all, tagged CLI / Script / Python, and stays on after a reload; off
    again, the page's own only."""
    viewport, phone = SIZES[size]
    llm = ScriptedLLM("One.", "Two.", "Three.", "Four.")
    harness = await start_server(llm, test_registry())
    await from_scripts(harness)
    app = await open_app(harness, viewport=viewport, touch=phone, bypass_csp=True)
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("from the page")
    await app.wait_idle()
    await show_list(app, phone)
    titles = app.loc(".conversation-title")
    await expect(titles).to_have_text(["from the page"])
    await expect(app.loc(".conversation-origin")).to_have_count(0)

    switch = app.page.get_by_role("switch", name="Show conversations from scripts")
    await expect(switch).not_to_be_checked()
    assert await why_not_clickable(switch) == []
    await flip(app, switch, True)
    await expect(titles).to_have_text(
        ["from the page", "from python", "from a socket", "from the cli"]
    )
    await expect(app.loc(".conversation-origin")).to_have_text(
        ["Python", "Script", "CLI"]
    )
    await expect(app.loc(".conversation-origin").first).to_have_attribute(
        "title", "Started by the Python client"
    )
    assert await layout_problems(app.page) == []
    assert await violations(app) == []

    async with app.page.expect_response(listing):
        await app.page.reload()
    await show_list(app, phone)
    await expect(switch).to_be_checked()
    await expect(titles).to_have_count(4)
    await flip(app, switch, False)
    await expect(titles).to_have_text(["from the page"])


@pytest.mark.parametrize("size", SIZES)
async def test_a_search_keeps_to_the_conversations_listed(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """A search finds the page's own; scripts' too once they are shown."""
    viewport, phone = SIZES[size]
    harness = await start_server(ScriptedLLM("One.", "Two."), test_registry())
    for query in ("client=page", "client=cli"):
        client, _ = await harness.ready_client(query)
        await client.chat(f"milk {query[7:]}", selected_tools=[])
    app = await open_app(harness, viewport=viewport, touch=phone)
    await show_list(app, phone)
    titles = app.loc(".conversation-title")
    box = app.page.get_by_role("searchbox", name="Search conversations")
    await box.fill("milk")
    await expect(titles).to_have_text(["milk page"])

    switch = app.page.get_by_role("switch", name="Show conversations from scripts")
    await switch.set_checked(True)
    await expect(titles).to_have_text(["milk cli", "milk page"])
    await expect(app.loc("#conversations-title")).to_have_text("Found")
