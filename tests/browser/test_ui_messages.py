"""Message actions: copy a message, an answer and each code block (the
clipboard's contents checked), code highlighted by the vendored highlight.js,
and Retry on the latest answer."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

ANSWER = "Here it is:\n\n```python\nprint('hi')\n```\n\nAnd `inline`."


async def clipboard(app: App) -> str:
    text: str = await app.page.evaluate("navigator.clipboard.readText()")
    return text


async def test_copy_answer_message_and_code(
    start_server: StartServer, open_app: OpenApp
) -> None:
    harness = await start_server(ScriptedLLM(ANSWER), test_registry())
    app = await open_app(harness)
    await app.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("show me python")
    await app.wait_idle()

    code = app.loc(".answer pre code")
    await expect(code).to_have_class("hljs language-python")
    await expect(code.locator("span.hljs-built_in")).to_have_text("print")
    await expect(code.locator("span.hljs-string")).to_have_text("'hi'")

    await app.page.get_by_role("button", name="Copy code").click()
    assert await clipboard(app) == "print('hi')"
    await expect(app.page.get_by_role("button", name="Copy code")).to_have_text(
        "Copied"
    )

    await app.page.get_by_role("button", name="Copy answer").click()
    assert await clipboard(app) == ANSWER

    await app.loc(".turn-user").hover()
    await app.page.get_by_role("button", name="Copy message").click()
    assert await clipboard(app) == "show me python"


async def test_retry_asks_the_latest_again(
    start_server: StartServer, open_app: OpenApp
) -> None:
    llm = ScriptedLLM("First try.", "Second try.")
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("say something")
    await app.wait_idle()

    retry = app.page.get_by_role("button", name="Retry: ask the same again")
    await expect(retry).to_have_count(1)
    await retry.click()
    await app.wait_idle()
    await expect(app.answers()).to_have_text(["First try.", "Second try."])
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(
        ["say something", "say something"]
    )
    await expect(retry).to_have_count(1)  # only the latest answer offers it
    await expect(
        app.assistant().get_by_role("button", name="Retry: ask the same again")
    ).to_have_count(1)
    first, second = app.sent_of("chat")
    assert first == second
    assert [r.messages[-1].content for r in llm.requests] == ["say something"] * 2
