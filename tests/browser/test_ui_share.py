"""Share links from the page (`render/share.js`, `templates/share.html`):
with sign-in required, the header's Share makes a link, which a fresh
browser that never signed in opens and reads; "Stop sharing" makes the
link a 404 page. The dialog and the shared page pass the layout checks and
axe, at a desktop's size and a phone's; with sharing off there is no Share."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Locator, expect

from tests.browser.geometry import why_not_clickable
from tests.browser.layout import layout_problems
from tests.browser.test_ui_accessibility import violations
from tests.browser.ui import App, OpenApp
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, test_registry

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(180)]

SIZES = {
    "desktop": ({"width": 1280, "height": 800}, False),
    "phone": ({"width": 390, "height": 844}, True),
}
TOKEN = "s3cret-token-0123456789"
NOT_FOUND = (
    "console error: Failed to load resource: the server responded with a "
    "status of 404 (Not Found)"
)


async def clickable(control: Locator) -> None:
    """`control` is on screen where a person sees it, nothing over it."""
    await expect(control).to_be_visible()
    assert await why_not_clickable(control) == []


async def signed_in_chat(app: App, harness: Harness) -> None:
    """Sign in with the token, then one plain question answered."""
    await app.page.goto(harness.server.url("/login"))
    await app.page.fill("#token", TOKEN)
    await app.page.click(".login-button")
    await app.expect_connected()
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("what is 2+2?")
    await expect(app.answers().last).to_have_text("Four.")
    await app.wait_idle()


@pytest.mark.parametrize("size", SIZES)
async def test_a_link_made_on_the_page_is_read_signed_out_until_stopped(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """Share → Create link; a fresh signed-out browser reads it; Stop sharing → 404."""
    viewport, phone = SIZES[size]
    harness = await start_server(
        ScriptedLLM("Four."), test_registry(), auth_token=TOKEN
    )
    app = await open_app(
        harness, load=False, viewport=viewport, touch=phone, bypass_csp=True
    )
    await signed_in_chat(app, harness)

    share = app.page.get_by_role("button", name="Share conversation")
    await clickable(share)
    await share.click()
    dialog = app.page.get_by_role("dialog", name="Share this conversation")
    await expect(dialog).to_be_visible()
    await expect(app.loc("#share-empty")).to_have_text("No links yet.")
    create = dialog.get_by_role("button", name="Create link")
    await clickable(create)
    await create.click()
    field = dialog.get_by_role("textbox", name="The new link")
    await expect(field).to_have_value(re.compile(r"^http://.+/s/[A-Za-z0-9_-]{43}$"))
    url = await field.input_value()
    stop = dialog.get_by_role("button", name=re.compile("^Stop sharing the link"))
    await expect(stop).to_have_count(1)
    for control in (field, dialog.get_by_role("button", name="Copy"), create, stop):
        await clickable(control)
    await clickable(dialog.get_by_role("button", name="Close"))
    assert await layout_problems(app.page) == []
    assert await violations(app) == []

    reader = await open_app(
        harness, load=False, viewport=viewport, touch=phone, bypass_csp=True
    )
    answer = await reader.page.goto(url)
    assert answer is not None and answer.status == 200
    await expect(reader.page).to_have_title("what is 2+2? · loopwire")
    await expect(reader.page.get_by_role("heading", level=1)).to_have_text(
        "what is 2+2?"
    )
    await expect(reader.loc(".bubble-text")).to_have_text(["what is 2+2?"])
    await expect(reader.loc(".share-text")).to_have_text(["Four."])
    await expect(reader.loc(".share-text p")).to_have_text("Four.")  # rendered
    assert await reader.page.context.cookies() == []
    assert await layout_problems(reader.page) == []
    assert await violations(reader) == []

    await stop.click()
    await expect(stop).to_have_count(0)
    await expect(app.loc("#share-empty")).to_be_visible()
    await expect(app.loc("#share-status")).to_have_text("That link no longer works.")
    gone = await reader.page.reload()
    assert gone is not None and gone.status == 404
    await expect(reader.page.get_by_role("heading", level=1)).to_have_text(
        "This link does not exist"
    )
    assert await violations(reader) == []
    reader.problems.remove(NOT_FOUND)

    await dialog.get_by_role("button", name="Close").click()
    await expect(dialog).to_be_hidden()
    await expect(share).to_be_focused()


async def test_no_share_button_when_sharing_is_off(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """With `sharing` off a stored conversation shows no Share button."""
    harness = await start_server(ScriptedLLM("Four."), test_registry(), sharing=False)
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("what is 2+2?")
    await expect(app.answers().last).to_have_text("Four.")
    await app.wait_idle()
    await expect(app.page).to_have_url(re.compile(r"/c/[0-9a-f]{32}$"))
    await expect(
        app.page.get_by_role("button", name="Share conversation")
    ).to_be_hidden()


async def test_a_new_chat_has_no_share_button(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Before its first message a conversation has nothing to share."""
    harness = await start_server(ScriptedLLM("Four."), test_registry())
    app = await open_app(harness)
    await expect(
        app.page.get_by_role("button", name="Share conversation")
    ).to_be_hidden()
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("what is 2+2?")
    await app.wait_idle()
    await expect(
        app.page.get_by_role("button", name="Share conversation")
    ).to_be_visible()
    await app.page.click("#new-chat")
    await expect(
        app.page.get_by_role("button", name="Share conversation")
    ).to_be_hidden()
