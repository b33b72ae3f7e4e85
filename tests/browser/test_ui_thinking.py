"""A reasoning model's thinking in the page: folded under the phase it belongs
to (closed, opened by a click or the keyboard), shown as text, never in the
answer, and the same after a reload."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.async_api import Locator, expect

from backend.llm.base import Completion
from tests.browser.geometry import why_not_clickable
from tests.browser.test_ui_accessibility import AXE, SERIOUS
from tests.browser.ui import DESKTOP, PHONE, App, OpenApp
from tests.conftest import StartServer
from tests.fake_openai import Reply, running_fake_openai
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

REASON_THINKING = (
    "The user asks for 2+3.\n"
    'I must not guess: <img src="x" onerror="window.pwned=1"> the add tool is exact.'
)
ACT_THINKING = "Call add with the expression 2+3."
OBSERVE_THINKING = "The tool said 5.\n\n**That** settles it."
CHAT_THINKING = "A greeting: answer in kind, <em>briefly</em>."


def gist(text: str) -> str:
    """What the closed summary says: 'Thinking' and the number of words."""
    return f"Thinking · {len(text.split())} words"


async def violations(app: App) -> list[str]:
    """Serious and critical axe violations in the last assistant turn."""
    if not await app.page.evaluate("typeof window.axe !== 'undefined'"):
        await app.page.add_script_tag(path=str(AXE))
    found: list[dict[str, Any]] = await app.page.evaluate(
        "async () => (await axe.run([...document.querySelectorAll('.turn-assistant')].at(-1),"
        " {resultTypes: ['violations']})).violations"
    )
    return [f"{v['id']}: {v['help']}" for v in found if v["impact"] in SERIOUS]


async def summary_text(thinking: Locator) -> str:
    return "".join(await thinking.locator("summary").all_text_contents()).strip()


async def expect_closed(thinking: Locator, text: str) -> None:
    """Folded: the summary shows, the text does not."""
    await expect(thinking).not_to_have_attribute("open", "")
    await expect(thinking.locator("summary")).to_be_visible()
    await expect(thinking.locator(".thinking-text")).to_be_hidden()
    assert await summary_text(thinking) == gist(text)


async def expect_on_screen(app: App, control: Locator) -> None:
    """At desktop and phone sizes, scrolled to, it is seen and clickable."""
    for size in (DESKTOP, PHONE):
        await app.page.set_viewport_size(size)  # type: ignore[arg-type]
        await control.scroll_into_view_if_needed()
        assert await why_not_clickable(control) == [], size


async def expect_agent_thinking(app: App) -> None:
    """The three thinkings, folded, each in its phase of step 1."""
    step = app.loc(".step[data-step='1']")
    phases = [
        str(await block.get_attribute("data-phase"))
        for block in await step.locator(".phase").all()
    ]
    assert phases == ["reason", "act", "observe"]
    await expect(step.locator(".thinking")).to_have_count(3)
    for phase, text in (
        ("reason", REASON_THINKING),
        ("act", ACT_THINKING),
        ("observe", OBSERVE_THINKING),
    ):
        await expect_closed(step.locator(f".phase-{phase} .thinking"), text)
    assert await app.texts(".step[data-step='1'] .phase-reason .md") == ["I add them."]
    await expect(app.answers()).to_have_text("2 + 3 = 5")
    await expect(app.loc(".answer .thinking, .trace ~ .thinking")).to_have_count(0)


async def test_agent_thinking_is_folded_under_each_phase(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Over the openai provider, each phase's thinking is folded in its block, opens, survives a reload."""
    async with running_fake_openai() as fake:
        fake.script(
            Reply(
                content=f"<think>{REASON_THINKING}</think>\n"
                + reason("Add 2 and 3.", prose="I add them.", tools=["add"])
            ),
            Reply(tool_calls=[("add", {"expression": "2+3"})], reasoning=ACT_THINKING),
            Reply(
                content=observe(
                    "It is 5.", prose="Done.", should_continue=False, final="2 + 3 = 5"
                ),
                reasoning=OBSERVE_THINKING,
                reasoning_field="reasoning",
            ),
        )
        harness = await start_server(
            None, test_registry(), llm_base_url=fake.base_url, llm_model="fake-r1"
        )
        app = await open_app(harness)
        await app.use_settings(agent=True, max_steps=3, tools=["add"])
        await app.type_and_send("What is 2+3?")
        await app.wait_idle()
    await app.loc(".trace-summary").click()  # a finished run's steps are folded
    await expect_agent_thinking(app)

    reasoning = app.loc(".phase-reason .thinking")
    await expect_on_screen(app, reasoning.locator("summary"))
    await reasoning.locator("summary").click()
    await expect(reasoning).to_have_attribute("open", "")
    text = reasoning.locator(".thinking-text")
    await expect(text).to_be_visible()
    assert await text.text_content() == REASON_THINKING  # as text, not HTML
    await expect(reasoning.locator("img")).to_have_count(0)
    assert await app.page.evaluate("window.pwned") is None

    acting = app.loc(".phase-act .thinking")
    await acting.locator("summary").focus()
    await app.page.keyboard.press("Enter")
    await expect(acting.locator(".thinking-text")).to_have_text(ACT_THINKING)
    observing = app.loc(".phase-observe .thinking")
    await observing.locator("summary").focus()
    await app.page.keyboard.press(" ")
    await expect(observing.locator(".thinking-text")).to_be_visible()
    # Markdown in thinking stays as the model wrote it
    assert await observing.locator(".thinking-text").text_content() == OBSERVE_THINKING
    await expect(observing.locator("strong")).to_have_count(0)

    await app.page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]
    await app.page.reload()
    await app.expect_connected()
    await expect(app.loc(".turn-assistant")).to_have_count(1)
    await app.loc(".trace-summary").click()
    await expect_agent_thinking(app)


