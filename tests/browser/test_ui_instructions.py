"""The Instructions dialog: a person sets their own and the conversation's
instructions, the model gets them, and they are there again after a reload;
at a desktop's and a phone's size, every control on screen and reachable,
and no serious or critical axe violation."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Locator, expect

from tests.browser.geometry import why_not_clickable
from tests.browser.test_ui_accessibility import violations
from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, reason

pytestmark = pytest.mark.asyncio(loop_scope="session")

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
OWN, HERE = "Answer in French.", "Call me Ada."
OWN_BLOCK = f"<for_all_conversations>\n{OWN}\n</for_all_conversations>\n"
HERE_BLOCK = f"<for_this_conversation>\n{HERE}\n</for_this_conversation>\n"


async def click(control: Locator) -> None:
    """Click `control` as a person would: it must be on screen and on top."""
    await expect(control).to_be_visible()
    assert await why_not_clickable(control) == []
    await control.click()


async def open_dialog(app: App, phone: bool) -> Locator:
    """Open Instructions from the sidebar's foot (on a phone, in the drawer)."""
    if phone:
        toggle = app.page.get_by_role("button", name="Conversations", exact=True)
        if await toggle.get_attribute("aria-expanded") != "true":
            await toggle.click()
    await click(app.page.get_by_role("button", name="Instructions", exact=True))
    dialog = app.page.get_by_role("dialog", name="Instructions")
    await expect(dialog).to_be_visible()
    await expect(app.loc("#instructions-save")).to_be_enabled()
    return dialog


async def controls_are_reachable(dialog: Locator, *names: str) -> None:
    for name in names:
        control = dialog.get_by_label(name, exact=True)
        assert await why_not_clickable(control) == [], name
    for button in ("Save", "Cancel"):
        control = dialog.get_by_role("button", name=button)
        assert await why_not_clickable(control) == [], button


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_set_both_send_and_find_them_after_a_reload(
    start_server: StartServer, open_app: OpenApp, tmp_path: Path, size: str
) -> None:
    """Set in the dialog, both reach the model, and a reload shows them kept."""
    phone = size == "phone"
    llm = ScriptedLLM(
        reason("Greet.", finish=True, final="Bonjour."),
        reason("Greet Ada.", finish=True, final="Bonjour, Ada."),
    )
    database = f"sqlite:///{tmp_path / 'loopwire.db'}"
    harness = await start_server(llm, database_url=database)
    viewport = PHONE if phone else DESKTOP
    app = await open_app(harness, viewport=viewport, touch=phone, bypass_csp=True)

    dialog = await open_dialog(app, phone)
    own = dialog.get_by_label("For all your conversations", exact=True)
    here = dialog.get_by_label("For this conversation", exact=True)
    await expect(here).to_be_hidden()  # no conversation is kept yet
    await expect(app.loc("#instructions-own-count")).to_have_text("0 / 4000 characters")
    await own.fill(OWN)
    await expect(app.loc("#instructions-own-count")).to_have_text(
        "17 / 4000 characters"
    )
    await controls_are_reachable(dialog, "For all your conversations")
    assert await violations(app) == []
    await click(dialog.get_by_role("button", name="Save"))
    await expect(dialog).to_be_hidden()

    await app.type_and_send("hello")
    await app.wait_idle()
    first = llm.requests[0].messages[0].content
    assert first.endswith(f"\n\n{OWN_BLOCK}</custom_instructions>")

    dialog = await open_dialog(app, phone)
    await expect(own).to_have_value(OWN)
    await expect(here).to_have_value("")
    await here.fill(HERE)
    await controls_are_reachable(
        dialog, "For all your conversations", "For this conversation"
    )
    assert await violations(app) == []
    await click(dialog.get_by_role("button", name="Save"))
    await expect(dialog).to_be_hidden()

    await app.type_and_send("hello again")
    await expect(app.answers()).to_have_text(["Bonjour.", "Bonjour, Ada."])
    second = llm.requests[1].messages[0].content
    assert second.endswith(f"\n\n{OWN_BLOCK}\n{HERE_BLOCK}</custom_instructions>")
    assert (
        second.split("\n\n<custom_instructions>")[0]
        == first.split("\n\n<custom_instructions>")[0]
    )

    await app.page.reload()
    await app.expect_connected()
    dialog = await open_dialog(app, phone)
    await expect(own).to_have_value(OWN)
    await expect(here).to_have_value(HERE)
    await app.page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()


async def test_too_long_is_refused_in_the_dialog(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Over the limit, the counter says so, Save shows why, and nothing is kept."""
    harness = await start_server(ScriptedLLM(), instructions_max_chars=20)
    app = await open_app(harness, viewport=DESKTOP)
    dialog = await open_dialog(app, phone=False)
    own = dialog.get_by_label("For all your conversations", exact=True)
    await own.fill("x" * 21)
    counter = app.loc("#instructions-own-count")
    await expect(counter).to_have_text("21 / 20 characters")
    await expect(counter).to_have_class("instructions-count instructions-over")
    await expect(own).to_have_attribute("aria-invalid", "true")
    await click(dialog.get_by_role("button", name="Save"))
    await expect(app.loc("#instructions-status")).to_have_text(
        "Not saved: “For all your conversations” is 21 characters; the limit is 20."
    )
    await expect(dialog).to_be_visible()
    await click(dialog.get_by_role("button", name="Cancel"))
    await expect(dialog).to_be_hidden()
    dialog = await open_dialog(app, phone=False)
    await expect(own).to_have_value("")
