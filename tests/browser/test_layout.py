"""The whole page, laid out, in its main states, at a desktop's size
(1280x800) and a phone's (390x844, touch): every visible control lies in
the viewport and inside the part of its container that shows, is the
element at its own centre, no container scrolls sideways unless it shows
that it does, and no text is cut without an ellipsis (`layout.py`).

Clicking by name misses this: Playwright scrolls a control into view
before it clicks, so a rename button pushed out of the sidebar by a long
title passed every other test.
"""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.browser.layout import layout_problems
from tests.browser.ui import App, OpenApp
from tests.conftest import Harness, StartServer
from tests.fakes import (
    ScriptedLLM,
    approval_registry,
    calls,
    observe,
    reason,
    test_registry,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

SIZES = {
    "desktop": ({"width": 1280, "height": 800}, False),
    "phone": ({"width": 390, "height": 844}, True),
}
LONG_TITLE = "convert 10 miles to km and 5 kg to lb and then tell me the time in Tokyo"
LONG_NOTE = "pack " + ", ".join(f"item number {n}" for n in range(40))


async def opened(open_app: OpenApp, harness: Harness, size: str) -> App:
    viewport, touch = SIZES[size]
    return await open_app(harness, viewport=viewport, touch=touch)


async def assert_laid_out(app: App, state: str) -> None:
    problems = await layout_problems(app.page)
    assert problems == [], f"{state}:\n" + "\n".join(problems)


async def open_drawer(app: App, size: str) -> None:
    """On a phone, open the conversation list (a drawer); a desktop shows it."""
    if size == "phone":
        await app.page.get_by_role("button", name="Conversations").click()
    await expect(app.loc("#sidebar")).to_be_visible()


@pytest.mark.parametrize("size", SIZES)
async def test_the_empty_page(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """A fresh page: the toolbar, the composer and the empty state."""
    app = await opened(open_app, await start_server(), size)
    await assert_laid_out(app, "empty")
    await open_drawer(app, size)
    await assert_laid_out(app, "empty, the list open")


@pytest.mark.parametrize("size", SIZES)
async def test_long_titles_keep_rename_and_delete_in_the_list(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """Conversations with titles longer than the list is wide: each row's
    title is cut with an ellipsis and its rename and delete buttons stay
    inside the list, clickable."""
    llm = ScriptedLLM("One.", "Two.")
    harness = await start_server(llm, test_registry())
    for question in (LONG_TITLE, "short"):
        client, _ = await harness.ready_client("client=page")  # listed by the page
        await client.chat(question, selected_tools=[])
    app = await opened(open_app, harness, size)
    await open_drawer(app, size)
    await expect(app.loc(".conversation-title")).to_have_count(2)
    await assert_laid_out(app, "long titles")


@pytest.mark.parametrize("size", SIZES)
async def test_a_run_with_long_tool_arguments(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """A finished agent run whose tool call has long arguments."""
    llm = ScriptedLLM(
        reason("save it", tools=["save"]),
        calls(("save", {"text": LONG_NOTE})),
        observe(should_continue=False, final="Saved the list."),
    )
    harness = await start_server(llm, approval_registry())
    app = await opened(open_app, harness, size)
    await app.type_and_send("remember my packing list")
    dialog = app.dialog
    await expect(dialog).to_be_visible()
    await assert_laid_out(app, "an approval")
    await dialog.get_by_role("button", name="Approve").click()
    await app.wait_idle()
    await assert_laid_out(app, "a finished run")


@pytest.mark.parametrize("size", SIZES)
async def test_a_question_waiting(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """The agent asks a question with choices: the composer becomes its answer."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(
            (
                "request_input",
                {
                    "question": "Which unit should I convert 10 miles to?",
                    "answer_schema": {"type": "string", "enum": ["km", "m", "ft"]},
                },
            )
        ),
    )
    harness = await start_server(llm, test_registry())
    app = await opened(open_app, harness, size)
    await app.type_and_send("convert 10 miles")
    await expect(app.page.get_by_role("button", name="km")).to_be_visible()
    await assert_laid_out(app, "a question")
    await app.stop_button.click()
    await app.wait_idle()


@pytest.mark.parametrize("size", SIZES)
async def test_an_edited_message_with_its_versions(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """A long message edited once: its "2 / 2" arrows, copy and edit."""
    llm = ScriptedLLM("One.", "Edited one.")
    harness = await start_server(llm, test_registry())
    client, ready = await harness.ready_client()
    (first,) = {f["run_id"] for f in await client.chat(LONG_NOTE, selected_tools=[])}
    await client.chat(LONG_TITLE, selected_tools=[], replace_from=first)
    await harness.service.flush_all()
    app = await open_app(
        harness, viewport=SIZES[size][0], touch=SIZES[size][1], load=False
    )
    await app.page.goto(harness.server.url(f"/c/{ready['session_id']}"))
    await app.expect_connected()
    await expect(app.loc(".versions-count")).to_have_text("2 / 2")
    await assert_laid_out(app, "an edited message")
