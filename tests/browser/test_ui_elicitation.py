"""An MCP server's question in the browser: the banner names the server,
its form is a real form (a radio group, a number box, a checkbox) sent with
Send answer, it may be declined or dismissed, and a page it asks the person
to open is a link with a Done button. Loopwire runs with the real cafe MCP
server (tests/mcp_servers/cafe_server.py); every control clicked is checked
to be in view, unclipped and uncovered on a desktop and on a phone."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Locator, expect

from tests.browser.geometry import why_not_clickable
from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, test_registry
from tests.test_mcp_elicitation import cafe_config, ordering, tool_results

pytestmark = pytest.mark.asyncio(loop_scope="session")

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SIZES = pytest.mark.parametrize(
    ("viewport", "touch"), [(DESKTOP, False), (PHONE, True)], ids=["desktop", "phone"]
)
ORDER_TITLE = "The MCP server 'cafe' asks: What would you like?"


async def press(control: Locator, touch: bool) -> None:
    """Bring `control` into view, check it can be seen and hit, then click
    (or tap) it."""
    await control.scroll_into_view_if_needed()
    assert await why_not_clickable(control) == [], await control.evaluate(
        "(e) => e.outerHTML"
    )
    await (control.tap() if touch else control.click())


async def order_asked(app: App) -> Locator:
    """Ask for an order: the banner names the server; its form."""
    await app.type_and_send("order me a coffee")
    await expect(app.loc("#question-title")).to_have_text(ORDER_TITLE)
    form = app.page.get_by_role("form", name="What would you like?")
    await expect(form).to_be_visible()
    return form


def sent_answers(app: App) -> list[dict[str, object]]:
    return [
        {k: v for k, v in frame.items() if k != "question_id"}
        for frame in app.sent_of("agent_user_input")
    ]


@SIZES
async def test_the_order_form_is_filled_in_and_sent(
    start_server: StartServer,
    open_app: OpenApp,
    tmp_path: Path,
    viewport: dict[str, int],
    touch: bool,
) -> None:
    """Each field of the server's form is a labelled control with its help
    text; an incomplete form is not sent; the filled one is sent as JSON, and
    the server's result shows in the tool card and reaches the model."""
    llm = ScriptedLLM(*ordering())
    config = cafe_config(tmp_path)
    harness = await start_server(llm, test_registry(), mcp_config=config)
    app = await open_app(harness, viewport=viewport, touch=touch)
    form = await order_asked(app)

    size = form.get_by_role("group", name="Size")
    await expect(size.get_by_role("radio")).to_have_count(2)
    await expect(size).to_contain_text("How big a cup")
    cups = form.get_by_role("spinbutton", name="Cups")
    await expect(cups).to_have_attribute("min", "1")
    await expect(cups).to_have_attribute("max", "4")
    await expect(cups).to_have_attribute("step", "1")
    await expect(cups).to_have_attribute("required", "")
    await expect(cups).to_have_accessible_description("How many cups")
    oat_milk = form.get_by_role("checkbox", name="Oat Milk")
    await expect(oat_milk).not_to_be_checked()  # its default
    send = form.get_by_role("button", name="Send answer")

    await press(send, touch)  # nothing chosen yet: the browser says what is missing
    await expect(form).to_be_visible()
    assert await form.evaluate("(f) => f.checkValidity()") is False
    assert app.sent_of("agent_user_input") == []

    await press(size.get_by_role("radio", name="large"), touch)
    await cups.scroll_into_view_if_needed()
    assert await why_not_clickable(cups) == []
    await cups.fill("2")
    await press(oat_milk, touch)
    await expect(oat_milk).to_be_checked()
    await press(send, touch)
    await app.wait_idle()

    chosen = '{"size":"large","cups":2,"oat_milk":true}'
    assert sent_answers(app) == [{"type": "agent_user_input", "content": chosen}]
    await expect(app.loc(".tool-card .tool-outcome pre")).to_have_text(
        f"accept {chosen}"
    )
    await expect(app.loc(".question-answer")).to_have_text(f"You answered: {chosen}")
    await expect(app.banner).to_be_hidden()
    await expect(app.answers()).to_have_text("Ordered.")
    assert tool_results(llm, 2) == [f"accept {chosen}"]


