"""The toolbar under the message box: agent mode, strategy, max steps, the
tools popover and the model; what it sets is what the next `chat` asks for,
and it outlives a reload."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.browser.ui import PHONE, OpenApp
from tests.conftest import StartServer
from tests.fakes import Hang, ScriptedLLM, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_the_toolbar_choices_are_what_the_next_message_asks_for(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Toolbar choices shape the next chat and outlive a reload; defaults go unsent."""
    llm = ScriptedLLM("Done with it.")
    harness = await start_server(llm, test_registry(), llm_models="other-model")
    app = await open_app(harness)
    page = app.page

    strategy = page.get_by_label("Strategy")
    model = page.get_by_role("combobox", name="Model")
    await expect(strategy).to_have_value("react")  # the server's default first
    await expect(model).to_have_value("scripted-model")
    assert await app.texts("#strategy option") == [
        "Reason · act · observe",
        "Tools until done",
        "Plan, then execute",
        "No tools",
    ]
    assert await app.texts("#model-select option") == ["scripted-model", "other-model"]
    tools = app.loc("#tools-button")
    await expect(page.get_by_role("button", name="Tools 3: 3 of 3 on")).to_be_visible()
    await expect(tools.locator("#tools-count")).to_have_text("3")

    await strategy.select_option("act")
    await model.select_option("other-model")
    await expect(app.loc("#model-name")).to_have_text("other-model")  # the header
    await app.use_settings(max_steps=3, tools=["add", "slow"], read_only=True)
    # read-only leaves out `slow` (it writes), `fail` is off
    await expect(
        page.get_by_role("button", name="Tools 1/3: 1 of 3 on, read-only")
    ).to_be_visible()
    await expect(tools.locator("#tools-count")).to_have_text("1/3")

    await app.type_and_send("go")
    await app.wait_idle()
    await expect(app.answers()).to_have_text("Done with it.")
    chat = app.sent_of("chat")[-1]
    assert {key: chat[key] for key in sorted(chat) if key != "content"} == {
        "agent_max_steps": 3,
        "agent_mode": True,
        "loop_strategy": "act",
        "model": "other-model",
        "read_only": True,
        "selected_tools": ["add", "slow"],
        "type": "chat",
    }
    [request] = llm.requests
    assert request.model == "other-model"
    assert "add" in [spec.name for spec in request.tools]
    assert not {"fail", "slow"} & {spec.name for spec in request.tools}

    # the choices outlive a reload; the defaults are not sent
    await page.reload()
    await app.expect_connected()
    await expect(strategy).to_have_value("act")
    await expect(model).to_have_value("other-model")
    await expect(page.get_by_label("Max steps")).to_have_value("3")
    await strategy.select_option("react")
    await model.select_option("scripted-model")
    llm.add(reason("done", finish=True, final="Again."))
    await app.type_and_send("again")
    await app.wait_idle()
    chat = app.sent_of("chat")[-1]
    assert "loop_strategy" not in chat and "model" not in chat
    assert llm.requests[-1].model is None


async def test_agent_off_hides_its_chips_and_the_popover_says_what_happens(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Agent mode off hides strategy and steps; the tools popover explains the mode."""
    harness = await start_server(ScriptedLLM(), test_registry())
    app = await open_app(harness)
    strategy = app.page.get_by_label("Strategy")
    steps = app.page.get_by_label("Max steps")
    await expect(strategy).to_be_visible()
    await expect(steps).to_be_visible()
    await expect(app.loc("#model-select-chip")).to_be_hidden()  # one model only

    await app.use_settings(agent=False)
    await expect(strategy).to_be_hidden()
    await expect(steps).to_be_hidden()
    await app.open_tools()
    note = app.loc("#mode-note")
    await expect(note).to_have_text(
        "Chat with tools: the model may call the selected tools, then answers."
    )
    await app.page.get_by_role("button", name="Use none of the tools").click()
    await expect(note).to_have_text("Plain chat: one streamed reply, no tools.")
    await expect(app.loc("#tools-count")).to_have_text("0/3")
    names = await app.texts(".tool-option-name")
    assert names == ["add", "fail", "slow"]
    assert await app.texts(".tool-option[data-tool=slow] .badge") == ["writes"]
    await app.page.keyboard.press("Escape")
    await expect(app.loc("#tools-popover")).to_be_hidden()
    await expect(app.loc("#tools-button")).to_be_focused()


async def test_esc_closes_the_popover_before_it_stops_a_run(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """The first Esc closes the tools popover; only a second Esc stops the run."""
    hang = Hang()
    harness = await start_server(ScriptedLLM(hang), test_registry())
    app = await open_app(harness)
    await app.type_and_send("wait for it")
    await expect(app.stop_button).to_be_visible()
    await app.open_tools()
    await app.page.keyboard.press("Escape")
    await expect(app.loc("#tools-popover")).to_be_hidden()
    await expect(app.stop_button).to_have_text("Stop")
    assert app.sent_of("agent_control") == []

    await app.page.keyboard.press("Escape")
    await app.wait_idle()
    assert [frame["action"] for frame in app.sent_of("agent_control")] == ["stop"]
    assert hang.cancelled.is_set()


async def test_on_a_phone_the_connection_is_a_word_in_the_header(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """On a phone the connection is one header word, and the key chips fit on screen."""
    harness = await start_server(ScriptedLLM(), test_registry())
    phone = await open_app(harness, viewport=PHONE)
    await expect(phone.loc("#connection-word")).to_have_text("Online")
    await expect(phone.loc("#connection-word")).to_be_visible()
    await expect(phone.loc("#connection-text")).to_be_hidden()
    # the chips that matter most fit beside each other on the screen
    for name in ("Agent mode", "Max steps"):
        await expect(phone.page.get_by_label(name)).to_be_in_viewport()
    await expect(phone.loc("#tools-button")).to_be_in_viewport()

    desktop = await open_app(harness)
    await expect(desktop.loc("#connection-text")).to_have_text("Connected")
    await expect(desktop.loc("#connection-word")).to_be_hidden()
