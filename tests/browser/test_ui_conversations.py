"""The conversations sidebar: new chat, the list, switching (the URL names the
conversation; back and forward work), rename, delete with undo, the drawer
on a phone, and a link that opens a conversation in a fresh tab."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from playwright.async_api import expect

from tests.browser.ui import PHONE, App, OpenApp
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

CONVERSATION_URL = re.compile(r"/c/[0-9a-f]{32}$")


async def plain_chat(app: App, text: str, answer: str) -> None:
    """Send `text` as a plain chat and wait for `answer`."""
    await app.type_and_send(text)
    await expect(app.loc(".answer[data-state=final]").last).to_have_text(answer)
    await app.wait_idle()


def titles(app: App) -> object:
    return expect(app.loc(".conversation-title"))


@asynccontextmanager
async def fresh_tab(app: App, url: str) -> AsyncIterator[App]:
    """`url` opened in a new browser context (no storage of `app`'s), connected;
    it must log no problem."""
    other = await App.open(app.context.browser, app.base_url)  # type: ignore[arg-type]
    try:
        await other.page.goto(url)
        await other.expect_connected()
        yield other
        assert other.problems == []
    finally:
        await other.close()


async def two_conversations(
    start_server: StartServer, open_app: OpenApp, *later: str
) -> App:
    """Two plain chats, each in its own conversation; `later`: the replies of
    the chats the test goes on with."""
    llm = ScriptedLLM("Four.", "Six.", *later)
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=[])
    await plain_chat(app, "what is 2+2?", "Four.")
    await titles(app).to_have_text(["what is 2+2?"])
    await app.page.get_by_role("button", name="New chat").click()
    await expect(app.loc("#messages > *")).to_have_count(0)
    await app.expect_connected()
    await plain_chat(app, "what is 3+3?", "Six.")
    await titles(app).to_have_text(["what is 3+3?", "what is 2+2?"])
    return app


async def test_new_chats_are_listed_newest_first_and_switching_shows_each(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Chats list newest first; switching and history navigation show each one."""
    app = await two_conversations(start_server, open_app, "Ten.")
    second_url = app.page.url
    assert CONVERSATION_URL.search(second_url)
    current = app.loc(".conversation-link[aria-current=page]")
    await expect(current).to_have_text("what is 3+3?")

    await app.composer.fill("a draft")  # typed, not sent: it stays
    await app.page.get_by_role("link", name="what is 2+2?").click()
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(["what is 2+2?"])
    await expect(app.composer).to_have_value("a draft")
    await app.composer.fill("")
    await expect(app.answers()).to_have_text(["Four."])
    await expect(current).to_have_text("what is 2+2?")
    first_url = app.page.url
    assert CONVERSATION_URL.search(first_url) and first_url != second_url

    await app.page.go_back()
    await expect(app.answers()).to_have_text(["Six."])
    assert app.page.url == second_url
    await app.page.go_forward()
    await expect(app.answers()).to_have_text(["Four."])
    await app.expect_connected()

    # the conversation on screen goes on where it was
    await plain_chat(app, "and 5+5?", "Ten.")
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(
        ["what is 2+2?", "and 5+5?"]
    )


async def test_a_link_to_a_conversation_opens_it_in_a_fresh_tab(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A conversation's URL opened in a fresh browser shows that conversation."""
    app = await two_conversations(start_server, open_app)
    async with fresh_tab(app, app.page.url) as other:
        await expect(other.loc(".turn-user .bubble-text")).to_have_text(
            ["what is 3+3?"]
        )
        await expect(other.answers()).to_have_text(["Six."])


async def test_rename_in_place(start_server: StartServer, open_app: OpenApp) -> None:
    """Enter saves a rename on the server and Escape discards one; a rename
    keeps the conversation's place in the list (ordered by activity)."""
    app = await two_conversations(start_server, open_app)
    await app.page.get_by_role("button", name="Rename “what is 2+2?”").click()
    field = app.page.get_by_label("New title")
    await expect(field).to_be_focused()
    await field.fill("Sums")
    await field.press("Enter")
    await titles(app).to_have_text(["what is 3+3?", "Sums"])  # in its place
    await expect(app.page.get_by_role("link", name="Sums")).to_be_focused()

    await app.page.get_by_role("button", name="Rename “Sums”").click()
    await app.page.get_by_label("New title").fill("Not this")
    await app.page.keyboard.press("Escape")
    await titles(app).to_have_text(["what is 3+3?", "Sums"])

    async with httpx.AsyncClient() as http:
        listed = (await http.get(app.base_url + "/api/conversations")).json()
    assert [c["title"] for c in listed["items"]] == ["what is 3+3?", "Sums"]


async def test_delete_can_be_undone_then_happens(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Undo restores a deleted conversation; dismissing the toast deletes it."""
    app = await two_conversations(start_server, open_app)
    toast = app.loc("#toast")

    await app.page.get_by_role("button", name="Delete “what is 2+2?”").click()
    await titles(app).to_have_text(["what is 3+3?"])
    await expect(toast).to_contain_text("Deleted “what is 2+2?”")
    await toast.get_by_role("button", name="Undo").click()
    await expect(toast).to_be_hidden()
    await titles(app).to_have_text(["what is 3+3?", "what is 2+2?"])

    # the one on screen: the page moves to a new chat at once
    await app.page.get_by_role("button", name="Delete “what is 3+3?”").click()
    await expect(app.loc("#messages > *")).to_have_count(0)
    await app.expect_connected()
    async with app.page.expect_response(
        lambda r: r.request.method == "DELETE"
    ) as deleted:
        await toast.get_by_role("button", name="Dismiss").click()
    assert (await deleted.value).status == 204
    await titles(app).to_have_text(["what is 2+2?"])
    await app.page.reload()
    await app.expect_connected()
    await titles(app).to_have_text(["what is 2+2?"])


async def test_on_a_phone_the_list_is_a_drawer(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """On a phone the conversation list is a drawer that closes on Escape or use."""
    harness: Harness = await start_server(ScriptedLLM("Four."), test_registry())
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=[])
    await plain_chat(app, "what is 2+2?", "Four.")
    await app.page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    sidebar = app.loc("#sidebar")
    toggle = app.page.get_by_role("button", name="Conversations")
    await expect(sidebar).to_be_hidden()
    await expect(toggle).to_have_attribute("aria-expanded", "false")

    await toggle.click()
    await expect(sidebar).to_be_visible()
    await expect(app.page.get_by_role("button", name="New chat")).to_be_focused()
    await app.page.keyboard.press("Escape")
    await expect(sidebar).to_be_hidden()
    await expect(toggle).to_be_focused()

    await toggle.click()
    await app.page.get_by_role("button", name="New chat").click()
    await expect(sidebar).to_be_hidden()  # closes on the way
    await expect(app.loc("#messages > *")).to_have_count(0)
    await toggle.click()
    await app.page.get_by_role("link", name="what is 2+2?").click()
    await expect(sidebar).to_be_hidden()
    await expect(app.answers()).to_have_text(["Four."])


async def test_runs_older_than_the_replay_window_are_shown_from_the_history(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """With a 4 KiB frame log, the first answers' frames are gone by the time
    a fresh tab opens the conversation: those runs come from the stored
    history (message and answer), above the replayed one, marked earlier."""
    long = " ".join(["word"] * 400)  # ~2 KB an answer: the log keeps one run
    llm = ScriptedLLM(f"One. {long}", f"Two. {long}", "Three.")
    harness = await start_server(llm, test_registry(), frame_log_bytes=4096)
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=[])
    for question in ["first?", "second?", "third?"]:
        await app.type_and_send(question)
        await app.wait_idle()
    async with fresh_tab(app, app.page.url) as other:
        await expect(other.loc(".turn-user .bubble-text")).to_have_text(
            ["first?", "second?", "third?"]
        )
        answers = other.answers()
        await expect(answers).to_have_count(3)
        await expect(answers.nth(0)).to_contain_text("One. word word")
        await expect(answers.nth(2)).to_have_text("Three.")
        earlier = other.loc(".turn-assistant[data-earlier=true] .run-meta")
        await expect(earlier.first).to_have_text(
            "Earlier run · finished · its steps are no longer kept"
        )
