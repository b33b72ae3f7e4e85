"""Searching one's conversations from the sidebar: the list narrows to what
matches as you type (a word of a title or of a message; the last word as a
prefix), each found with its words marked; Esc clears it."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.browser.layout import layout_problems
from tests.browser.ui import OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.parametrize(
    ("viewport", "touch"),
    [({"width": 1280, "height": 800}, False), ({"width": 390, "height": 844}, True)],
)
async def test_searching_narrows_the_list(
    start_server: StartServer,
    open_app: OpenApp,
    viewport: dict[str, int],
    touch: bool,
) -> None:
    """A word of an answer finds its conversation, a prefix of a title word
    finds another; the match is marked; Esc shows them all again."""
    llm = ScriptedLLM("The capital is Paris.", "Noted: oat milk.")
    harness = await start_server(llm, test_registry())
    for question in ("capital of France?", "remember the milk"):
        client, _ = await harness.ready_client("client=page")  # listed by the page
        await client.chat(question, selected_tools=[])
    app = await open_app(harness, viewport=viewport, touch=touch)
    if touch:
        await app.page.get_by_role("button", name="Conversations").click()
    titles = app.loc(".conversation-title")
    await expect(titles).to_have_text(["remember the milk", "capital of France?"])

    box = app.page.get_by_role("searchbox", name="Search conversations")
    await box.fill("paris")
    await expect(titles).to_have_text(["capital of France?"])
    await expect(app.loc(".conversation-snippet mark")).to_have_text(["Paris"])
    await expect(app.loc("#conversations-title")).to_have_text("Found")
    assert await layout_problems(app.page) == []

    await box.fill("mil")
    await expect(titles).to_have_text(["remember the milk"])
    await box.fill("nothing like this")
    await expect(app.loc("#conversation-empty")).to_have_text(
        "Nothing found for “nothing like this”."
    )
    await box.press("Escape")
    await expect(titles).to_have_text(["remember the milk", "capital of France?"])
    await expect(box).to_have_value("")
