"""Signing in through a real OpenID provider (`oidc-provider-mock`, its own
process) in Chromium: the login page's button, the provider's form, back on
the chat signed in; signing out, and an admin's revocation, send the
browser back to the login page."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, Route, expect

from tests.browser.ui import App
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, test_registry
from tests.oidc_provider import running_oidc_provider

pytestmark = pytest.mark.asyncio(loop_scope="session")

ALICE = "alice-token-0123456789"
OUTSIDE = re.compile(r"^https?://(?!127\.0\.0\.1[:/])")
"""Anything not on this machine: the provider's page asks a CDN for its
style sheet; the test answers for it, so nothing leaves."""


@pytest_asyncio.fixture(loop_scope="session")
async def provider() -> AsyncIterator[str]:
    async with running_oidc_provider() as issuer:
        yield issuer


async def no_stylesheet(route: Route) -> None:
    await route.fulfill(status=200, content_type="text/css", body="")


async def sign_in_with_the_provider(app: App, issuer: str, subject: str) -> None:
    """From the login page: the button, the provider's form, the chat."""
    await app.page.get_by_role("link", name="Sign in with Mock IdP").click()
    await expect(app.page).to_have_url(re.compile(re.escape(issuer) + "/oauth2/"))
    await app.page.fill('input[name="sub"]', subject)
    await app.page.get_by_role("button", name="Authorize").click()
    await expect(app.page).to_have_url(app.base_url + "/")
    await app.expect_connected()


async def test_signing_in_with_the_provider_then_out_then_revoked(
    start_server: StartServer, browser: Browser, provider: str, tmp_path: Path
) -> None:
    """OIDC sign-in reaches the chat; sign-out or an admin revoke returns to login."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {ALICE} admin\n", encoding="utf-8")
    harness = await start_server(
        ScriptedLLM("Hello, dave."),
        test_registry(),
        auth_tokens_file=tokens,
        oidc_issuer=provider,
        oidc_client_id="loopwire-test",
        oidc_client_secret="client-secret-0123456789",
        oidc_name="Mock IdP",
    )
    app = await App.open(browser, harness.server.url("/"))
    try:
        await app.context.route(OUTSIDE, no_stylesheet)
        await app.page.goto(harness.server.url("/"))
        await expect(app.page).to_have_url(harness.server.url("/login"))
        await sign_in_with_the_provider(app, provider, "dave")
        await expect(app.loc(".sign-out button")).to_have_attribute(
            "title", "Signed in as dave"
        )
        await app.use_settings(agent=False, tools=[])
        await app.type_and_send("hi")
        await expect(app.loc(".answer[data-state=final]")).to_have_text("Hello, dave.")
        (cookie,) = [
            c for c in await app.context.cookies() if c["name"] == "loopwire_session"
        ]
        assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")

        # signing out revokes the sign-in: even the old cookie, put back, is refused
        await app.page.click(".sign-out button")
        await expect(app.page).to_have_url(harness.server.url("/login"))
        await app.context.add_cookies([cookie])  # type: ignore[list-item]
        await app.page.goto(harness.server.url("/"))
        await expect(app.page).to_have_url(harness.server.url("/login"))

        # signed in again, then an admin revokes dave's sign-ins
        await sign_in_with_the_provider(app, provider, "dave")
        async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
            revoked = await http.post(
                "/api/admin/users/dave/revoke",
                headers={"Authorization": f"Bearer {ALICE}"},
            )
        assert len(revoked.json()["revoked"]) == 1
        await app.page.reload()  # the browser's next request
        await expect(app.page).to_have_url(harness.server.url("/login"))
        await expect(
            app.page.get_by_role("link", name="Sign in with Mock IdP")
        ).to_be_visible()
        assert app.problems == []
        assert {u.split("/")[2] for u in app.requests if not OUTSIDE.match(u)} == {
            harness.server.url("").split("/")[2],
            provider.split("/")[2],
        }
    finally:
        await app.close()
