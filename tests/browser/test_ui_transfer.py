"""Export and import from the page (`render/transfer.js`): a row's Export
menu downloads the Markdown and the JSON export, exactly as the server
writes them; Import takes a JSON export, opens the new conversation, which
is still listed and opens after a server restart; a refused file shows the
server's reason. The new controls pass the layout checks and axe, at a
desktop's size and a phone's."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Download, Locator, Response, expect

from tests.browser.geometry import why_not_clickable
from tests.browser.layout import layout_problems
from tests.browser.test_ui_accessibility import violations
from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, test_registry
from tests.server_process import ServerProcess, server_process

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(180)]

SIZES = {
    "desktop": ({"width": 1280, "height": 800}, False),
    "phone": ({"width": 390, "height": 844}, True),
}
LISBON = {
    "loopwire_export": 1,
    "conversation": {"title": "A day in Lisbon"},
    "messages": [
        {"role": "user", "content": "plan a day in Lisbon"},
        {"role": "assistant", "content": "Start at Belém, then the Alfama."},
    ],
}
REFUSED = "the server responded with a status of 400 (Bad Request)"


async def show_list(app: App, phone: bool) -> None:
    """The conversation list on screen (a drawer on a phone)."""
    if phone and await app.loc("#sidebar").get_attribute("data-open") != "true":
        await app.page.get_by_role("button", name="Conversations").click()
    await expect(app.loc("#sidebar")).to_be_visible()


async def clickable(control: Locator) -> None:
    """`control` is on screen where a person sees it, nothing over it."""
    await expect(control).to_be_visible()
    assert await why_not_clickable(control) == []


async def downloaded(app: App, menu_item: str) -> Download:
    """What choosing `menu_item` in the open Export menu downloads."""
    item = app.page.get_by_role("menuitem", name=menu_item)
    await clickable(item)
    async with app.page.expect_download() as waiting:
        await item.click()
    return await waiting.value


async def content(download: Download) -> bytes:
    return await asyncio.to_thread(Path(await download.path()).read_bytes)


async def open_export_menu(app: App, title: str) -> None:
    button = app.page.get_by_role("button", name=f"Export “{title}”")
    await clickable(button)
    await button.click()
    await expect(app.page.get_by_role("menu")).to_be_visible()
    await expect(button).to_have_attribute("aria-expanded", "true")
    assert await layout_problems(app.page) == []


@pytest.mark.parametrize("size", SIZES)
async def test_a_conversation_downloads_as_markdown_and_as_json(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """The row's Export menu downloads the Markdown transcript and the JSON
    export, byte for byte what the server's export gives."""
    viewport, phone = SIZES[size]
    harness = await start_server(ScriptedLLM("Four."), test_registry())
    app = await open_app(harness, viewport=viewport, touch=phone, bypass_csp=True)
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("what is 2+2?")
    await expect(app.answers().last).to_have_text("Four.")
    await app.wait_idle()
    session = await app.connection("connection.sessionId")
    await show_list(app, phone)

    await open_export_menu(app, "what is 2+2?")
    assert await violations(app) == []
    markdown = await downloaded(app, "Export as Markdown")
    await expect(app.page.get_by_role("menu")).to_be_hidden()
    await open_export_menu(app, "what is 2+2?")
    exported = await downloaded(app, "Export as JSON")

    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        stored = (await http.get(f"/api/conversations/{session}")).json()
        served = await http.get(f"/api/conversations/{session}/export?format=json")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(stored["created_at"]))
    assert markdown.suggested_filename == "what-is-2-2.md"
    assert (await content(markdown)).decode() == (
        f"# what is 2+2?\n\nStarted {started}.\n\n"
        "## User\n\nwhat is 2+2?\n\n## Assistant\n\nFour.\n"
    )
    assert exported.suggested_filename == "what-is-2-2.json"
    assert await content(exported) == served.content
    document = json.loads(served.content)
    assert [(m["role"], m["content"]) for m in document["messages"]] == [
        ("user", "what is 2+2?"),
        ("assistant", "Four."),
    ]


