"""The page through nginx over three instances: the instance that owns the
conversation is killed (SIGKILL) while an approval waits; the page
reconnects through the balancer to another instance, which takes the
conversation over, and the approval goes on from there."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from playwright.async_api import Browser, expect

from backend.bus.redis_bus import PREFIX
from tests.browser.ui import App
from tests.cluster_harness import LEASE_S, running_cluster

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
            session = await app.page.evaluate("loopwire.connection.sessionId")
            owner = await owner_of(redis_url, session)

            await cluster.kill(owner)
            await expect(app.loc("#connection")).to_have_attribute(
                "data-state", "reconnecting"
            )
            await app.page.evaluate("loopwire.connection.reconnectNow()")
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