@pytest.mark.parametrize(
    ("viewport", "touch", "button", "action"),
    [(DESKTOP, False, "Decline", "decline"), (PHONE, True, "Dismiss", "cancel")],
    ids=["decline-desktop", "dismiss-phone"],
)
async def test_the_form_is_declined_or_dismissed(
    start_server: StartServer,
    open_app: OpenApp,
    tmp_path: Path,
    viewport: dict[str, int],
    touch: bool,
    button: str,
    action: str,
) -> None:
    """Decline and Dismiss sit beside Send answer; either sends its action
    with no content, and the server's result is that action."""
    llm = ScriptedLLM(*ordering())
    config = cafe_config(tmp_path)
    harness = await start_server(llm, test_registry(), mcp_config=config)
    app = await open_app(harness, viewport=viewport, touch=touch)
    form = await order_asked(app)
    buttons = form.get_by_role("button")
    await expect(buttons).to_have_text(["Send answer", "Decline", "Dismiss"])
    for index in range(3):
        await buttons.nth(index).scroll_into_view_if_needed()
        assert await why_not_clickable(buttons.nth(index)) == []

    await press(form.get_by_role("button", name=button), touch)
    await app.wait_idle()

    frame = {"type": "agent_user_input", "content": "", "action": action}
    assert sent_answers(app) == [frame]
    await expect(app.loc(".tool-card .tool-outcome pre")).to_have_text(action)
    shown = "Declined" if action == "decline" else "Dismissed"
    await expect(app.loc(".question-answer")).to_have_text(f"You answered: {shown}")
    assert tool_results(llm, 2) == [action]


@SIZES
async def test_a_page_to_open_is_a_link_then_done(
    start_server: StartServer,
    open_app: OpenApp,
    tmp_path: Path,
    viewport: dict[str, int],
    touch: bool,
) -> None:
    """URL mode: the page is a link that opens in a new tab and shows its
    host; Done accepts with no content, and the server hears `accept`."""
    llm = ScriptedLLM(*ordering("cafe__sign_in"))
    config = cafe_config(tmp_path, protocol="legacy")
    harness = await start_server(llm, test_registry(), mcp_config=config)
    app = await open_app(harness, viewport=viewport, touch=touch)
    await app.type_and_send("sign me in")
    await expect(app.loc("#question-title")).to_have_text(
        "The MCP server 'cafe' asks: Sign in to the cafe to see your loyalty points."
    )
    link = app.banner.get_by_role("link", name="Open cafe.example")
    await expect(link).to_have_attribute("href", "https://cafe.example/sign-in")
    await expect(link).to_have_attribute("target", "_blank")
    await expect(link).to_have_attribute("rel", "noopener noreferrer")
    await expect(link).to_have_text("Open cafe.example ↗")
    await expect(app.loc(".answer-url")).to_have_text("https://cafe.example/sign-in")
    actions = app.banner.get_by_role("button")
    await expect(actions).to_have_text(
        ["Show the question", "Done", "Decline", "Dismiss"]
    )
    await link.scroll_into_view_if_needed()
    assert await why_not_clickable(link) == []

    await press(app.banner.get_by_role("button", name="Done"), touch)
    await app.wait_idle()
    frame = {"type": "agent_user_input", "content": ""}
    assert sent_answers(app) == [frame]
    await expect(app.loc(".tool-card .tool-outcome pre")).to_have_text("accept")
    await expect(app.loc(".question-answer")).to_have_text("You answered: Done")
    assert tool_results(llm, 2) == ["accept"]


SHAPE = """async (frame) => {
  const where = new URL('render/answer_form.js', document.querySelector(
    'script[type=module][src$="/js/app.js"]').src);
  const { questionForm } = await import(where);
  const replies = [];
  const { form, title, hint } = questionForm(frame, (...reply) => replies.push(reply));
  document.body.append(form);
  form.querySelector('form')?.requestSubmit() ?? form.requestSubmit?.();
  form.remove();
  return {
    title,
    hint,
    links: form.querySelectorAll('a').length,
    buttons: [...form.querySelectorAll('button')].map((b) => b.textContent),
    text: form.querySelector('.answer-url')?.textContent ?? null,
    replies,
  };
}"""


async def test_what_other_questions_of_a_server_offer(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A page that is not http(s) is text, not a link, with only Decline and
    Dismiss; a question with no form keeps the message box and adds them; a
    form with no fields is a confirmation whose Send answer sends `{}`."""
    harness = await start_server(ScriptedLLM(), test_registry())
    app = await open_app(harness, viewport=DESKTOP)
    asker = {"question": "Open it", "asked_by": "the MCP server x"}
    shown = await app.page.evaluate(
        SHAPE, {**asker, "url": "javascript:alert(1)", "answer_schema": None}
    )
    assert shown == {
        "title": "The MCP server x asks: Open it",
        "hint": "Decline or dismiss it.",
        "links": 0,
        "buttons": ["Decline", "Dismiss"],
        "text": "It names a page that cannot be opened from here: javascript:alert(1)",
        "replies": [],
    }
    free = await app.page.evaluate(SHAPE, {**asker, "url": None, "answer_schema": None})
    assert (free["hint"], free["buttons"], free["replies"]) == (
        "Type it in the message box, or decline.",
        ["Decline", "Dismiss"],
        [],
    )
    confirm = {"type": "object", "properties": {}}
    empty = await app.page.evaluate(
        SHAPE, {**asker, "url": None, "answer_schema": confirm}
    )
    assert (empty["buttons"], empty["replies"]) == (
        ["Send answer", "Decline", "Dismiss"],
        [["{}", None]],
    )
