"""Agent mode in the browser: live phases, busy indicator, Stop, max steps,
and the pause-and-answer banner."""

from __future__ import annotations

import json

import pytest
from playwright.async_api import expect

from backend.llm.base import Completion
from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import (
    Hang,
    ScriptedLLM,
    SlowTool,
    calls,
    observe,
    reason,
    stops_taken,
    test_registry,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def phases(app: App, step: int) -> list[str]:
    return [
        str(await block.get_attribute("data-phase"))
        for block in await app.loc(f".step[data-step='{step}'] .phase").all()
    ]


async def test_agent_run_shows_steps_phases_and_tool_cards_in_order(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A two-step run shows its phases and tool cards in order, folded once done."""
    llm = ScriptedLLM(
        reason("Add, then check.", prose="First I add the numbers."),
        calls(("add", {"expression": "2+3"}), ("fail", {"reason": "it broke"})),
        observe("5, and a failure.", prose="The sum is 5; the check failed."),
        reason("Add again.", prose="Let me add once more."),
        calls(("add", {"expression": "5+1"})),
        observe(
            "6", prose="That is 6.", should_continue=False, final="The answer is **6**."
        ),
    )
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await app.use_settings(max_steps=4, tools=["add", "fail"])

    await app.type_and_send("What is 2+3+1?")
    await app.wait_idle()

    turn = app.assistant()
    assert await app.texts(".step .step-badge") == ["Step 1 / 4", "Step 2 / 4"]
    assert await phases(app, 1) == ["reason", "act", "observe"]
    assert await phases(app, 2) == ["reason", "act", "observe"]
    assert await app.texts(".step[data-step='1'] .phase-reason .md") == [
        "First I add the numbers."
    ]
    assert await app.texts(".step[data-step='1'] .phase-observe .md") == [
        "The sum is 5; the check failed."
    ]
    assert await app.texts(".tool-card .tool-name") == ["add", "fail", "add"]
    cards = app.loc(".tool-card")
    assert [await c.get_attribute("data-status") for c in await cards.all()] == [
        "done",
        "failed",
        "done",
    ]
    first, failed, _ = await cards.all()
    # short JSON stays on one line (long JSON is indented)
    assert await first.locator(".tool-block pre").first.text_content() == (
        '{"expression": "2+3"}'
    )
    assert await first.locator(".tool-outcome pre").text_content() == (
        '{"expression": "2+3", "result": 5}'
    )
    assert await failed.locator(".tool-outcome pre").text_content() == "it broke"
    assert (await first.locator(".tool-duration").text_content() or "").endswith("ms")

    # collapsed once done, the final answer prominent under it
    await expect(turn.locator(".trace")).not_to_have_attribute("open", "")
    await expect(turn.locator(".trace-stats")).to_contain_text("2 steps · 3 tool calls")
    await expect(turn.locator(".answer strong")).to_have_text("6")
    await expect(turn.locator(".run-meta")).to_contain_text("Finished · 2 steps")
    await turn.locator(".trace-summary").click()
    await expect(turn.locator(".step").first).to_be_visible()

    chat = app.sent_of("chat")[0]
    assert chat == {
        "type": "chat",
        "content": "What is 2+3+1?",
        "agent_mode": True,
        "agent_max_steps": 4,
        "selected_tools": ["add", "fail"],
        "read_only": False,
    }
    assert llm.purposes == ["reason", "act", "observe"] * 2


async def test_busy_indicator_names_the_running_phase(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """While a tool runs, the busy line names it and the step; it goes once done."""
    slow = SlowTool()
    llm = ScriptedLLM(
        reason("Wait for it."),
        calls(("slow", {"label": "x"})),
        observe(should_continue=False, final="Done waiting."),
    )
    harness = await start_server(llm, test_registry(slow))
    app = await open_app(harness)

    await app.type_and_send("wait")
    busy = app.assistant().locator(".busy")
    await expect(busy.locator(".busy-text")).to_have_text("Running slow…")
    await expect(busy.locator(".busy-step")).to_have_text("Step 1 / 10")
    await expect(app.loc(".trace")).to_have_attribute("open", "")
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "running")
    await expect(app.loc(".step")).to_have_attribute("data-state", "running")
    await expect(app.stop_button).to_be_enabled()

    slow.release.set()
    await app.wait_idle()
    await expect(busy).to_have_count(0)
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "done")
    await expect(app.answers()).to_have_text("Done waiting.")


async def test_stop_during_a_slow_llm_call(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Esc during a hung LLM call stops the run at once, and the next message works."""
    hang = Hang()
    llm = ScriptedLLM(
        reason("Think hard."), hang, reason(finish=True, final="Hi again.")
    )
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    await expect(app.stop_button).to_be_hidden()
    await expect(app.stop_button).to_be_disabled()

    await app.type_and_send("go")
    await expect(app.loc(".busy-text")).to_have_text("Choosing an action…")
    await hang.started.wait()
    await expect(app.stop_button).to_be_visible()
    await expect(app.stop_button).to_be_enabled()

    await app.page.keyboard.press("Escape")  # Esc = Stop while a run is active
    await app.wait_idle()

    assert hang.cancelled.is_set()
    turn = app.assistant()
    await expect(turn.locator(".run-notice-stop")).to_have_text(
        "Stopped by you at step 1 (immediately)."
    )
    await expect(turn.locator(".run-meta")).to_contain_text("Stopped · 1 step")
    await expect(app.stop_button).to_be_disabled()
    assert app.sent_of("agent_control") == [{"type": "agent_control", "action": "stop"}]

    # the user can continue
    await app.type_and_send("hello?")
    await app.wait_idle()
    await expect(app.answers().last).to_have_text("Hi again.")
    assert len(app.sent_of("chat")) == 2


async def test_max_steps_input_is_honoured_and_capped(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """The step input is capped by the server; a spent budget offers a Continue run."""
    llm = ScriptedLLM(
        reason(),
        Completion(content="No action needed."),
        observe("more"),
        reason(),
        Completion(content="No action needed."),
        observe("more"),
        "Partial answer.",
        reason("done", finish=True, final="All done."),
    )
    harness = await start_server(llm, test_registry(), agent_max_steps_cap=5)
    app = await open_app(harness)
    steps = app.page.get_by_label("Max steps")
    await expect(steps).to_have_attribute("max", "5")
    await expect(steps).to_have_value("5")  # the default (10) is capped too
    await app.use_settings(max_steps=99)
    await expect(steps).to_have_value("5")
    await expect(app.loc("#max-steps-note")).to_have_text(
        "Capped at 5: the server allows no more."
    )
    await app.use_settings(max_steps=2)

    await app.type_and_send("keep going")
    await app.wait_idle()

    assert await app.texts(".step .step-badge") == ["Step 1 / 2", "Step 2 / 2"]
    assert await app.texts(".phase-act .muted") == ["No tool call in this step."] * 2
    turn = app.assistant()
    await expect(turn.locator(".run-notice-warn")).to_have_text(
        "Used up the step budget (2 steps): the agent answers with what it has "
        "so far, and you can let it continue."
    )
    await expect(turn.locator(".answer")).to_have_text("Partial answer.")
    await expect(turn.locator(".run-meta")).to_contain_text(
        "Step budget used up · 2 steps"
    )
    assert app.sent_of("chat")[0]["agent_max_steps"] == 2

    # Continue: a follow-up run with 5 more steps; the button goes with it
    await turn.get_by_role("button", name="Continue (+5 steps)").click()
    await app.wait_idle()
    await expect(app.answers().last).to_have_text("All done.")
    await expect(app.loc(".turn-user .bubble-text").last).to_have_text("Continue")
    await expect(
        app.page.get_by_role("button", name="Continue (+5 steps)")
    ).to_have_count(0)
    follow_up = app.sent_of("chat")[1]
    assert (
        follow_up["content"],
        follow_up["agent_mode"],
        follow_up["agent_max_steps"],
    ) == (
        "Continue",
        True,
        5,
    )


async def test_request_input_banner_answer_continues_the_run(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """An answer typed in the question banner reaches the run, which then finishes."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        observe("km it is"),
        reason("done", finish=True, final="16.09 km"),
    )
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)
    # pretend the tab is in the background: the title blinks while it is
    await app.page.evaluate(
        """() => {
            Object.defineProperty(document, 'hidden', {value: true, configurable: true});
            document.dispatchEvent(new Event('visibilitychange'));
        }"""
    )

    await app.type_and_send("convert 10 miles")
    await expect(app.banner).to_be_visible()
    await expect(app.banner).not_to_contain_text(
        "Which unit?"
    )  # shown once: in the run
    await expect(app.banner).to_have_class("question-banner pulse")
    answer = app.page.get_by_role("textbox", name="Your answer")
    await expect(answer).to_be_focused()
    await expect(app.loc(".busy-text")).to_have_text("Waiting for your answer")
    await expect(app.page).to_have_title("❓ Your answer is needed — loopwire")
    await expect(app.loc(".question-card .question-card-text")).to_have_text(
        "Which unit?"
    )

    await app.page.keyboard.type("km")
    await app.page.keyboard.press("Enter")
    await app.wait_idle()

    await expect(app.banner).to_be_hidden()
    await expect(app.page).to_have_title("loopwire")
    await expect(app.loc(".question-answer")).to_have_text("You answered: km")
    await expect(app.answers()).to_have_text("16.09 km")
    question_id = app.sent_of("agent_user_input")[0]["question_id"]
    assert app.sent_of("agent_user_input") == [
        {"type": "agent_user_input", "content": "km", "question_id": question_id}
    ]
    session = next(iter(harness.service.sessions.values()))
    roles = [(m.role, m.content) for m in session.history]
    assert roles[-2:] == [("tool", "km"), ("assistant", "16.09 km")]


async def test_request_input_timeout_clears_the_banner(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """An unanswered question times out, hiding the banner and marking the card."""
    llm = ScriptedLLM(
        reason("ask"),
        calls(("request_input", {"question": "Which unit?"})),
        "No answer came, so I could not convert.",
    )
    harness = await start_server(llm, test_registry(), request_input_timeout_s=0.5)
    app = await open_app(harness)

    await app.type_and_send("convert 10 miles")
    await expect(app.banner).to_be_visible()
    await app.wait_idle()

    await expect(app.banner).to_be_hidden()
    await expect(app.loc("#banner-message")).to_have_text(
        "No answer came in time — the agent is finishing without it."
    )
    await expect(app.loc(".question-answer")).to_have_text(
        "No answer in time — the agent went on without one."
    )
    await expect(app.assistant().locator(".run-meta")).to_contain_text(
        "Question timed out"
    )


async def test_stop_while_a_question_waits_clears_the_banner(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Stopping while a question waits withdraws it and refocuses the composer."""

    llm = ScriptedLLM(
        reason("ask"), calls(("request_input", {"question": "Which unit?"}))
    )
    harness = await start_server(llm, test_registry())
    app = await open_app(harness)

    await app.type_and_send("convert 10 miles")
    await expect(app.page.get_by_role("textbox", name="Your answer")).to_be_focused()
    await app.page.keyboard.press("Escape")
    await app.wait_idle()

    await expect(app.banner).to_be_hidden()
    await expect(app.loc("#banner-message")).to_have_text(
        "Question withdrawn: the run was stopped."
    )
    await expect(app.loc(".question-answer")).to_have_text(
        "Withdrawn — the run ended before an answer."
    )
    await expect(app.composer).to_be_focused()


async def test_more_steps_can_be_granted_while_running(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Granting steps mid-run raises the budget by 5, up to the server cap."""
    hang = Hang()
    harness = await start_server(
        ScriptedLLM(hang), test_registry(), agent_max_steps_cap=8
    )
    app = await open_app(harness)
    await app.use_settings(max_steps=1)

    await app.type_and_send("go")
    await expect(app.loc(".step-badge")).to_have_text("Step 1 / 1")
    await hang.started.wait()
    await app.page.get_by_role("button", name="Give the agent 5 steps more").click()

    await expect(app.loc(".step-badge")).to_have_text("Step 1 / 6")
    await expect(app.loc(".busy-step")).to_have_text("Step 1 / 6")
    await expect(app.loc(".run-notice-info")).to_have_text(
        "Budget raised by 5 steps to 6."
    )
    assert app.sent_of("agent_control") == [
        {"type": "agent_control", "action": "grant_steps", "steps": 5}
    ]
    await app.page.get_by_role("button", name="Give the agent 5 steps more").click()
    await expect(app.loc(".step-badge")).to_have_text("Step 1 / 8")  # the server cap
    await expect(
        app.page.get_by_role("button", name="Give the agent 5 steps more")
    ).to_be_hidden()
    await app.stop_button.click()
    await app.wait_idle()


async def test_a_plan_shows_before_the_steps_that_carry_it_out(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """With plan_execute as the server's default strategy, the plan (and a
    revised plan) shows in the run, in order with its steps."""

    def plan(*steps: str, prose: str) -> str:
        block = json.dumps({"steps": list(steps), "final_answer": ""})
        return f"{prose}\n\n```json\n{block}\n```"

    replan = json.dumps(
        {
            "observation": "2",
            "should_continue": True,
            "final_answer": "",
            "replan": True,
        }
    )
    llm = ScriptedLLM(
        plan("Add 1 and 1", "Add 2 and 2", prose="Two sums, one at a time."),
        calls(("add", {"expression": "1+1"})),
        f"One is enough.\n```json\n{replan}\n```",
        plan("Answer with 2", prose="Just answer."),
        Completion(content="No action needed."),
        observe("done", should_continue=False, final="It is **2**."),
    )
    harness = await start_server(
        llm, test_registry(), agent_loop_strategy="plan_execute"
    )
    app = await open_app(harness)
    await app.use_settings(agent=True, max_steps=5)

    await app.type_and_send("Add things")
    await app.wait_idle()

    turn = app.assistant()
    await turn.locator(".trace-summary").click()
    items = turn.locator(".steps > li")
    kinds = [await item.get_attribute("class") for item in await items.all()]
    assert kinds == ["plan", "step", "plan", "step"]
    assert await app.texts(".plan .step-badge") == ["Plan", "New plan (2)"]
    assert await app.texts(".plan[data-revision='1'] .plan-steps li") == [
        "Add 1 and 1",
        "Add 2 and 2",
    ]
    assert await app.texts(".plan .plan-note") == [
        "Two sums, one at a time.",
        "Just answer.",
    ]
    await expect(turn.locator(".answer strong")).to_have_text("2")
    assert llm.purposes == ["plan", "act", "observe", "plan", "act", "observe"]


async def test_stop_after_this_step_lets_the_tool_finish(
    start_server: StartServer, open_app: OpenApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """“Stop after this step” lets the running tool finish, then stops the run."""
    taken = stops_taken(monkeypatch)
    slow = SlowTool()
    llm = ScriptedLLM(reason(), calls(("slow", {"label": "x"})))
    harness = await start_server(llm, test_registry(slow))
    app = await open_app(harness)
    await app.type_and_send("go")
    await slow.started.wait()
    stop_after = app.page.get_by_role("button", name="Stop after this step")
    await stop_after.click()
    await expect(stop_after).to_be_hidden()
    await expect(app.loc(".busy-step")).to_have_text("Step 1 / 10 · stopping after it")
    await taken.wait()  # the server took the control frame
    slow.release.set()
    await app.wait_idle()

    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "done")
    # stopped, not finished: the steps stay open to show where it ended
    await expect(app.loc(".trace")).to_have_attribute("open", "")
    await expect(app.assistant().locator(".run-notice-stop")).to_have_text(
        "Stopped by you at step 1 (after the current step)."
    )
    assert app.sent_of("agent_control") == [
        {"type": "agent_control", "action": "stop_after_step"}
    ]
    assert llm.purposes == ["reason", "act"]
