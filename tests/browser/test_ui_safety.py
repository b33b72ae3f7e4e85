"""Model output is rendered as inert Markdown: no script runs, nothing loads."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.browser.ui import OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")


HOSTILE = (
    "Look: <img src=x onerror=\"window.__pwned = 'img'\"> and "
    "<script>window.__pwned = 'script'</script>\n\n"
    "[click me](javascript:alert(1)) · [ok](https://example.com/docs) · "
    "![tracker](https://evil.example/pixel.png) · "
    '<a href="javascript:window.__pwned=1">raw link</a>\n\n'
    '<iframe src="https://evil.example/"></iframe>'
    "<svg onload=\"window.__pwned = 'svg'\"></svg>"
    "<style>body { background: url(https://evil.example/bg.png) }</style>"
)


async def test_hostile_model_output_renders_inert(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Hostile Markdown from the model shows as text; no script runs, nothing loads."""
    llm = ScriptedLLM(
        reason(prose=HOSTILE),
        calls(("add", {"expression": "<img src=x onerror=alert(1)>"})),
        observe(prose=HOSTILE, should_continue=False, final=HOSTILE),
    )
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)

    await app.type_and_send("be evil")
    await app.wait_idle()
    await app.assistant().locator(".trace-summary").click()

    rendered = app.loc(".answer, .md")  # every place model text is rendered
    answer = app.answers()
    await expect(answer).to_contain_text("Look: <img src=x onerror=")
    await expect(answer).to_contain_text("<script>window.__pwned = 'script'</script>")
    assert await app.page.evaluate("() => window.__pwned") is None
    for selector in (
        "script",
        "img",
        "iframe",
        "svg",
        "style",
        "[onerror]",
        "[onload]",
    ):
        await expect(rendered.locator(selector)).to_have_count(0)
    await expect(
        app.loc("#messages script, #messages img, #messages iframe")
    ).to_have_count(0)
    await expect(app.loc("[onerror], [onload]")).to_have_count(0)
    await expect(app.loc("a[href^='javascript' i]")).to_have_count(0)

    # links: only http(s) survive, and they open safely in a new tab
    safe = answer.get_by_role("link", name="ok")
    await expect(safe).to_have_attribute("href", "https://example.com/docs")
    await expect(safe).to_have_attribute("rel", "noopener noreferrer")
    await expect(safe).to_have_attribute("target", "_blank")
    await expect(answer.locator("a", has_text="click me")).not_to_have_attribute(
        "href", "javascript:alert(1)"
    )
    image = answer.get_by_role("link", name="tracker (image)")
    await expect(image).to_have_attribute("href", "https://evil.example/pixel.png")

    # the same goes for the reason / observe text and the tool card
    reasoned = app.loc(".phase-reason .md").first
    await expect(reasoned).to_contain_text("<script>window.__pwned = 'script'</script>")
    await expect(app.loc(".tool-card pre").first).to_contain_text(
        "<img src=x onerror=alert(1)>"
    )
    assert await app.page.evaluate("() => window.__pwned") is None
    assert app.foreign_requests() == []


async def test_hostile_streamed_tokens_stay_text(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Hostile HTML in streamed tokens stays text and creates no elements."""

    harness = await start_server(ScriptedLLM(HOSTILE), test_registry())
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=[])

    await app.type_and_send("stream something evil")
    await app.wait_idle()

    await expect(app.answers()).to_contain_text("<img src=x onerror=")
    await expect(app.loc("#messages img, #messages script")).to_have_count(0)
    assert await app.page.evaluate("() => window.__pwned") is None
    assert app.foreign_requests() == []
