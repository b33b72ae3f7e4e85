"""The chat page: plain chat, streaming, Markdown, errors, model label, CSP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from backend.llm.base import LLMRequest, StreamEvent, TextDelta
from tests.browser.ui import OpenApp
from tests.conftest import Harness, StartServer
from tests.fakes import Hang, ScriptedLLM, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")


class GatedStreamLLM(ScriptedLLM):
    """Streams the first word of each reply, then waits for `gate`."""

    def __init__(self, *steps: str) -> None:
        super().__init__(*steps)
        self.gate = asyncio.Event()

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        completion = await self.complete(request)
        first, _, rest = completion.content.partition(" ")
        yield TextDelta(text=first + " ")
        await self.gate.wait()
        yield TextDelta(text=rest)
        yield completion


async def test_plain_chat_streams_then_renders_the_answer_as_markdown(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A plain-chat reply shows streamed text first, then renders as Markdown."""
    llm = GatedStreamLLM("Hello **there**, `human`.")
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=[])
    await expect(app.loc("#mode-note")).to_have_text(
        "Plain chat: one streamed reply, no tools."
    )

    await app.composer.focus()
    await app.page.keyboard.type("line one")
    await app.page.keyboard.press("Shift+Enter")
    await app.page.keyboard.type("line two")
    await expect(app.stop_button).to_be_hidden()
    await app.page.keyboard.press("Enter")

    await expect(app.loc(".turn-user .bubble-text")).to_have_text("line one\nline two")
    streaming = app.loc(".answer[data-state=streaming]")
    await expect(streaming).to_have_text("Hello ")
    await expect(streaming).to_have_attribute("aria-busy", "true")
    await expect(app.stop_button).to_be_visible()
    await expect(app.stop_button).to_be_enabled()
    await expect(app.send_button).to_be_disabled()
    await expect(app.composer).to_have_value("")

    llm.gate.set()
    answer = app.loc(".answer[data-state=final]")
    await expect(answer.locator("strong")).to_have_text("there")
    await expect(answer.locator("code")).to_have_text("human")
    await expect(answer).to_have_text("Hello there, human.")
    await app.wait_idle()
    await expect(app.stop_button).to_be_disabled()
    await expect(app.composer).to_be_focused()
    await expect(app.loc(".turn-assistant .trace")).to_have_count(0)

    assert app.sent_of("chat") == [
        {
            "type": "chat",
            "content": "line one\nline two",
            "agent_mode": False,
            "agent_max_steps": 10,
            "selected_tools": [],
            "read_only": False,
        }
    ]
    assert [r.purpose for r in llm.requests] == ["chat"]


