"""Questions as forms in the browser: a question with choices shows one
button per choice above the message box, a yes/no question a Yes and a No,
a number question a number box with its bounds; the answer is sent by a
click (or the keyboard) and the run finishes with it, on a desktop and on a
phone. A free-text question keeps the plain answer box."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from tests.browser.geometry import why_not_clickable
from tests.browser.ui import OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
UNITS = ["km", "mi", "nautical miles"]


def asking(schema: dict[str, Any], final: str) -> ScriptedLLM:
    """Ask "Which unit?" with `schema`, then finish with `final`."""
    question = {"question": "Which unit?", "answer_schema": schema}
    return ScriptedLLM(
        reason("ask"),
        calls(("request_input", question)),
        observe("answered"),
        reason("done", finish=True, final=final),
    )


def tool_results(llm: ScriptedLLM, call: int) -> list[str]:
    return [m.content for m in llm.requests[call].messages if m.role == "tool"]


@pytest.mark.parametrize(
    ("viewport", "touch"), [(DESKTOP, False), (PHONE, True)], ids=["desktop", "phone"]
)
async def test_a_choice_is_answered_with_its_button(
    start_server: StartServer,
    open_app: OpenApp,
    viewport: dict[str, int],
    touch: bool,
) -> None:
    """Each choice is a visible, unclipped button; clicking one answers, and
    the run finishes with it."""
    llm = asking({"type": "string", "enum": UNITS}, final="10 miles is 8.69 nmi")
    harness = await start_server(llm, test_registry())
    app = await open_app(harness, viewport=viewport, touch=touch)
    await app.type_and_send("convert 10 miles")

    choices = app.page.get_by_role("group", name="Which unit?")
    buttons = choices.get_by_role("button")
    await expect(buttons).to_have_text(UNITS)
    await expect(buttons.first).to_be_focused()
    await expect(app.loc("#question-hint")).to_contain_text("Pick an answer")
    for index in range(len(UNITS)):
        assert await why_not_clickable(buttons.nth(index)) == [], viewport

    await choices.get_by_role("button", name="nautical miles").click()
    await app.wait_idle()
    await expect(app.answers()).to_have_text("10 miles is 8.69 nmi")
    await expect(choices).to_have_count(0)
    await expect(app.loc(".question-answer")).to_have_text(
        "You answered: nautical miles"
    )
    assert [f["content"] for f in app.sent_of("agent_user_input")] == ["nautical miles"]
    assert tool_results(llm, 2) == ["nautical miles"]


async def test_yes_or_no_by_keyboard(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A yes/no question is a Yes and a No button, reached with Tab; Enter on
    No sends `false`."""
    llm = asking({"type": "boolean"}, final="Fine, not rounded.")
    harness = await start_server(llm, test_registry())
    app = await open_app(harness, viewport=DESKTOP)
    await app.type_and_send("convert 10 miles")
    yes = app.page.get_by_role("button", name="Yes", exact=True)
    no = app.page.get_by_role("button", name="No", exact=True)
    await expect(yes).to_be_focused()
    await app.page.keyboard.press("Tab")
    await expect(no).to_be_focused()
    await app.page.keyboard.press("Enter")
    await app.wait_idle()
    await expect(app.answers()).to_have_text("Fine, not rounded.")
    assert [f["content"] for f in app.sent_of("agent_user_input")] == ["false"]
    assert tool_results(llm, 2) == ["false"]


async def test_a_number_is_answered_in_its_box(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A bounded number has a number box with its bounds; a value outside them
    is not sent, one inside is, as JSON."""
    schema = {"type": "integer", "minimum": 1, "maximum": 10}
    llm = asking(schema, final="Rounded to 3 places.")
    harness = await start_server(llm, test_registry())
    app = await open_app(harness, viewport=PHONE, touch=True)
    await app.type_and_send("convert 10 miles")
    box = app.page.get_by_role("spinbutton", name="Which unit? (a whole number")
    await expect(box).to_have_attribute("min", "1")
    await expect(box).to_have_attribute("max", "10")
    await expect(app.loc("#question-hint")).to_contain_text(
        "Enter a whole number from 1 to 10"
    )
    await box.fill("42")
    await box.press("Enter")
    await expect(box).to_be_visible()  # refused in the page: still asking
    assert app.sent_of("agent_user_input") == []
    await box.fill("3")
    send = app.loc(".answer-send")
    assert await why_not_clickable(send) == []
    await send.tap()
    await app.wait_idle()
    await expect(app.answers()).to_have_text("Rounded to 3 places.")
    assert [f["content"] for f in app.sent_of("agent_user_input")] == ["3"]


async def test_an_object_answer_is_a_form(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """An object answer is a form of labelled fields; JSON typed in the
    message box still answers, one the server refuses is asked again with
    the reason shown, and the form then sends the object's JSON text."""
    schema = {
        "type": "object",
        "properties": {"unit": {"type": "string", "enum": ["km", "mi"]}},
    }
    llm = asking(schema, final="km, then.")
    harness = await start_server(llm, test_registry())
    app = await open_app(harness, viewport=DESKTOP)
    await app.type_and_send("convert 10 miles")
    form = app.page.get_by_role("form", name="Which unit?")
    unit = form.get_by_role("combobox", name="unit")
    await expect(unit).to_be_focused()
    await expect(app.loc("#question-hint")).to_contain_text("Fill in the form")
    answer_box = app.page.get_by_role("textbox", name="Your answer")
    await answer_box.fill('{"unit": "miles"}')
    await answer_box.press("Enter")
    await expect(
        app.page.get_by_text("field 'unit' must be one of: km, mi")
    ).to_be_visible()
    await expect(unit).to_be_focused()  # asked again
    await expect(app.loc(".question-answer")).to_have_text("Waiting for your answer…")
    await unit.select_option(label="km")
    send = form.get_by_role("button", name="Send answer")
    assert await why_not_clickable(send) == []
    await send.click()
    await app.wait_idle()
    await expect(app.answers()).to_have_text("km, then.")
    assert [f["content"] for f in app.sent_of("agent_user_input")] == [
        '{"unit": "miles"}',
        '{"unit":"km"}',
    ]
