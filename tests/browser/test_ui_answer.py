"""One composer: while the agent waits for an answer, the message box is the
answer box (relabelled, Enter sends the answer, a draft set aside and put
back), the question shows once (in the run), on a desktop and on a phone."""

from __future__ import annotations

import asyncio

import pytest
from playwright.async_api import expect

from backend.llm.base import Completion, LLMRequest
from tests.browser.ui import PHONE, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, Step, calls, observe, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")


def ask_steps() -> list[Step]:
    """Ask "Which unit?", then finish with the answer."""
    return [
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("km it is"),
        reason("done", finish=True, final="16.09 km"),
    ]


def asks_then_answers() -> ScriptedLLM:
    return ScriptedLLM(*ask_steps())


async def test_the_message_box_takes_the_answer_and_gives_back_the_draft(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """While a question waits, the composer is the answer box and Enter answers it."""
    harness = await start_server(asks_then_answers(), test_registry())
    app = await open_app(harness)
    await app.type_and_send("convert 10 miles")
    answer_box = app.page.get_by_role("textbox", name="Your answer")
    await expect(answer_box).to_be_focused()
    await expect(answer_box).to_have_attribute("placeholder", "Type your answer…")
    await expect(app.loc("#composer")).to_have_attribute("data-mode", "answer")
    await expect(app.page.get_by_role("button", name="Send answer")).to_be_disabled()
    await expect(app.loc(".question-card-text")).to_have_text("Which unit?")
    await expect(app.page.get_by_text("Which unit?")).to_have_count(1)
    await expect(app.loc("#question-hint")).to_contain_text("press Esc to end")

    await app.page.get_by_role("button", name="Show the question").click()
    await expect(app.loc(".question-card")).to_have_class("question-card flash")
    await expect(answer_box).to_be_focused()

    await app.page.keyboard.type("km")
    await app.page.keyboard.press("Enter")
    await app.wait_idle()
    await expect(app.composer).to_have_attribute("placeholder", "Message loopwire…")
    await expect(app.loc("#composer")).to_have_attribute("data-mode", "message")
    await expect(app.loc(".question-answer")).to_have_text("You answered: km")
    assert [f["content"] for f in app.sent_of("agent_user_input")] == ["km"]
    assert len(app.sent_of("chat")) == 1  # the answer was not a new message


class GatedLLM(ScriptedLLM):
    """Its first reply waits for `gate`: the run is busy until the test says."""

    def __init__(self, *steps: Step) -> None:
        super().__init__(*steps)
        self.gate = asyncio.Event()

    async def complete(self, request: LLMRequest) -> Completion:
        if not self.requests:
            await self.gate.wait()
        return await super().complete(request)


async def test_a_draft_typed_before_the_question_is_kept_for_later(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A draft typed during a run is set aside for the answer, then restored."""
    llm = GatedLLM(*ask_steps())
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await app.type_and_send("convert 10 miles")
    await expect(app.stop_button).to_be_visible()
    await app.composer.fill("draft for later")
    await expect(app.send_button).to_have_text(
        "Steer"
    )  # a run is active: sending steers it

    llm.gate.set()
    answer_box = app.page.get_by_role("textbox", name="Your answer")
    await expect(answer_box).to_have_value("")
    await answer_box.fill("km")
    await answer_box.press("Enter")
    await app.wait_idle()
    await expect(app.composer).to_have_value("draft for later")
    assert [f["content"] for f in app.sent_of("agent_user_input")] == ["km"]


async def test_on_a_phone_the_answer_goes_with_the_button(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """On a phone the answer is sent by tapping Send answer, and the run finishes."""
    harness = await start_server(asks_then_answers(), test_registry())
    app = await open_app(harness, viewport=PHONE, touch=True)
    await app.type_and_send("convert 10 miles")
    answer_box = app.page.get_by_role("textbox", name="Your answer")
    await expect(answer_box).to_be_visible()
    await expect(app.loc("#question-hint")).to_contain_text("tap Stop to end")
    await answer_box.fill("km")
    await app.page.get_by_role("button", name="Send answer").tap()
    await app.wait_idle()
    await expect(app.answers()).to_have_text("16.09 km")
    assert [f["content"] for f in app.sent_of("agent_user_input")] == ["km"]
