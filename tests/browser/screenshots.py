"""Screenshots of the chat page for the docs: `make screenshots`.

Runs the real app on the built-in offline model, drives the page in Chromium
the way a new user would (a first conversation that saves a note, asking
approval; then a new one with a tool call and a clarifying question), and
writes into `docs/screenshots/` (or the folder given as the first argument):

- `approval.png`            the approval dialog (1280x860)
- `pause-banner.png`        the agent asking a clarifying question (1280x860)
- `agent-run.png`           the finished run with its phases expanded, the
                            conversations listed beside it (1280x860)
- `mobile-approval.png`, `mobile-question.png`, `mobile.png`
                            the same at 375px wide
- `mobile-conversations.png` the conversations drawer at 375px
- `tools.png`               the toolbar's tools popover (1280x860)
- `sources.png`             an answer from the demo documents, with its
                            citations (1280x860)
- `versions.png`            an edited message with its versions (2 / 2)
- `share.png`               the Share dialog with a new link
- `instructions.png`        the Instructions dialog
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
from pathlib import Path

from playwright.async_api import Browser, async_playwright, expect
from starlette.applications import Starlette

from backend.app import create_app
from backend.settings import Settings
from tests.browser.ui import CHROMIUM, CHROMIUM_ARGS, DESKTOP, PHONE, App
from tests.live_server import serving

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
DEMO = Path(__file__).resolve().parents[2] / "demo" / "documents"
NAMES = (
    "approval.png",
    "pause-banner.png",
    "agent-run.png",
    "mobile-approval.png",
    "mobile-question.png",
    "mobile.png",
    "mobile-conversations.png",
    "tools.png",
    "sources.png",
    "versions.png",
    "share.png",
    "instructions.png",
)


async def new_chat(app: App, *, phone: bool) -> None:
    if phone:
        await app.page.get_by_role("button", name="Conversations").click()
    await app.page.get_by_role("button", name="New chat").click()
    await expect(app.loc("#messages > *")).to_have_count(0)
    await app.expect_connected()


async def conversations(app: App, shots: dict[str, Path], *, phone: bool) -> None:
    """A note saved after approval; then a new chat: a tool call, and a
    question answered."""
    await app.type_and_send("remember: buy milk")
    await expect(app.dialog).to_be_visible()
    await app.page.screenshot(path=shots["approval"])
    await app.page.get_by_role("button", name="Approve").click()
    await app.wait_idle()
    await new_chat(app, phone=phone)
    await app.type_and_send("What is 2+2*3?")
    await app.wait_idle()
    await app.type_and_send("convert 10 miles")
    await expect(app.banner).to_be_visible()
    await app.page.screenshot(path=shots["question"])
    await app.page.keyboard.type("km")
    await app.page.keyboard.press("Enter")
    await app.wait_idle()
    current = app.loc(".conversation-link[aria-current=page]")
    await expect(current).to_have_text("What is 2+2*3?")


async def versions_and_dialogs(app: App, out: Path) -> None:
    """A message edited (its versions shown), then the Share and the
    Instructions dialogs."""
    await new_chat(app, phone=False)
    await app.type_and_send("What is 2+2*3?")
    await app.wait_idle()
    asked = app.loc(".turn-user").first
    await asked.hover()
    await asked.get_by_role("button", name="Edit message").click()
    await app.page.get_by_role("textbox", name="Edit your message").fill(
        "What is (2+2)*3?"
    )
    await app.page.keyboard.press("Enter")
    await app.wait_idle()
    await expect(app.loc(".versions-count")).to_have_text("2 / 2")
    await app.composer.blur()
    await app.page.screenshot(path=out / "versions.png")
    await app.page.get_by_role("button", name="Share conversation").click()
    await app.page.get_by_role("button", name="Create link").click()
    await expect(app.loc("#share-url")).to_have_value(re.compile("/s/"))
    await app.page.screenshot(path=out / "share.png")
    await app.page.keyboard.press("Escape")
    await app.page.get_by_role("button", name="Instructions").click()
    await app.page.get_by_label("For all your conversations").fill(
        "Answer briefly; use metric units."
    )
    await app.page.screenshot(path=out / "instructions.png")
    await app.page.keyboard.press("Escape")


async def shoot(browser: Browser, url: str, out: Path) -> None:
    desktop = await App.open(browser, url, viewport=DESKTOP)
    try:
        await desktop.load()
        shots = {"approval": out / "approval.png", "question": out / "pause-banner.png"}
        await conversations(desktop, shots, phone=False)
        await desktop.assistant().locator(".trace-summary").click()
        # the run from its start, its answer underneath
        await desktop.assistant().evaluate(
            "turn => turn.scrollIntoView({block: 'start'})"
        )
        await desktop.composer.blur()
        await desktop.page.screenshot(path=out / "agent-run.png")
        await desktop.open_tools()
        await desktop.page.screenshot(path=out / "tools.png")
        await desktop.page.keyboard.press("Escape")
        await new_chat(desktop, phone=False)
        await desktop.type_and_send("What do my documents say about backups?")
        await desktop.wait_idle()
        await expect(desktop.loc(".citations")).to_be_visible()
        await desktop.composer.blur()
        await desktop.page.screenshot(path=out / "sources.png")
        await versions_and_dialogs(desktop, out)
    finally:
        await desktop.close()
    phone = await App.open(browser, url, viewport=PHONE, touch=True)
    try:
        await phone.load()
        shots = {
            "approval": out / "mobile-approval.png",
            "question": out / "mobile-question.png",
        }
        await conversations(phone, shots, phone=True)
        await phone.loc("#scroller").evaluate("s => { s.scrollTop = s.scrollHeight; }")
        await phone.page.screenshot(path=out / "mobile.png")
        await phone.page.get_by_role("button", name="Conversations").click()
        await expect(phone.loc("#sidebar")).to_be_visible()
        await phone.page.screenshot(path=out / "mobile-conversations.png")
    finally:
        await phone.close()


async def take_all(out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="loopwire-shots-") as files:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            llm_provider="offline",
            database_url="sqlite://",
            files_dir=Path(files),
            data_sources=f"demo={DEMO}",  # as `make run` serves
            sources_index=":memory:",
        )
        await shoot_app(create_app(settings), out)
    for name in NAMES:
        print(f"wrote {out / name}")


async def shoot_app(app: Starlette, out: Path) -> None:
    async with serving(app) as server, async_playwright() as playwright:
        await app.state.library.ready.wait()
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        try:
            await shoot(browser, server.url("/"), out)
        finally:
            await browser.close()


def main(out: Path) -> None:
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: run `make browser` first")
    out.mkdir(parents=True, exist_ok=True)
    asyncio.run(take_all(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
