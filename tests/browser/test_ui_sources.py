"""Data sources in the browser: the Documents chip and its popover, a
retrieval with the agent and the tools off, and the citations under the
answer (on the offline model, with the demo documents shipped in
demo/documents)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import expect

from tests.browser.ui import OpenApp
from tests.conftest import StartServer

pytestmark = pytest.mark.asyncio(loop_scope="session")

DEMO = Path(__file__).resolve().parents[2] / "demo" / "documents"


async def test_a_retrieval_answers_with_citations(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """With documents chosen the answer cites them, each citation opening its
    document; with none, no search is offered."""
    harness = await start_server(data_sources=f"demo={DEMO}", sources_index=":memory:")
    await harness.server.app.state.library.ready.wait()
    app = await open_app(harness)
    documents = app.page.get_by_role("button", name="Documents 1: 1 of 1 data sources")
    await expect(documents).to_be_visible()

    await app.use_settings(agent=False, tools=[])
    await expect(app.loc("#mode-note")).to_have_text(
        "Documents: your message is searched in the chosen data sources, "
        "then answered with citations."
    )
    await app.type_and_send("how do I restore a backup?")
    await app.wait_idle()

    chat = app.sent_of("chat")[-1]
    assert (chat["selected_data_sources"], chat["selected_tools"]) == (["demo"], [])
    await expect(app.loc(".turn-user .turn-tag")).to_have_text("Documents")
    await expect(app.answers()).to_contain_text("According to demo/backups.md")
    first = app.loc(".citations .citation").first
    await expect(first.locator(".citation-source")).to_have_text("demo")
    path = first.locator(".citation-path")
    await expect(path).to_have_text("backups.md")
    await expect(path).to_have_attribute(
        "href", "/api/sources/demo/documents/backups.md"
    )
    async with app.context.expect_page() as opening:  # opens the document
        await path.click()
    document = await opening.value
    await document.wait_for_load_state()
    assert "kestrel restore" in await document.content()
    await document.close()
    await expect(first.locator(".citation-location")).to_have_text(
        "Backups › Restoring"  # noqa: RUF001
    )
    await expect(first.locator(".citation-excerpt")).to_contain_text("kestrel restore")
    await expect(app.loc(".citations")).to_have_attribute("aria-label", "Sources")

    # none chosen: nothing is searched, and the search tool is not offered
    await documents.click()
    await app.page.get_by_role("checkbox", name="demo").set_checked(False)
    await app.page.keyboard.press("Escape")
    await expect(app.loc("#sources-count")).to_have_text("0/1")
    await app.use_settings(agent=True, tools=["calculator", "search_documents"])
    await app.type_and_send("What is 2+2?")
    await app.wait_idle()
    chat = app.sent_of("chat")[-1]
    assert "selected_data_sources" not in chat
    assert chat["selected_tools"] == ["calculator"]
