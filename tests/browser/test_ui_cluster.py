"""The page through nginx over three instances: the instance that owns the
conversation is killed (SIGKILL) while an approval waits; the page
reconnects through the balancer to another instance, which takes the
conversation over, and the approval goes on from there. Reloaded after the
take-over, the page gets the pending approval from the instance it reaches
now (stored with the run's waiting checkpoint), and approving runs the tool
once."""

from __future__ import annotations

import re

import pytest
import redis.asyncio as aioredis
from playwright.async_api import Browser, WebSocketRoute, expect

from backend.bus.redis_bus import PREFIX
from tests.browser.geometry import why_not_clickable
from tests.browser.ui import DESKTOP, PHONE, App
from tests.cluster_harness import LEASE_S, running_cluster
from tests.faults.invariants import notes_by_text

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(180)]


async def owner_of(redis_url: str, session_id: str) -> str:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        holder = await client.get(f"{PREFIX}lease:{session_id}")
    finally:
        await client.aclose()
    assert isinstance(holder, str), f"nobody owns {session_id}"
    return holder


async def test_the_page_carries_on_when_its_instance_is_killed(
    browser: Browser, pg_database_url: str, redis_url: str
) -> None:
    """When its instance dies mid-approval the page reconnects elsewhere and goes on."""
    async with running_cluster(
        pg_database_url, redis_url, lease_ttl_s=LEASE_S, llm_provider="offline"
    ) as cluster:
        assert cluster.balancer is not None
        app = await App.open(browser, cluster.balancer.url + "/")
        try:
            await app.load()
            await app.type_and_send("remember: buy milk")
            await expect(app.dialog).to_be_visible()
            await expect(app.loc("#approval-tool")).to_have_text("save_note")
            session = await app.connection("connection.sessionId")
            owner = await owner_of(redis_url, session)

            await cluster.kill(owner)
            await expect(app.loc("#connection")).to_have_attribute(
                "data-state", "reconnecting"
            )
            await app.connection("connection.reconnectNow()")
            await app.expect_connected()
            assert await owner_of(redis_url, session) != owner

            await expect(app.dialog).to_be_visible()  # asked again, once
            await expect(app.loc("#approval-tool")).to_have_text("save_note")
            await app.page.get_by_role("button", name="Approve").click()
            await app.wait_idle()
            await expect(app.answers()).to_contain_text("buy milk")
            texts = await app.texts(".turn-user .bubble-text")
            assert texts == ["remember: buy milk"]
        finally:
            problems = list(app.problems)
            foreign = app.foreign_requests()
            await app.close()
    assert problems == [] and foreign == []


class HeldBack:
    """The page's new sockets, closed (1013, try again later) while `held`,
    so that no reconnect of the page takes the conversation over: an
    instance adopts it on its own, as an orphan. Let through otherwise."""

    def __init__(self) -> None:
        self.held = False

    async def handle(self, page_side: WebSocketRoute) -> None:
        if self.held:
            await page_side.close(code=1013, reason="held back by the test")
        else:
            page_side.connect_to_server()


async def test_a_reloaded_page_approves_what_the_killed_instance_asked_once(
    browser: Browser, pg_database_url: str, redis_url: str
) -> None:
    """After an orphan take-over a reloaded page approves the waiting call, run once."""
    async with running_cluster(
        pg_database_url, redis_url, lease_ttl_s=LEASE_S, llm_provider="offline"
    ) as cluster:
        assert cluster.balancer is not None
        app = await App.open(browser, cluster.balancer.url + "/")
        sockets = HeldBack()
        try:
            await app.page.route_web_socket(re.compile(r"/ws"), sockets.handle)
            await app.load()
            await app.type_and_send("remember: buy milk")
            await expect(app.dialog).to_be_visible()
            session = await app.connection("connection.sessionId")
            owner = await owner_of(redis_url, session)

            sockets.held = True
            await cluster.kill(owner)
            heir = await cluster.took_over(session)
            assert heir != owner and await owner_of(redis_url, session) == heir
            sockets.held = False
            await app.page.reload()
            await app.expect_connected()

            await expect(app.dialog).to_be_visible()
            await expect(app.loc("#approval-tool")).to_have_text("save_note")
            await expect(app.loc(".tool-card")).to_have_attribute(
                "data-status", "approval"
            )
            # the take-over skipped seqs: no frame ends the replay, a pause does
            await app.wait_for_connection("!connection.replaying")
            buttons = [
                app.page.get_by_role("button", name=name)
                for name in ("Reject", "Approve")
            ]
            for size in (DESKTOP, PHONE):
                await app.page.set_viewport_size(size)  # type: ignore[arg-type]
                for button in buttons:
                    assert await why_not_clickable(button) == [], size
            await buttons[1].click()
            await app.wait_idle()

            await expect(app.answers()).to_contain_text("buy milk")
            await expect(app.loc(".tool-card")).to_have_count(1)
            await expect(app.loc(".tool-card")).to_have_attribute("data-status", "done")
            assert await app.texts(".turn-user .bubble-text") == ["remember: buy milk"]
            approvals = app.sent_of("tool_approval_response")
            assert [(a["approved"], "reason" in a) for a in approvals] == [
                (True, False)
            ]
        finally:
            problems = list(app.problems)
            foreign = app.foreign_requests()
            await app.close()
    assert problems == [] and foreign == []
    assert await notes_by_text(pg_database_url) == {"buy milk": 1}
