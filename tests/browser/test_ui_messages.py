"""Message actions: copy a message, an answer and each code block (the
clipboard's contents checked), code highlighted by the vendored highlight.js,
Retry on the latest answer (in its place), and edit and resend a message
(replacing what followed it)."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from backend.llm.base import Completion, Usage
from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

ANSWER = "Here it is:\n\n```python\nprint('hi')\n```\n\nAnd `inline`."


async def clipboard(app: App) -> str:
    text: str = await app.page.evaluate("navigator.clipboard.readText()")
    return text


async def test_copy_answer_message_and_code(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Code is highlighted; copy buttons copy the code, the answer and the message."""
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
    """Retry replaces the last answer in place via `replace_from`, after reload too."""
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
    # the new answer takes the old one's place, on screen and for the model
    await expect(app.answers()).to_have_text(["Second try."])
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(["say something"])
    await expect(retry).to_have_count(1)
    first, second = app.sent_of("chat")
    assert second == {**first, "replace_from": second["replace_from"]}
    assert len(second["replace_from"]) == 32
    assert [m.content for m in llm.requests[1].messages if m.role != "system"] == [
        "say something"
    ]
    assert [r.messages[-1].content for r in llm.requests] == ["say something"] * 2

    await app.page.reload()  # the replay shows it the same way
    await app.expect_connected()
    await expect(app.answers()).to_have_text(["Second try."])
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(["say something"])


async def test_edit_and_resend_replaces_what_followed(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Editing a message drops later turns, Escape cancels, and a reload agrees."""
    llm = ScriptedLLM("One.", "Two.", "Three.", "Edited two.")
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=[])
    for message in ("first", "second", "third"):
        await app.type_and_send(message)
        await app.wait_idle()
    bubbles = app.loc(".turn-user")
    await expect(bubbles.get_by_role("button", name="Edit message")).to_have_count(3)

    second = bubbles.nth(1)
    await second.hover()
    await second.get_by_role("button", name="Edit message").click()
    editor = app.page.get_by_role("textbox", name="Edit your message")
    await expect(editor).to_be_focused()
    await expect(editor).to_have_value("second")
    await app.page.keyboard.press("Escape")  # cancel: nothing changes
    await expect(editor).to_have_count(0)
    await expect(second.locator(".bubble-text")).to_have_text("second")
    await expect(app.stop_button).to_be_hidden()

    await second.get_by_role("button", name="Edit message").click()
    await editor.fill("second, better")
    await app.page.keyboard.press("Enter")
    await app.wait_idle()
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(
        ["first", "second, better"]
    )
    await expect(app.answers()).to_have_text(["One.", "Edited two."])
    edit = app.sent_of("chat")[-1]
    assert edit["content"] == "second, better"
    stored = await app.connection(
        "fetch('/api/conversations/' + connection.sessionId).then((r) => r.json())"
    )
    assert [run["request"] for run in stored["runs"]] == ["first", "second, better"]
    assert edit["replace_from"] not in [run["id"] for run in stored["runs"]]
    # the model saw the conversation up to the edited message, and it
    assert [m.content for m in llm.requests[-1].messages if m.role != "system"] == [
        "first",
        "One.",
        "second, better",
    ]

    await app.page.reload()  # the replay removes the replaced runs too
    await app.expect_connected()
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(
        ["first", "second, better"]
    )
    await expect(app.answers()).to_have_text(["One.", "Edited two."])


TABLE = "| unit | km |\n| --- | ---: |\n| 1 mile | 1.609 |\n| 10 miles | 16.09 |"


async def test_a_table_renders_and_the_footer_counts_only_what_was_reported(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A markdown table renders aligned; the footer shows tokens only if reported."""
    usage = Usage(
        prompt_tokens=1200, completion_tokens=34, total_tokens=1234, llm_calls=1
    )
    llm = ScriptedLLM(
        Completion(content=reason("done", finish=True, final=TABLE), usage=usage),
        Completion(content=reason("done", finish=True, final="No usage here.")),
    )
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await app.type_and_send("miles in km, as a table")
    await app.wait_idle()

    table = app.answers().locator("table")
    assert await table.locator("th").all_text_contents() == ["unit", "km"]
    rows = table.locator("tbody tr")
    await expect(rows).to_have_count(2)
    assert await rows.nth(1).locator("td").all_text_contents() == ["10 miles", "16.09"]
    align = (
        await rows.nth(1)
        .locator("td")
        .nth(1)
        .evaluate("td => getComputedStyle(td).textAlign")
    )
    assert align == "right"
    footer = app.assistant().locator(".run-meta")
    await expect(footer).to_contain_text(" · 1 LLM call · 1,234 tokens")

    await app.type_and_send("and without usage?")
    await app.wait_idle()
    footer = app.assistant().locator(".run-meta")
    await expect(footer).to_contain_text("Finished · 1 step")
    await expect(footer).to_contain_text("1 LLM call")  # counted by the server
    await expect(footer).not_to_contain_text("token")  # not reported: not shown
