"""Messages sent while a run works, in the browser: the message box stays
usable, the menu next to Send picks steer, queue or interrupt, held
messages show above the box with Cancel, a steer shows in its step, and a
reload shows the same."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Locator, expect

from backend.llm.base import LLMRequest
from tests.browser.geometry import SIZES, click_at_both_sizes, why_not_clickable
from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, SlowTool, calls, observe, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

STEER_NOTE = "Will be told to the agent at its next step"


def slow_step(*after: Any) -> list[Any]:
    """A react step whose `slow` tool waits until released, then `after`."""
    return [reason("wait", tools=["slow"]), calls(("slow", {"label": "a"})), *after]


def said_by_user(request: LLMRequest, text: str) -> int:
    """How many of the request's user messages are `text`."""
    return sum(1 for m in request.messages if m.role == "user" and m.content == text)


async def working(
    start_server: StartServer, open_app: OpenApp, *script: Any
) -> tuple[App, ScriptedLLM, SlowTool]:
    """The page of a server whose agent run waits in its `slow` tool."""
    slow, llm = SlowTool(), ScriptedLLM(*script)
    harness = await start_server(llm, test_registry(slow))
    app = await open_app(harness)
    await app.use_settings(agent=True)
    await app.type_and_send("first")
    await slow.started.wait()
    await expect(app.stop_button).to_be_visible()
    return app, llm, slow


def held(app: App) -> Locator:
    return app.loc("#held .held-item")


async def test_a_message_sent_during_an_agent_run_steers_it(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Steer is the default in an agent run: the message shows as pending,
    then as a note in the step it was told at; the model's next request has
    it exactly once."""
    app, llm, slow = await working(
        start_server,
        open_app,
        *slow_step(observe("Metric it is.")),
        reason("done", finish=True, final="In km."),
    )
    menu = app.page.get_by_label("While the run works")
    await expect(menu).to_have_value("steer")
    await app.type_and_send("use metric units")
    await expect(held(app).locator(".held-text")).to_have_text("use metric units")
    await expect(held(app).locator(".held-mode")).to_have_text(STEER_NOTE)
    assert app.sent_of("chat")[-1]["when_busy"] == "steer"

    slow.release.set()
    note = app.loc(".step[data-step='1'] .step-steer")
    await expect(note).to_have_text("You: use metric units")
    await expect(app.loc("#held")).to_be_hidden()
    await app.wait_idle()
    await expect(app.loc(".turn-user")).to_have_count(1)
    assert [said_by_user(r, "use metric units") for r in llm.requests] == [0, 0, 1, 1]


async def test_queued_messages_run_after_and_one_can_be_cancelled(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Queue for after: both messages wait above the box; the one cancelled
    goes and the model never sees it; the other starts the next run."""
    app, llm, slow = await working(
        start_server,
        open_app,
        *slow_step(observe(should_continue=False, final="First done.")),
        reason("done", finish=True, final="Second answer."),
    )
    await app.page.get_by_label("While the run works").select_option("queue")
    await expect(app.loc("#send-label")).to_have_text("Queue")
    await app.type_and_send("second")
    await expect(held(app)).to_have_count(1)
    await app.type_and_send("never mind this")
    await expect(held(app).locator(".held-text")).to_have_text(
        ["second", "never mind this"]
    )
    await expect(held(app).locator(".held-mode")).to_have_text(
        ["Queued — runs next", "Queued"]
    )
    cancel = app.page.get_by_role("button", name="Cancel “never mind this”")
    await click_at_both_sizes(app.page, cancel)
    await expect(held(app).locator(".held-text")).to_have_text(["second"])
    cancelled = app.sent_of("cancel_input")
    assert len(cancelled) == 1

    slow.release.set()
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(["first", "second"])
    await expect(app.answers().last).to_have_text("Second answer.")
    await app.wait_idle()
    await expect(app.loc("#held")).to_be_hidden()
    assert [m["when_busy"] for m in app.sent_of("chat")[1:]] == ["queue", "queue"]
    assert all(said_by_user(r, "never mind this") == 0 for r in llm.requests)
    assert [said_by_user(r, "second") for r in llm.requests] == [0, 0, 0, 1]


async def test_stop_and_send_now_interrupts_the_run(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Stop and send now: the run ends stopped after its step, then the new
    message runs."""
    app, llm, slow = await working(
        start_server,
        open_app,
        *slow_step(),
        reason("done", finish=True, final="Done now."),
    )
    menu = app.page.get_by_label("While the run works")
    for size in SIZES[::-1]:  # the phone's last: the test goes on at that size
        await app.page.set_viewport_size(size)  # type: ignore[arg-type]
        assert await why_not_clickable(menu) == [], size
    await menu.select_option("interrupt")
    await app.composer.fill("now instead")
    await expect(app.send_button).to_have_text("Send now")
    await click_at_both_sizes(app.page, app.send_button)
    await expect(held(app).locator(".held-mode")).to_have_text(
        "Stopping the run — runs next"
    )

    slow.release.set()
    await expect(app.assistant(0)).to_have_attribute("data-reason", "stopped")
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(
        ["first", "now instead"]
    )
    await expect(app.answers().last).to_have_text("Done now.")
    await app.wait_idle()
    assert app.sent_of("chat")[-1]["when_busy"] == "interrupt"
    assert [said_by_user(r, "now instead") for r in llm.requests] == [0, 0, 1]


async def test_a_reload_shows_held_messages_and_steers_the_same(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """After a reload the held messages are still pending; once used, the
    steer shows in its step and the queued one as its own run, again after
    another reload."""
    app, _, slow = await working(
        start_server,
        open_app,
        *slow_step(observe("Brief it is.", should_continue=False, final="Done.")),
        reason("done", finish=True, final="Then done."),
    )
    await app.type_and_send("be brief")
    await app.page.get_by_label("While the run works").select_option("queue")
    await app.type_and_send("then this")
    await expect(held(app)).to_have_count(2)

    await app.page.reload()
    await app.expect_connected()
    await expect(held(app).locator(".held-text")).to_have_text(
        ["be brief", "then this"]
    )
    await expect(held(app).locator(".held-mode")).to_have_text(
        [STEER_NOTE, "Queued — runs next"]
    )

    slow.release.set()
    await expect(app.loc(".turn-user .bubble-text")).to_have_text(
        ["first", "then this"]
    )
    await app.wait_idle()
    for _ in range(2):
        note = app.loc(".step[data-step='1'] .step-steer")
        await expect(note).to_have_text("You: be brief")
        await expect(app.loc("#held")).to_be_hidden()
        await expect(app.answers()).to_have_text(["Done.", "Then done."])
        await app.page.reload()
        await app.expect_connected()
