"""Fixtures for the browser tests: Chromium, live servers, the chat page.

Chromium starts once per test session. Every browser test therefore runs in
the session's event loop (`pytestmark = pytest.mark.asyncio(loop_scope=
"session")` in each module), and so do the servers it starts (`start_server`
is redefined here with that loop scope). Each test still gets its own browser
context (fresh storage) and its own server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, async_playwright

from tests.browser.ui import CHROMIUM, CHROMIUM_ARGS, App, OpenApp
from tests.conftest import Harness, StartServer, server_starter


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless; the tests are skipped when it is missing."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (`make browser` installs it)")
    playwright = await async_playwright().start()
    try:
        chromium = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            await chromium.close()
    finally:
        await playwright.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def start_server() -> AsyncIterator[StartServer]:
    """As `tests/conftest.py`'s, in the session loop the browser lives in."""
    async with AsyncExitStack() as stack:
        yield server_starter(stack)


@pytest_asyncio.fixture(loop_scope="session")
async def open_app(browser: Browser) -> AsyncIterator[OpenApp]:
    """`await open_app(harness, **options)` → the loaded chat page of `harness`.

    After the test, every page must have stayed free of script errors, console
    errors and warnings (CSP violations included) and of requests to any
    other origin.
    """
    apps: list[App] = []

    async def open_page(harness: Harness, *, load: bool = True, **options: Any) -> App:
        app = await App.open(browser, harness.server.url("/"), **options)
        apps.append(app)
        return await app.load() if load else app

    yield open_page
    problems = []
    for app in apps:
        problems += app.problems + [f"request {u}" for u in app.foreign_requests()]
        await app.close()
    assert problems == [], "the page misbehaved:\n" + "\n".join(problems)
