"""Connection loss and page reloads: the session is resumed from the server's
replay, and nothing on screen is lost or shown twice."""

from __future__ import annotations

import asyncio
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.async_api import WebSocketRoute, expect

from tests.browser.ui import OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, SlowTool, calls, observe, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")


class SocketPassThrough:
    """Routes the page's WebSocket through Playwright to the real server, so a
    test can drop it from the server side, and hold back reconnections."""

    def __init__(self) -> None:
        self.pages: list[WebSocketRoute] = []
        self.servers: list[WebSocketRoute] = []
        self.urls: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def handle(self, page_side: WebSocketRoute) -> None:
        self.urls.append(page_side.url)
        self.pages.append(page_side)
        await self.gate.wait()
        self.servers.append(page_side.connect_to_server())

    async def drop(self) -> None:
        """Close the page's socket as a restarting server (or proxy) would;
        the server's side of the connection is closed with it."""
        await self.pages[-1].close(code=1012, reason="service restart")


def query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


async def test_server_drop_reconnects_and_resumes_without_loss_or_duplicates(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A dropped socket resumes from the page's last seq; nothing is lost or doubled."""
    slow = SlowTool()
    llm = ScriptedLLM(
        reason(finish=True, final="First answer."),
        reason("Wait for it."),
        calls(("slow", {"label": "x"})),
        observe(should_continue=False, final="Slow answer."),
    )
    harness = await start_server(llm, test_registry(slow))
    app = await open_app(harness, load=False)
    sockets = SocketPassThrough()
    await app.page.route_web_socket(re.compile(r"/ws"), sockets.handle)
    await app.load()

    await app.type_and_send("one")
    await app.wait_idle()
    await app.type_and_send("two")
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "running")
    await slow.started.wait()
    session = next(iter(harness.service.sessions.values()))
    run_task = session.run.task
    applied = await app.connection("connection.lastSeq")

    sockets.gate.clear()  # hold the reconnection until the run has finished
    await sockets.drop()
    await expect(app.loc("#connection")).to_have_attribute("data-state", "reconnecting")
    await expect(app.loc("#connection-text")).to_contain_text("Reconnecting")
    await expect(app.send_button).to_be_disabled()
    await expect(app.stop_button).to_be_enabled()  # the run is still active

    slow.release.set()  # these frames are emitted while the page is away
    await run_task
    sockets.gate.set()
    await app.expect_connected()
    await app.wait_idle()

    assert await app.texts(".turn-user .bubble-text") == ["one", "two"]
    await expect(app.loc(".turn-assistant")).to_have_count(2)
    assert await app.texts(".answer") == ["First answer.", "Slow answer."]
    await expect(app.loc(".tool-card")).to_have_count(1)
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "done")
    assert await app.texts(".step-badge") == ["Step 1 / 10", "Step 1 / 10"]

    first, second = sockets.urls[0], sockets.urls[-1]
    assert "session_id" not in query(first)
    assert query(second) == {
        "client": ["page"],
        "session_id": [session.id],
        "last_seq": [str(applied)],
    }
    assert len(sockets.urls) == 2 and len(harness.service.sessions) == 1


async def test_reload_rebuilds_the_screen_from_the_replay(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A reload redraws past turns once and puts a pending question back, answerable."""
    llm = ScriptedLLM(
        reason("Add.", tools=["add"]),
        calls(("add", {"expression": "2+3"})),
        observe(should_continue=False, final="It is **5**."),
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("km"),
        reason("done", finish=True, final="16.09 km"),
    )
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)

    await app.type_and_send("add 2 and 3")
    await app.wait_idle()
    await app.type_and_send("convert 10 miles")
    await expect(app.banner).to_be_visible()

    await app.page.reload()
    await app.expect_connected()

    # the finished run is back exactly once, collapsed; the question waits again
    assert await app.texts(".turn-user .bubble-text") == [
        "add 2 and 3",
        "convert 10 miles",
    ]
    await expect(app.loc(".turn-assistant")).to_have_count(2)
    await expect(app.answers().first).to_have_text("It is 5.")
    await expect(app.assistant(0).locator(".trace")).not_to_have_attribute("open", "")
    await expect(app.loc(".tool-card")).to_have_count(1)
    await expect(app.banner).to_be_visible()
    await expect(app.loc(".question-card-text")).to_have_text("Which unit?")
    await expect(app.page.get_by_role("textbox", name="Your answer")).to_be_focused()
    await expect(app.stop_button).to_be_enabled()

    await app.page.keyboard.type("km")
    await app.page.keyboard.press("Enter")
    await app.wait_idle()
    await expect(app.answers()).to_have_count(2)
    await expect(app.answers().last).to_have_text("16.09 km")

    await app.page.reload()
    await app.expect_connected()
    await expect(app.loc(".turn-assistant")).to_have_count(2)
    await expect(app.loc(".question-answer")).to_have_text("You answered: km")
    await expect(app.banner).to_be_hidden()
    await expect(app.stop_button).to_be_hidden()
    sessions = {query(url).get("session_id", [None])[0] for url in app.socket_urls}
    assert sessions == {None, next(iter(harness.service.sessions))}


async def test_new_chat_starts_a_fresh_session(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """New chat empties the screen and the next message opens a second session."""

    llm = ScriptedLLM(
        reason(finish=True, final="One."), reason(finish=True, final="Two.")
    )
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await app.type_and_send("first")
    await app.wait_idle()

    await app.page.get_by_role("button", name="New chat").click()
    await app.expect_connected()
    await expect(app.loc("#messages > *")).to_have_count(0)
    await expect(app.loc("#empty-state")).to_be_visible()
    await expect(app.composer).to_be_focused()
    await app.type_and_send("second")
    await app.wait_idle()

    assert await app.texts(".answer") == ["Two."]
    assert len(harness.service.sessions) == 2
    assert [m.content for m in llm.requests[-1].messages if m.role == "user"][-1:] == [
        "second"
    ]
