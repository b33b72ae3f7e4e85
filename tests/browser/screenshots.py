"""Screenshots of the chat page for the docs: `make screenshots`.

Runs the real app on the built-in offline model, drives the page in Chromium
the way a new user would, and writes into `docs/screenshots/` (or the folder
given as the first argument):

- `agent-run.png`   an agent run with its phases expanded (1280x860)
- `pause-banner.png` the agent asking a clarifying question (1280x860)
- `mobile.png`      the same conversation at 375px wide
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from playwright.async_api import Browser, async_playwright, expect

from backend.app import create_app
from backend.settings import Settings
from tests.browser.ui import CHROMIUM, CHROMIUM_ARGS, DESKTOP, App
from tests.live_server import serving

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
MOBILE = {"width": 375, "height": 812}


async def conversation(app: App, *, shoot_banner: Path | None) -> None:
    """Ask something that needs a tool, then something that needs a question."""
    await app.type_and_send("What is 2+2*3?")
    await app.wait_idle()
    await app.type_and_send("convert 10 miles")
    await expect(app.banner).to_be_visible()
    if shoot_banner is not None:
        await app.page.screenshot(path=shoot_banner)
    await app.page.keyboard.type("km")
    await app.page.keyboard.press("Enter")
    await app.wait_idle()
    await app.assistant().locator(".trace-summary").click()
    # the run from its start, its answer underneath
    await app.assistant().evaluate("turn => turn.scrollIntoView({block: 'start'})")


async def shoot(browser: Browser, url: str, out: Path) -> None:
    desktop = await App.open(browser, url, viewport=DESKTOP)
    try:
        await desktop.load()
        await desktop.composer.blur()
        await conversation(desktop, shoot_banner=out / "pause-banner.png")
        await desktop.page.screenshot(path=out / "agent-run.png")
    finally:
        await desktop.close()
    mobile = await App.open(browser, url, viewport=MOBILE)
    try:
        await mobile.load()
        await conversation(mobile, shoot_banner=None)
        await mobile.loc("#scroller").evaluate("s => { s.scrollTop = s.scrollHeight; }")
        await mobile.page.screenshot(path=out / "mobile.png")
    finally:
        await mobile.close()


async def take_all(out: Path) -> None:
    app = create_app(
        Settings(_env_file=None, llm_provider="offline", database_url="sqlite://")
    )
    async with serving(app) as server, async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        try:
            await shoot(browser, server.url("/"), out)
        finally:
            await browser.close()
    for name in ("agent-run.png", "pause-banner.png", "mobile.png"):
        print(f"wrote {out / name}")


def main(out: Path) -> None:
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: run `make browser` first")
    out.mkdir(parents=True, exist_ok=True)
    asyncio.run(take_all(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