async def test_tool_mode_shows_tool_cards_without_steps(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Chat with tools shows a round with its tool card, not agent steps."""
    from tests.fakes import calls

    llm = ScriptedLLM(calls(("add", {"expression": "2+3"})), "It is **5**.")
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=["add"])
    await expect(app.loc("#mode-note")).to_contain_text("Chat with tools")

    await app.type_and_send("add 2 and 3")
    await app.wait_idle()

    await expect(app.loc(".turn-user .turn-tag")).to_have_text("With tools")
    assert await app.texts(".step-badge") == ["Round 1"]
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "done")
    await expect(app.answers()).to_have_text("It is 5.")
    chat = app.sent_of("chat")[0]
    assert (chat["agent_mode"], chat["selected_tools"]) == (False, ["add"])


async def test_error_frames_are_shown_and_never_swallowed(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A stray stop, a busy chat and an unparsable frame each show an error notice."""
    hang = Hang()
    harness = await start_server(ScriptedLLM(hang), test_registry())
    app = await open_app(harness)

    # nothing is running: a stop is refused with no_active_run
    await app.connection("connection.send({type: 'agent_control', action: 'stop'})")
    notice = app.loc(".notice-error").last
    await expect(notice.locator(".notice-title")).to_have_text("Nothing is running")
    await expect(notice.locator(".notice-text")).to_have_text(
        "there is no active run in this session"
    )

    # a second chat while a run is active is refused as busy; the run goes on
    await app.type_and_send("first")
    await expect(app.loc(".busy-text")).to_have_text("Reasoning…")
    await hang.started.wait()
    await app.connection("connection.send({type: 'chat', content: 'second'})")
    busy = app.loc(".notice-error").last
    await expect(busy.locator(".notice-title")).to_have_text(
        "Still busy with the previous message"
    )
    await expect(app.stop_button).to_be_enabled()

    # a frame the server cannot parse
    await app.connection("connection.send({type: 'shout'})")
    await expect(app.loc(".notice-error").last.locator(".notice-title")).to_have_text(
        "The server refused a message"
    )
    await app.stop_button.click()
    await app.wait_idle()
    assert hang.cancelled.is_set()
    await expect(app.loc(".notice-error")).to_have_count(3)


async def test_offline_model_is_labelled_and_works(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """The offline model is labelled as a demo, explains setup and answers a sample."""

    harness = await start_server()  # no LLM given: the built-in offline model
    app = await open_app(harness)

    await expect(app.loc("#model-chip")).to_contain_text("loopwire-offline")
    await expect(app.loc("#model-chip")).to_contain_text("offline demo")
    note = app.loc("#offline-note")
    await expect(note).to_be_hidden()
    await app.loc("#model-chip").click()  # the model card says what this is
    await expect(note).to_be_visible()
    await expect(note).to_contain_text("built-in offline demo model")
    for variable in (
        "LOOPWIRE_LLM_BASE_URL",
        "LOOPWIRE_LLM_API_KEY",
        "LOOPWIRE_LLM_MODEL",
    ):
        await expect(note).to_contain_text(variable)
    await app.page.keyboard.press("Escape")
    await expect(note).to_be_hidden()
    assert await app.texts(".tool-option-name") == [
        tool["name"] for tool in (await _info(harness))["tools"]
    ]

    await app.page.get_by_role("button", name="What is 2+2*3?").click()  # sent
    await app.wait_idle()
    await expect(app.composer).to_have_value("")
    await expect(app.answers()).to_have_text("2 + 2 \u00d7 3 = 8")
    assert await app.texts(".tool-card .tool-name") == ["calculator"]


async def test_page_headers_and_http_routes(start_server: StartServer) -> None:
    """The page has a strict CSP and no inline script, and the HTTP routes answer."""
    harness = await start_server(ScriptedLLM(), test_registry())
    async with httpx.AsyncClient(base_url=harness.server.url("")) as client:
        page = await client.get("/")
        health = await client.get("/healthz")
        info = await client.get("/api/info")
        module = await client.get("/static/js/app.js")
        purify = await client.get("/static/vendor/dompurify/purify.es.js")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "'unsafe-inline'" not in policy
    assert "connect-src 'self';" in policy and "img-src 'self' data:;" in policy
    assert "require-trusted-types-for 'script'" in policy
    assert 'id="lw-config"' in page.text and "<script>" not in page.text
    assert health.json() == {"status": "ok"}
    assert info.json()["model"] == "scripted-model" and info.json()["mcp"] == {}
    assert module.headers["content-type"].startswith(
        ("text/javascript", "application/javascript")
    )
    assert purify.status_code == 200


async def _info(harness: Harness) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=harness.server.url("")) as client:
        info: dict[str, Any] = (await client.get("/api/info")).json()
        return info


async def test_signing_in_through_the_login_form(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """The login form refuses a bad token, sets an HttpOnly cookie, and signs out."""
    token = "s3cret-token-0123456789"
    harness = await start_server(ScriptedLLM(), test_registry(), auth_token=token)
    app = await open_app(harness, load=False)
    await app.page.goto(harness.server.url("/"))
    await expect(app.page).to_have_url(harness.server.url("/login"))
    await app.page.fill("#token", "not-the-token-0000000")
    await app.page.click(".login-button")
    await expect(app.loc(".login-problem")).to_have_text(
        "That token is not valid here."
    )
    # the one console error expected: the refused sign-in is an HTTP 401
    app.problems.remove(
        "console error: Failed to load resource: the server responded with a "
        "status of 401 (Unauthorized)"
    )
    await app.page.fill("#token", token)
    await app.page.click(".login-button")
    await expect(app.page).to_have_url(harness.server.url("/"))
    await app.expect_connected()
    assert "token" not in app.socket_urls[0]
    (cookie,) = await app.page.context.cookies()
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == (
        "loopwire_session",
        True,
        "Strict",
    )
    assert await app.page.evaluate("document.cookie") == ""  # scripts cannot see it

    await app.page.click(".sign-out button")
    await expect(app.page).to_have_url(harness.server.url("/login"))
    assert await app.page.context.cookies() == []


async def test_a_page_whose_sign_in_ran_out_goes_to_the_login_form(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Once the session cookie is gone, opening a new chat goes to the login form."""
    token = "s3cret-token-0123456789"
    harness = await start_server(ScriptedLLM(), test_registry(), auth_token=token)
    app = await open_app(harness, load=False)
    await app.page.goto(harness.server.url("/login"))
    await app.page.fill("#token", token)
    await app.page.click(".login-button")
    await app.expect_connected()
    await app.page.context.clear_cookies()  # as when the cookie expires
    await app.page.click("#new-chat")  # a new socket, refused without it
    await expect(app.page).to_have_url(harness.server.url("/login"))
    assert sorted(app.problems) == [
        "console error: Failed to load resource: the server responded with a "
        "status of 401 (Unauthorized)",
        "console error: WebSocket connection to "
        f"'{harness.server.url('/ws', scheme='ws')}?client=page' failed: HTTP "
        "Authentication "
        "failed; no valid credentials available",
    ]
    app.problems.clear()
