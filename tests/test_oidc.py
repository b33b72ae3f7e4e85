"""Signing in through a real OpenID provider (`oidc-provider-mock` in its own
process): the authorization code flow with PKCE, state and nonce, driven
by a script here (tests/browser/test_ui_signin.py drives it in Chromium)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, test_registry
from tests.oidc_provider import authorize, running_oidc_provider

CAROL = {"sub": "carol", "roles": ["staff", "loopwire-admin"]}


@pytest.fixture
async def provider() -> AsyncIterator[str]:
    async with running_oidc_provider(CAROL) as issuer:
        yield issuer


def oidc_settings(issuer: str) -> dict[str, Any]:
    return {
        "oidc_issuer": issuer,
        "oidc_client_id": "loopwire-test",
        "oidc_client_secret": "client-secret-0123456789",
        "oidc_name": "Mock IdP",
        "oidc_admin_role": "loopwire-admin",
    }


async def start_with_oidc(start_server: StartServer, issuer: str) -> Harness:
    return await start_server(ScriptedLLM(), test_registry(), **oidc_settings(issuer))


async def begin(http: httpx.AsyncClient) -> str:
    """`GET /login/oidc`: the provider's authorization URL it sends us to."""
    started = await http.get("/login/oidc")
    assert started.status_code == 303
    cookie = started.headers["set-cookie"]
    assert cookie.startswith("loopwire_oidc=")
    attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite=lax", "path=/login/oidc", "max-age=600"} <= attributes
    return started.headers["location"]


async def test_a_provider_sign_in_makes_a_revocable_sign_in_with_the_role(
    start_server: StartServer, provider: str
) -> None:
    """A PKCE sign-in at the provider makes an admin sign-in that logout ends."""
    harness = await start_with_oidc(start_server, provider)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        form = await http.get("/login")
        assert 'href="/login/oidc">Sign in with Mock IdP</a>' in form.text
        assert 'name="token"' not in form.text  # no tokens file: no token form

        url = await begin(http)
        query = parse_qs(urlsplit(url).query)
        assert url.startswith(f"{provider}/oauth2/authorize?")
        assert query["code_challenge_method"] == ["S256"]
        assert query["redirect_uri"] == [harness.server.url("/login/oidc/callback")]
        assert query["client_id"] == ["loopwire-test"]
        assert {"state", "nonce", "code_challenge"} <= query.keys()

        back = await authorize(http, url, "carol")
        assert back.startswith(harness.server.url("/login/oidc/callback?code="))
        done = await http.get(back)
        assert done.status_code == 200
        assert '<meta http-equiv="refresh" content="0; url=/">' in done.text
        assert re.search(r"loopwire_session=[0-9a-f]{32}\.", done.headers["set-cookie"])

        signins = await http.get("/api/admin/signins")  # carol is an admin
        assert signins.status_code == 200
        (only,) = signins.json()["items"]
        assert (only["user"], only["role"], only["method"]) == (
            "carol",
            "admin",
            "oidc",
        )
        page = await http.get("/")
        assert page.status_code == 200 and 'title="Signed in as carol"' in page.text

        await http.post("/logout")
        http.cookies.set("loopwire_session", done.cookies["loopwire_session"])
        again = await http.get("/api/info")
    assert again.status_code == 401


async def test_a_subject_without_the_admin_role_is_a_user(
    start_server: StartServer, provider: str
) -> None:
    """A subject lacking the admin role signs in as a plain user, 403 on admin pages."""
    harness = await start_with_oidc(start_server, provider)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        done = await http.get(await authorize(http, await begin(http), "dave"))
        assert done.status_code == 200
        info = await http.get("/api/info")
        admin = await http.get("/api/admin/usage")
    assert info.status_code == 200
    assert (admin.status_code, admin.json()) == (
        403,
        {"error_type": "forbidden", "message": "this needs the admin role"},
    )


async def test_the_callback_refuses_a_state_it_did_not_send(
    start_server: StartServer, provider: str
) -> None:
    """A callback with a forged state or from another browser fails; no one signs in."""
    harness = await start_with_oidc(start_server, provider)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        back = await authorize(http, await begin(http), "dave")
        code = parse_qs(urlsplit(back).query)["code"][0]
        forged = await http.get(
            "/login/oidc/callback", params={"code": code, "state": "not-the-state"}
        )
        http.cookies.clear()
        without = await http.get(back)  # the right state, in another browser
    for response, reason in [
        (forged, "the answer is not for this browser&#39;s sign-in"),
        (without, "this browser started no sign-in, or it ran out"),
    ]:
        assert response.status_code == 400
        assert f"The sign-in failed: {reason}." in response.text
        assert "loopwire_session=" not in response.headers.get("set-cookie", "")
    assert await harness.server.app.state.signins.live() == []


async def test_a_provider_error_is_shown_on_the_login_form(
    start_server: StartServer, provider: str
) -> None:
    """A provider's refusal shows on the login form and forgets the pending sign-in."""
    harness = await start_with_oidc(start_server, provider)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        url = await begin(http)
        denied = await http.post(url, data={"action": "deny"})
        assert denied.status_code == 302
        shown = await http.get(denied.headers["location"])
    assert shown.status_code == 400
    assert "The sign-in failed: the provider said" in shown.text
    assert "set-cookie" in shown.headers  # the pending sign-in is forgotten
    assert "loopwire_session=" not in shown.headers["set-cookie"]