async def test_tool_mode_thinking_goes_with_its_round(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """In tool mode a call's thinking that led to a tool call sits in its round; the answer's above it."""
    llm = ScriptedLLM(
        calls(("add", {"expression": "2+3"})).model_copy(
            update={"reasoning": ACT_THINKING}
        ),
        Completion(content="It is 5.", reasoning=OBSERVE_THINKING),
    )
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=["add"])
    await app.type_and_send("What is 2+3?")
    await app.wait_idle()

    turn = app.assistant()
    await expect(turn.locator(".thinking")).to_have_count(2)
    await expect(
        turn.locator(".step[data-step='1'] .phase-act .thinking")
    ).to_have_count(1)
    above = turn.locator(".turn-body > .thinking")
    await expect_closed(above, OBSERVE_THINKING)
    assert await above.evaluate(
        "(el) => el.nextElementSibling.classList.contains('answer')"
    )
    await expect(app.answers()).to_have_text("It is 5.")


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_plain_chat_thinking_sits_above_the_answer(
    start_server: StartServer, open_app: OpenApp, scheme: str
) -> None:
    """A plain chat's thinking is folded above the answer, opens by keyboard, passes axe, light or dark."""
    llm = ScriptedLLM(Completion(content="Hello there!", reasoning=CHAT_THINKING))
    harness = await start_server(llm)
    app = await open_app(harness, color_scheme=scheme, bypass_csp=True)
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("hi")
    await app.wait_idle()

    thinking = app.assistant().locator(".thinking")
    await expect(thinking).to_have_count(1)
    await expect(thinking).to_have_attribute("data-phase", "chat")
    await expect_closed(thinking, CHAT_THINKING)
    assert await thinking.evaluate(
        "(el) => el.nextElementSibling.classList.contains('answer')"
    )
    await expect(app.answers()).to_have_text("Hello there!")
    await expect_on_screen(app, thinking.locator("summary"))
    assert await violations(app) == [], "closed"

    await thinking.locator("summary").focus()
    await app.page.keyboard.press("Enter")
    await expect(thinking.locator(".thinking-text")).to_be_visible()
    assert await thinking.locator(".thinking-text").text_content() == CHAT_THINKING
    await expect(thinking.locator("em")).to_have_count(0)
    assert await violations(app) == [], "open"
    await app.page.keyboard.press("Enter")
    await expect(thinking.locator(".thinking-text")).to_be_hidden()

    await app.page.reload()
    await app.expect_connected()
    await expect_closed(app.assistant().locator(".thinking"), CHAT_THINKING)
    await expect(app.answers()).to_have_text("Hello there!")


async def test_plan_thinking_is_folded_in_the_plan(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """With plan_execute, the planning call's thinking is folded in the plan's block, above its steps."""
    plan = json.dumps({"steps": ["Add 1 and 1"], "final_answer": ""})
    llm = ScriptedLLM(
        Completion(
            content=f"One sum.\n\n```json\n{plan}\n```", reasoning=REASON_THINKING
        ),
        calls(("add", {"expression": "1+1"})),
        observe("2", should_continue=False, final="It is 2."),
    )
    harness = await start_server(
        llm, test_registry(), agent_loop_strategy="plan_execute"
    )
    app = await open_app(harness)
    await app.use_settings(agent=True, max_steps=3)
    await app.type_and_send("Add 1 and 1")
    await app.wait_idle()

    await app.loc(".trace-summary").click()
    block = app.loc(".plan")
    await expect(block).to_have_count(1)
    parts = [
        await child.get_attribute("class")
        for child in await block.locator(":scope > *").all()
    ]
    assert parts == ["step-head", "thinking", "plan-note", "plan-steps"]
    await expect_closed(block.locator(".thinking"), REASON_THINKING)
    assert await app.texts(".plan .plan-steps li") == ["Add 1 and 1"]
    await expect(app.loc(".step .thinking")).to_have_count(0)
