"""Versions in the browser: editing a message keeps what it replaced, shown
as "2 / 2" with arrows under the edited message; Previous version brings the
first version back (its answer and what followed, for the eye and for the
model), Next version the edit again;
a reload and a server restart show the same. Every control clicked is on
screen and unobstructed on a desktop and a phone, and axe-core finds no
serious violation with the switcher shown."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from tests.browser.geometry import click_at_both_sizes
from tests.browser.test_ui_accessibility import violations
from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")


def said(llm: ScriptedLLM) -> list[str | None]:
    """What the model was last sent, after the system prompt."""
    return [m.content for m in llm.requests[-1].messages if m.role != "system"]


async def edited(
    start_server: StartServer, open_app: OpenApp, *replies: str, **settings: Any
) -> Any:
    """Two turns, the second edited (`replies` answer what follows): the
    server, its model and the page."""
    llm = ScriptedLLM("One.", "Two.", "Edited two.", *replies)
    harness = await start_server(llm, test_registry(), **settings)
    app = await open_app(harness, bypass_csp=True)  # for axe-core
    await app.use_settings(agent=False, tools=[])
    for message in ("first", "second"):
        await app.type_and_send(message)
        await app.wait_idle()
    second = app.loc(".turn-user").nth(1)
    await second.hover()
    await second.get_by_role("button", name="Edit message").click()
    await app.page.get_by_role("textbox", name="Edit your message").fill("second!")
    await app.page.keyboard.press("Enter")
    await app.wait_idle()
    return harness, llm, app


async def shows(app: App, messages: list[str], answers: list[str], count: str) -> None:
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(messages)
    await expect(app.answers()).to_have_text(answers)
    await expect(app.loc(".versions-count")).to_have_text([count])


async def test_an_edit_keeps_the_first_version_and_the_arrows_switch(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """ "2 / 2" appears on the edited message; Previous shows and sends the
    first version, Next the edit again; the page after a reload agrees."""
    _, llm, app = await edited(start_server, open_app, "Three.", "Four.")
    await shows(app, ["first", "second!"], ["One.", "Edited two."], "2 / 2")
    edited_bubble = app.loc(".turn-user").nth(1)
    assert await violations(app) == []
    await expect(
        edited_bubble.get_by_role("button", name="Next version")
    ).to_be_disabled()

    await click_at_both_sizes(
        app.page, edited_bubble.get_by_role("button", name="Previous version")
    )
    await shows(app, ["first", "second"], ["One.", "Two."], "1 / 2")
    (switch,) = app.sent_of("switch_branch")
    assert len(switch["branch_id"]) == 32
    await app.type_and_send("third")
    await app.wait_idle()
    assert said(llm) == ["first", "One.", "second", "Two.", "third"]
    await shows(app, ["first", "second", "third"], ["One.", "Two.", "Three."], "1 / 2")

    await app.page.reload()
    await app.expect_connected()
    await shows(app, ["first", "second", "third"], ["One.", "Two.", "Three."], "1 / 2")
    original = app.loc(".turn-user").nth(1)
    await click_at_both_sizes(
        app.page, original.get_by_role("button", name="Next version")
    )
    await shows(app, ["first", "second!"], ["One.", "Edited two."], "2 / 2")
    await app.type_and_send("fourth")
    await app.wait_idle()
    assert said(llm) == ["first", "One.", "second!", "Edited two.", "fourth"]
    assert app.problems == []


async def test_versions_outlive_a_server_restart(
    start_server: StartServer, open_app: OpenApp, tmp_path: Any
) -> None:
    """After a restart on the same database the page lists both versions and
    switches back to the first."""
    database = f"sqlite:///{tmp_path / 'loopwire.db'}"
    harness, _, app = await edited(start_server, open_app, database_url=database)
    await shows(app, ["first", "second!"], ["One.", "Edited two."], "2 / 2")
    url = await app.page.evaluate("location.pathname")
    await app.close()
    await harness.server.stop()

    restarted = await start_server(
        ScriptedLLM(), test_registry(), database_url=database
    )
    again = await open_app(restarted, load=False)
    await again.page.goto(restarted.server.url(url))
    await again.expect_connected()
    await shows(again, ["first", "second!"], ["One.", "Edited two."], "2 / 2")
    bubble = again.loc(".turn-user").nth(1)
    await click_at_both_sizes(
        again.page, bubble.get_by_role("button", name="Previous version")
    )
    await shows(again, ["first", "second"], ["One.", "Two."], "1 / 2")
