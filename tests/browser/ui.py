"""Driving the chat page in Chromium: launch options, and `App`, a page plus
what it sent, requested and complained about."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Locator,
    Page,
    Request,
    WebSocket,
    expect,
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
# The page's entry module, as the page loaded it (the same module instance):
# what it exports (`connection`, `controller`, …) is how a test reaches inside.
APP_MODULE = (
    "import(document.querySelector('script[type=module][src$=\"/js/app.js\"]').src)"
)
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 375, "height": 812}

OpenApp = Callable[..., Awaitable["App"]]
"""`await open_app(harness, load=True, viewport=…, color_scheme=…)`."""


@dataclass
class App:
    """The chat page of one server, and everything observed while it ran."""

    page: Page
    context: BrowserContext
    base_url: str
    sent: list[dict[str, Any]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    socket_urls: list[str] = field(default_factory=list)

    @classmethod
    async def open(
        cls,
        browser: Browser,
        base_url: str,
        *,
        viewport: dict[str, int] | None = None,
        color_scheme: str = "light",
        touch: bool = False,
        bypass_csp: bool = False,
    ) -> App:
        """`touch`: a phone's touch screen (coarse pointer, no hover);
        `bypass_csp`: let a test inject a script (axe-core) into the page."""
        context = await browser.new_context(
            bypass_csp=bypass_csp,
            viewport=viewport or DESKTOP,  # type: ignore[arg-type]
            color_scheme=color_scheme,  # type: ignore[arg-type]
            reduced_motion="reduce",
            has_touch=touch,
            is_mobile=touch,
        )
        context.set_default_timeout(10_000)
        app = cls(await context.new_page(), context, base_url.rstrip("/"))
        app.page.on("websocket", app._on_websocket)
        app.page.on("request", app._on_request)
        app.page.on("console", app._on_console)
        app.page.on("pageerror", lambda error: app.problems.append(f"{error}"))
        return app

    async def load(self) -> App:
        await self.page.goto(self.base_url + "/")
        await self.expect_connected()
        return self

    # ------------------------------------------------------------ observers

    def _on_websocket(self, socket: WebSocket) -> None:
        self.socket_urls.append(socket.url)
        socket.on("framesent", self._on_frame_sent)

    def _on_frame_sent(self, payload: str | bytes) -> None:
        self.sent.append(json.loads(payload))

    def _on_request(self, request: Request) -> None:
        self.requests.append(request.url)

    def _on_console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"console {message.type}: {message.text}")

    def sent_of(self, kind: str) -> list[dict[str, Any]]:
        return [frame for frame in self.sent if frame["type"] == kind]

    def foreign_requests(self) -> list[str]:
        origin = urlsplit(self.base_url).netloc
        return [url for url in self.requests if urlsplit(url).netloc != origin]

    async def connection(self, expression: str) -> Any:
        """`expression` evaluated in the page with its `connection` in scope."""
        return await self.page.evaluate(
            f"async () => {{ const {{ connection }} = await {APP_MODULE};"
            f" return {expression}; }}"
        )

    async def wait_for_connection(self, expression: str, timeout_s: float = 30) -> None:
        """Until `expression` (as in `connection`) is true."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not await self.connection(expression):
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{expression} stayed false for {timeout_s} s")
            await asyncio.sleep(0.05)

    # ------------------------------------------------------------ locators

    def loc(self, selector: str) -> Locator:
        return self.page.locator(selector)

    @property
    def composer(self) -> Locator:
        return self.page.get_by_label("Message", exact=True)

    @property
    def stop_button(self) -> Locator:
        return self.loc("#stop-button")

    @property
    def send_button(self) -> Locator:
        return self.loc("#send-button")

    @property
    def banner(self) -> Locator:
        return self.loc("#question-banner")

    @property
    def dialog(self) -> Locator:
        return self.loc("#approval")

    def assistant(self, index: int = -1) -> Locator:
        turns = self.loc(".turn-assistant")
        return turns.last if index == -1 else turns.nth(index)

    def answers(self) -> Locator:
        return self.loc(".turn-assistant .answer")

    # ------------------------------------------------------------ actions

    async def expect_connected(self) -> None:
        await expect(self.loc("#connection")).to_have_attribute("data-state", "open")

    async def type_and_send(self, text: str) -> None:
        """Type into the message box and press Enter (as a keyboard user)."""
        await self.composer.focus()
        await self.page.keyboard.type(text)
        await self.page.keyboard.press("Enter")

    async def use_settings(
        self,
        *,
        agent: bool | None = None,
        max_steps: int | None = None,
        tools: list[str] | None = None,
        read_only: bool | None = None,
    ) -> None:
        if agent is not None:
            await self.page.get_by_role("switch", name="Agent mode").set_checked(agent)
        if max_steps is not None:
            field = self.page.get_by_label("Max steps")
            await field.fill(str(max_steps))
            await field.press("Tab")
        if read_only is not None or tools is not None:
            await self.open_tools()
            if read_only is not None:
                switch = self.page.get_by_role("switch", name="Read-only")
                await switch.set_checked(read_only)
            if tools is not None:
                boxes = self.loc("#tool-options input[type=checkbox]")
                for index in range(await boxes.count()):
                    box = boxes.nth(index)
                    await box.set_checked(await box.get_attribute("value") in tools)
            await self.page.keyboard.press("Escape")
            await expect(self.loc("#tools-popover")).to_be_hidden()

    async def open_tools(self) -> None:
        """Open the tools popover from the composer's toolbar."""
        await self.loc("#tools-button").click()
        await expect(self.loc("#tools-popover")).to_be_visible()

    async def wait_idle(self) -> None:
        """The run is over: the last assistant turn is done, Stop is gone."""
        await expect(self.assistant()).to_have_attribute("data-state", "done")
        await expect(self.stop_button).to_be_hidden()

    async def texts(self, selector: str) -> list[str]:
        return [text.strip() for text in await self.loc(selector).all_text_contents()]

    async def close(self) -> None:
        await self.context.close()
