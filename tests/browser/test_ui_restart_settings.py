"""What a person set up in the page outlives a server restart: their
instructions (their own and the conversation's) are in the dialog again and
reach the model, and a share link made before the restart is still listed
and still opens for someone not signed in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.async_api import expect

from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, reason

pytestmark = pytest.mark.asyncio(loop_scope="session")

OWN, HERE = "Answer in French.", "Call me Ada."


async def set_instructions(app: App) -> None:
    await app.page.get_by_role("button", name="Instructions", exact=True).click()
    dialog = app.page.get_by_role("dialog", name="Instructions")
    await dialog.get_by_label("For all your conversations", exact=True).fill(OWN)
    await dialog.get_by_label("For this conversation", exact=True).fill(HERE)
    await dialog.get_by_role("button", name="Save").click()
    await expect(dialog).to_be_hidden()


async def make_link(app: App) -> str:
    """A share link made from the dialog: its id."""
    await app.page.get_by_role("button", name="Share conversation").click()
    dialog = app.page.get_by_role("dialog", name="Share this conversation")
    await dialog.get_by_role("button", name="Create link").click()
    field = dialog.get_by_role("textbox", name="The new link")
    await expect(field).to_have_value(re.compile(r"/s/[A-Za-z0-9_-]{43}$"))
    link = await field.input_value()
    await dialog.get_by_role("button", name="Close").click()
    return link.rsplit("/", 1)[1]


async def test_instructions_and_a_share_link_outlive_a_restart(
    start_server: StartServer, open_app: OpenApp, tmp_path: Path
) -> None:
    """Set both instructions and make a link; after a restart on the same
    database the dialog shows them, the model gets them, the link is
    listed and a signed-out reader sees the conversation."""
    database = f"sqlite:///{tmp_path / 'loopwire.db'}"
    harness = await start_server(
        ScriptedLLM(reason("Greet.", finish=True, final="Bonjour.")),
        database_url=database,
    )
    app = await open_app(harness)
    await app.type_and_send("hello")
    await app.wait_idle()
    await set_instructions(app)
    share_id = await make_link(app)
    where = await app.page.evaluate("location.pathname")
    await app.close()
    await harness.server.stop()

    llm = ScriptedLLM(reason("Greet Ada.", finish=True, final="Bonjour, Ada."))
    restarted = await start_server(llm, database_url=database)
    again = await open_app(restarted, load=False)
    await again.page.goto(restarted.server.url(where))
    await again.expect_connected()
    await again.page.get_by_role("button", name="Instructions", exact=True).click()
    dialog = again.page.get_by_role("dialog", name="Instructions")
    await expect(dialog.get_by_label("For all your conversations")).to_have_value(OWN)
    await expect(dialog.get_by_label("For this conversation")).to_have_value(HERE)
    await dialog.get_by_role("button", name="Cancel").click()
    await again.type_and_send("hello again")
    await expect(again.answers()).to_have_text(["Bonjour.", "Bonjour, Ada."])
    system = llm.requests[0].messages[0].content or ""
    assert OWN in system and HERE in system

    await again.page.get_by_role("button", name="Share conversation").click()
    listed = again.page.get_by_role("list", name="Links to this conversation")
    await expect(listed.get_by_role("listitem")).to_have_count(1)
    await expect(listed).to_contain_text(share_id[:10])
    reader = await open_app(restarted, load=False)
    shown = await reader.page.goto(restarted.server.url(f"/s/{share_id}"))
    assert shown is not None and shown.status == 200
    await expect(reader.loc(".share-text")).to_have_text(["Bonjour."])