@pytest.mark.parametrize("size", SIZES)
async def test_the_export_menu_closes_with_escape_and_gives_focus_back(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """Escape closes the menu (not the drawer), focus back on its button;
    arrow keys move between its items."""
    viewport, phone = SIZES[size]
    harness = await start_server(ScriptedLLM("Four."), test_registry())
    app = await open_app(harness, viewport=viewport, touch=phone)
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("what is 2+2?")
    await app.wait_idle()
    await show_list(app, phone)
    await open_export_menu(app, "what is 2+2?")
    await expect(
        app.page.get_by_role("menuitem", name="Export as Markdown")
    ).to_be_focused()
    await app.page.keyboard.press("ArrowDown")
    await expect(
        app.page.get_by_role("menuitem", name="Export as JSON")
    ).to_be_focused()
    await app.page.keyboard.press("Escape")

    await expect(app.page.get_by_role("menu")).to_be_hidden()
    button = app.page.get_by_role("button", name="Export “what is 2+2?”")
    await expect(button).to_be_focused()
    await expect(button).to_have_attribute("aria-expanded", "false")
    await expect(app.loc("#sidebar")).to_have_attribute("data-open", "true")


@pytest.mark.parametrize("size", SIZES)
async def test_a_refused_import_shows_why(
    start_server: StartServer, open_app: OpenApp, size: str
) -> None:
    """A file that is not JSON, and JSON that is not an export: each is
    refused with its reason in the sidebar, and nothing is listed."""
    viewport, phone = SIZES[size]
    harness = await start_server(ScriptedLLM(), test_registry())
    app = await open_app(harness, viewport=viewport, touch=phone)
    await show_list(app, phone)
    importer = app.page.get_by_role("button", name="Import a conversation")
    await clickable(importer)
    status = app.loc("#conversation-status")

    await app.loc("#import-file").set_input_files(
        files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"milk"}]
    )
    await expect(status).to_have_text("Not imported: “notes.txt” is not a JSON export.")

    wrong = {"loopwire_export": 7, "messages": []}
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        reason = (await http.post("/api/conversations/import", json=wrong)).json()
    await app.loc("#import-file").set_input_files(
        files=[
            {
                "name": "old.json",
                "mimeType": "application/json",
                "buffer": json.dumps(wrong).encode(),
            }
        ]
    )
    await expect(status).to_have_text(f"Not imported: {reason['message']}")
    await expect(status).to_be_visible()
    await expect(app.loc(".conversation")).to_have_count(0)
    assert await layout_problems(app.page) == []
    # Chromium logs any answer with an error status; this one was expected
    assert [p for p in app.problems if REFUSED in p] == [
        f"console error: Failed to load resource: {REFUSED}"
    ]
    app.problems.clear()


def listing(response: Response) -> bool:
    return "/api/conversations?" in response.url


async def restart(app: App, server: ServerProcess, database_url: str) -> ServerProcess:
    """SIGTERM `server`, start its successor on the same port and database,
    and reload the page."""
    await server.terminate()
    successor = ServerProcess(database_url, port=server.port, llm_provider="offline")
    await successor.start()
    await app.page.reload()
    await app.expect_connected()
    return successor


async def import_lisbon(app: App, tmp_path: Path) -> str:
    """Import `LISBON` from a file through the page; the new conversation's id."""
    path = tmp_path / "lisbon.json"
    path.write_text(json.dumps(LISBON), encoding="utf-8")
    await app.loc("#import-file").set_input_files(str(path))
    await expect(app.answers()).to_have_text(["Start at Belém, then the Alfama."])
    await expect(app.page).to_have_url(f"{app.base_url}/c/{await opened_id(app)}")
    return await opened_id(app)


async def opened_id(app: App) -> str:
    session: Any = await app.connection("connection.sessionId")
    return str(session)


@pytest.mark.parametrize("size", SIZES)
async def test_an_imported_conversation_opens_and_outlives_a_restart(
    browser: Browser, tmp_path: Path, size: str
) -> None:
    """Import opens the new conversation; after a server restart it is still
    listed (as the page's own), and opens with its messages."""
    viewport, phone = SIZES[size]
    database_url = f"sqlite:///{tmp_path / 'loopwire.db'}"
    async with server_process(database_url, llm_provider="offline") as first:
        app = await App.open(
            browser, f"http://127.0.0.1:{first.port}/", viewport=viewport, touch=phone
        )
        server = first
        try:
            await app.load()
            await show_list(app, phone)
            imported = await import_lisbon(app, tmp_path)
            await expect(app.loc(".conversation-title")).to_have_text(
                ["A day in Lisbon"]
            )

            server = await restart(app, first, database_url)
            await show_list(app, phone)
            async with app.page.expect_response(listing):  # the list, as shown next
                await app.page.get_by_role("button", name="New chat").click()
            await expect(app.answers()).to_have_count(0)
            await show_list(app, phone)
            link = app.page.get_by_role("link", name="A day in Lisbon")
            await clickable(link)
            await link.click()
            await expect(app.page).to_have_url(f"{app.base_url}/c/{imported}")
            await expect(app.answers()).to_have_text(
                ["Start at Belém, then the Alfama."]
            )
            assert [p for p in app.problems if "ERR_CONNECTION_REFUSED" not in p] == []
        finally:
            await app.close()
            if server is not first:
                await server.stop_quietly()
