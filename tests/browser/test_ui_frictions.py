"""What tripped a new user in the page (issue #29), each held by a test that
failed before its fix."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.browser.ui import OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, calls, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

CAPPED = "Capped at 5: the server allows no more."


async def test_max_steps_says_what_it_will_do_while_typing(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Max steps: the cap is said while the number is typed (not only after
    leaving the field), 0 is said to become 1, a fitting number clears the
    hint, and one step is "1 step"."""
    harness = await start_server(ScriptedLLM(), test_registry(), agent_max_steps_cap=5)
    app = await open_app(harness)
    steps = app.page.get_by_label("Max steps")
    hint = app.loc("#composer-hint")
    unit = app.loc("#max-steps-chip .chip-text")
    await steps.fill("")
    await steps.press_sequentially("9")
    await expect(hint).to_have_text(CAPPED)  # still in the field
    await expect(steps).to_be_focused()
    await steps.fill("3")
    await expect(hint).not_to_have_text(CAPPED)  # fits again: cleared
    await expect(hint).to_have_attribute("data-alert", "false")

    await steps.fill("0")
    await expect(hint).to_have_text("At least 1 step: a run needs one.")
    await steps.press("Tab")
    await expect(steps).to_have_value("1")
    await expect(hint).to_have_text("Set to 1: a run needs at least one step.")
    await expect(unit).to_have_text("step")
    await steps.fill("2")
    await steps.press("Tab")
    await expect(unit).to_have_text("steps")
    await expect(hint).to_have_attribute("data-alert", "false")


ONE_LINE = """(element) => {
  const style = getComputedStyle(element);
  const line = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.4;
  return element.getBoundingClientRect().height - parseFloat(style.paddingTop)
    - parseFloat(style.paddingBottom) < line * 1.5;
}"""


async def test_the_question_banner_keeps_its_words_whole_on_a_phone(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """On a phone the banner's step and "Show the question" each stay on one
    line (they wrapped a word a line beside the title)."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(("request_input", {"question": "Which unit should I use?"})),
    )
    harness = await start_server(llm, test_registry())
    app = await open_app(harness, viewport={"width": 390, "height": 844}, touch=True)
    await app.type_and_send("convert 10 miles")
    await expect(app.banner).to_be_visible()
    for part in ("#question-step", "#question-show"):
        assert await app.loc(part).evaluate(ONE_LINE), f"{part} wraps"
    await app.stop_button.click()
    await app.wait_idle()
