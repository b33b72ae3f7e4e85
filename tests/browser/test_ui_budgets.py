"""Budgets in the browser: the usage line under an answer, the warning at
80 % of a bound and its "Give more", the end of a run at its bound with
Continue with more budget, a spent daily budget, and the usage dialog."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from playwright.async_api import Locator, expect

from backend.llm.base import Completion, LLMRequest
from backend.transcript import Usage
from tests.browser.geometry import (
    DESKTOP,
    PHONE,
    click_at_both_sizes,
    why_not_clickable,
)
from tests.browser.layout import layout_problems
from tests.browser.test_ui_accessibility import violations
from tests.browser.ui import APP_MODULE, App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry

pytestmark = pytest.mark.asyncio(loop_scope="session")

CALL = Usage(
    prompt_tokens=60,
    completion_tokens=20,
    total_tokens=80,
    cached_tokens=20,
    llm_calls=1,
)
"""What every scripted call uses: 80 tokens, a third of its input cached."""
PRICES = json.dumps(
    {"scripted-model": {"input": 100.0, "cached_input": 50.0, "output": 200.0}}
)
"""Per call: 40 fresh input, 20 cached and 20 output tokens = $0.009."""


def costing(reply: str | Completion) -> Completion:
    """`reply` as a completion that used `CALL`."""
    if isinstance(reply, str):
        return Completion(content=reply, usage=CALL)
    return reply.model_copy(update={"usage": CALL})


class GatedLLM(ScriptedLLM):
    """A `ScriptedLLM` whose call number `gate_at` waits for `release`."""

    def __init__(self, *steps: Any, gate_at: int) -> None:
        super().__init__(*steps)
        self.gate_at = gate_at
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(self, request: LLMRequest) -> Completion:
        if len(self.requests) + 1 == self.gate_at:
            self.waiting.set()
            await self.release.wait()
        return await super().complete(request)


async def send_with_budget(app: App, text: str, budget: dict[str, Any]) -> None:
    """Send `text` as the page sends a chat, asking for `budget` (a scripted
    client may ask for less than the server's run budget)."""
    sent = await app.page.evaluate(
        f"async ([text, budget]) => {{ const {{ controller }} = await {APP_MODULE};"
        " return controller.sendChat(text, { agent_mode: true, agent_budget: budget }); }",
        [text, budget],
    )
    assert sent is True


async def test_the_warning_offers_more_budget_and_the_grant_clears_it(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """At 80 % of a bound a warning offers Give more; its grant replaces it and the run finishes."""
    llm = GatedLLM(
        costing(reason("Add.")),
        costing(calls(("add", {"expression": "2+3"}))),
        costing(observe("5")),
        costing(reason("done", finish=True, final="It is 5.")),
        gate_at=4,
    )
    harness = await start_server(llm, test_registry(), run_budget_tokens=1000)
    app = await open_app(harness)
    await send_with_budget(app, "What is 2+3?", {"tokens": 300})
    await llm.waiting.wait()

    turn = app.assistant()
    warning = turn.locator(".budget-warning")
    await expect(warning).to_have_text(
        "80 % of the token budget used (240 tokens of 300 tokens)."
        "Give more (+300 tokens)"
    )
    give = warning.get_by_role("button", name="Give more (+300 tokens)")
    for size in (PHONE, DESKTOP):
        await app.page.set_viewport_size(size)  # type: ignore[arg-type]
        assert await layout_problems(app.page) == [], size
    await click_at_both_sizes(app.page, give)
    await expect(turn.locator(".budget-granted")).to_have_text(
        "Budget raised by 300 tokens to 600 tokens."
    )
    await expect(warning).to_have_count(0)
    assert app.sent_of("agent_control") == [
        {"type": "agent_control", "action": "grant_budget", "budget": {"tokens": 300}}
    ]

    llm.release.set()
    await app.wait_idle()
    await expect(turn.locator(".answer")).to_have_text("It is 5.")
    await expect(turn.locator(".run-meta")).to_contain_text("Finished · 2 steps")
    await expect(turn.locator(".run-usage")).to_have_text(
        "4 LLM calls · 320 tokens (33 % cached)"
    )
    assert len(llm.requests) == 4


async def test_a_plain_answer_shows_what_it_used_and_cost(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A plain chat (no agent frames) shows its usage and cost under the answer,
    from `chat_response.usage`."""
    harness = await start_server(
        ScriptedLLM(costing("Hello there.")), test_registry(), prices=PRICES
    )
    app = await open_app(harness)
    await app.use_settings(agent=False, tools=[])
    await app.type_and_send("Hi!")
    await app.wait_idle()
    turn = app.assistant()
    await expect(turn.locator(".answer")).to_have_text("Hello there.")
    await expect(turn.locator(".run-meta")).to_be_visible()
    await expect(turn.locator(".run-usage")).to_have_text(
        "1 LLM call · 80 tokens (33 % cached) · $0.0090"
    )


async def test_a_run_ends_at_its_budget_and_continues_with_more(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A run ends at its token bound (reason budget); Continue asks for it doubled and finishes."""
    llm = ScriptedLLM(
        costing(reason("Add.")),
        costing(calls(("add", {"expression": "2+3"}))),
        costing(observe("5")),
        costing("So far: 5."),
        costing(reason("done", finish=True, final="All done: 5.")),
    )
    harness = await start_server(
        llm, test_registry(), run_budget_tokens=1000, prices=PRICES
    )
    app = await open_app(harness, bypass_csp=True)  # for axe
    await send_with_budget(app, "What is 2+3?", {"tokens": 200})
    await app.wait_idle()

    turn = app.assistant()
    await expect(turn.locator(".budget-reached")).to_have_text(
        "Used up the token budget (240 tokens of 200 tokens): the agent answers "
        "with what it has so far, and you can continue with more budget."
    )
    await expect(turn.locator(".answer")).to_have_text("So far: 5.")
    await expect(turn).to_have_attribute("data-reason", "budget")
    await expect(turn.locator(".run-meta")).to_contain_text(
        "Budget used up: tokens · 1 step"
    )
    await expect(turn.locator(".run-usage")).to_have_text(
        "4 LLM calls · 320 tokens (33 % cached) · $0.0360"
    )
    await expect(turn.locator(".budget-grant")).to_have_count(0)  # too late now
    assert llm.requests[-1].max_tokens is not None  # the reserved allowance
    assert await violations(app) == []
    for size in (PHONE, DESKTOP):
        await app.page.set_viewport_size(size)  # type: ignore[arg-type]
        assert await layout_problems(app.page) == [], size

    more = turn.get_by_role("button", name="Continue with more budget (400 tokens)")
    await click_at_both_sizes(app.page, more)
    await app.wait_idle()
    await expect(app.answers().last).to_have_text("All done: 5.")
    await expect(app.loc(".turn-user .bubble-text").last).to_have_text("Continue")
    await expect(app.assistant()).to_have_attribute("data-reason", "finished")
    await expect(app.loc(".budget-continue")).to_have_count(0)
    follow_up = app.sent_of("chat")[1]
    assert (
        follow_up["content"],
        follow_up["agent_mode"],
        follow_up["agent_budget"],
    ) == ("Continue", True, {"tokens": 400})
    assert len(llm.requests) == 5


async def test_a_spent_daily_budget_ends_the_run_and_refuses_the_next(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A daily bound ends a run with its reset time and no Continue; the next chat is refused."""
    llm = ScriptedLLM(
        costing(reason("Add.")),
        costing(calls(("add", {"expression": "2+3"}))),
        costing(observe("5")),
        costing("So far: 5."),
    )
    harness = await start_server(llm, test_registry(), daily_budget_tokens=200)
    app = await open_app(harness)
    await app.type_and_send("What is 2+3?")
    await app.wait_idle()

    turn = app.assistant()
    reached = turn.locator(".budget-reached")
    await expect(reached).to_have_attribute("data-scope", "day")
    await expect(reached).to_have_text(
        re.compile(
            r"^Used up your daily token budget \(240 tokens of 200 tokens\): the "
            r"agent answers with what it has so far\. It starts over "
            r"(today at|on \w+,?) \d{1,2}:\d{2}( [AP]M)?\.$"
        )
    )
    await expect(turn.locator(".run-meta")).to_contain_text("Budget used up: tokens")
    await expect(turn.get_by_role("button", name=re.compile("Continue"))).to_have_count(
        0
    )
    await harness.service.flush_all()  # the day's spending is stored

    await app.type_and_send("And 3+4?")
    notice = app.loc(".notice-budget")
    await expect(notice.locator(".notice-title")).to_have_text(
        "Your daily budget is used up"
    )
    await expect(notice.locator(".notice-text")).to_have_text(
        re.compile(
            r"^your daily budget \(200 tokens\) is used up; it starts over at "
            r"\d{4}-\d{2}-\d{2} 00:00 UTC \((today at|on \w+,?) \d{1,2}:\d{2}"
            r"( [AP]M)?, your time\)\.$"
        )
    )
    await expect(app.loc(".turn-user").last).to_contain_text("Not sent")
    await expect(app.composer).to_have_value("And 3+4?")
    assert len(llm.requests) == 4


async def test_the_usage_dialog_shows_the_days_bar_and_the_models_row(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """The usage dialog shows today against the budget, the day's bar and the model's exact row."""
    llm = ScriptedLLM(
        costing(reason("done", finish=True, final="One.")),
        Completion(  # a server that gave no counts: loopwire's estimate
            content=reason("done", finish=True, final="Two."),
            usage=CALL.model_copy(update={"estimated_calls": 1}),
        ),
    )
    harness = await start_server(
        llm, test_registry(), prices=PRICES, daily_budget_tokens=10_000
    )
    app = await open_app(harness, bypass_csp=True)  # for axe
    for question in ("First?", "Second?"):
        await app.type_and_send(question)
        await app.wait_idle()
    await expect(app.assistant().locator(".run-usage")).to_have_text(
        "1 LLM call · 80 tokens (33 % cached, estimated) · $0.0090"
    )
    await harness.service.flush_all()

    dialog = app.loc("#usage")
    for size in (PHONE, DESKTOP):  # on a phone the button is in the drawer
        await app.page.set_viewport_size(size)  # type: ignore[arg-type]
        if size is PHONE:
            await click(
                app.page.get_by_role("button", name="Conversations", exact=True)
            )
        await click(app.page.get_by_role("button", name="Usage", exact=True))
        await expect(dialog).to_have_attribute("data-state", "loaded")
        await shows_two_runs(dialog)
        details = dialog.locator(".usage-days-details")
        was_open = await details.evaluate("(details) => details.open")
        await click(dialog.get_by_text("Days as a table"))
        assert await details.evaluate("(details) => details.open") is not was_open
        assert await violations(app) == [], size
        assert await layout_problems(app.page) == [], size
        await click(dialog.get_by_role("button", name="Close"))
        await expect(dialog).to_be_hidden()


async def click(control: Locator) -> None:
    """Click `control` once it is in view, unclipped and on top."""
    await control.scroll_into_view_if_needed()
    assert await why_not_clickable(control) == []
    await control.click()


async def shows_two_runs(dialog: Locator) -> None:
    """The dialog shows the two runs of one call each (80 tokens, $0.009)."""
    tokens_today = dialog.locator(".usage-today-row[data-what=tokens] dd")
    await expect(tokens_today).to_have_text("160 tokens of 10,000 tokens")
    await expect(dialog.locator(".usage-today-row[data-what=cost] dd")).to_have_text(
        "$0.0180"
    )
    bars = dialog.locator(".usage-bar")
    await expect(bars).to_have_count(30)
    used = dialog.locator(".usage-bar:not(.usage-bar-empty)")
    await expect(used).to_have_count(1)
    assert await used.get_attribute("data-tokens") == "160"
    label = str(await used.get_attribute("aria-label"))
    assert label.endswith(": 160 tokens, $0.0180")
    assert await bars.last.get_attribute("data-day") == await used.get_attribute(
        "data-day"
    )
    model = dialog.locator("#usage-models tr")
    await expect(model).to_have_count(1)
    assert await model.locator("th, td").all_text_contents() == [
        "scripted-model",
        "2",
        "2 (1 estimated)",
        "120",
        "40",
        "40",
        "$0.0180",
    ]
    day = dialog.locator("#usage-days tr")
    await expect(day).to_have_count(1)
    assert await day.locator("td").all_text_contents() == ["2", "160", "$0.0180"]


async def test_a_budget_typed_in_the_toolbar_ends_the_run_and_continue_goes_on(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A token budget typed in the toolbar is sent; the run ends at it and Continue finishes it."""
    llm = ScriptedLLM(
        costing(reason("Add.")),
        costing(calls(("add", {"expression": "2+3"}))),
        costing(observe("5")),
        costing("So far: 5."),
        costing(reason("done", finish=True, final="All done: 5.")),
    )
    harness = await start_server(llm, test_registry(), run_budget_tokens=1000)
    app = await open_app(harness)
    field = app.page.get_by_role("spinbutton", name="Token budget")
    await expect(field).to_have_value("")  # the server's, by default
    await expect(field).to_have_attribute("placeholder", "1,000")
    # no cost cap on this server: no cost field
    await expect(app.loc("#run-budget-cost-chip")).to_be_hidden()
    await click_at_both_sizes(app.page, field)
    await app.page.keyboard.type("200")
    await app.page.keyboard.press("Tab")
    await app.type_and_send("What is 2+3?")
    await app.wait_idle()

    assert app.sent_of("chat")[0]["agent_budget"] == {"tokens": 200}
    turn = app.assistant()
    await expect(turn).to_have_attribute("data-reason", "budget")
    await expect(turn.locator(".budget-reached")).to_have_text(
        "Used up the token budget (240 tokens of 200 tokens): the agent answers "
        "with what it has so far, and you can continue with more budget."
    )
    await expect(turn.locator(".answer")).to_have_text("So far: 5.")
    more = turn.get_by_role("button", name="Continue with more budget (400 tokens)")
    await click_at_both_sizes(app.page, more)
    await app.wait_idle()
    await expect(app.answers().last).to_have_text("All done: 5.")
    await expect(app.assistant()).to_have_attribute("data-reason", "finished")
    assert [chat["agent_budget"] for chat in app.sent_of("chat")] == [
        {"tokens": 200},
        {"tokens": 400},
    ]
    await app.page.reload()  # the budget is remembered, like max steps
    await app.expect_connected()
    await expect(field).to_have_value("200")
    assert len(llm.requests) == 5


async def test_a_bad_token_budget_is_refused_and_a_large_one_capped(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """0 or a sign alone in the budget field refuses the chat, saying why; above the cap it is lowered."""
    llm = ScriptedLLM(costing(reason("done", finish=True, final="Fine.")))
    harness = await start_server(llm, test_registry(), run_budget_tokens=1000)
    app = await open_app(harness)
    field = app.page.get_by_role("spinbutton", name="Token budget")
    hint = app.loc("#composer-hint")
    refusal = (
        "The token budget must be a whole number of tokens above 0, "
        "or empty for the server's."
    )
    for bad in ("0", "-"):
        await click_at_both_sizes(app.page, field)
        await field.press("ControlOrMeta+a")
        await app.page.keyboard.type(bad)
        await expect(hint).to_have_text(refusal)
        await expect(field).to_have_attribute("aria-invalid", "true")
        await app.type_and_send(f"Budget {bad}?")
        notice = app.loc(".notice").last
        await expect(notice.locator(".notice-title")).to_have_text(
            "Not sent: the token budget is not valid"
        )
        await expect(notice.locator(".notice-text")).to_have_text(refusal)
        await expect(app.composer).to_have_value(f"Budget {bad}?")
        await app.composer.fill("")
    assert app.sent_of("chat") == []

    await field.fill("")
    await app.page.keyboard.type("5000")
    await expect(hint).to_have_text(
        "Capped at 1,000 tokens: the server allows no more."
    )
    await app.page.keyboard.press("Tab")
    await expect(field).to_have_value("1000")
    await expect(field).to_have_attribute("aria-invalid", "false")
    await app.type_and_send("Within the cap?")
    await app.wait_idle()
    await expect(app.answers().last).to_have_text("Fine.")
    [chat] = app.sent_of("chat")
    assert chat["agent_budget"] == {"tokens": 1000}
    assert len(llm.requests) == 1


async def test_a_cost_budget_is_offered_where_the_server_caps_cost(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """With a cost cap the toolbar has a dollar field; what is typed there is sent as cost_usd."""
    llm = ScriptedLLM(costing(reason("done", finish=True, final="Cheap.")))
    harness = await start_server(
        llm, test_registry(), prices=PRICES, run_budget_cost_usd=1.0
    )
    app = await open_app(harness)
    field = app.page.get_by_role("spinbutton", name="Cost budget in dollars")
    await expect(field).to_have_attribute("placeholder", "1")
    await expect(
        app.page.get_by_role("spinbutton", name="Token budget")
    ).to_have_attribute("placeholder", "no limit")
    await click_at_both_sizes(app.page, field)
    await app.page.keyboard.type("0.5")
    await app.type_and_send("Cheaply?")
    await app.wait_idle()
    await expect(app.answers().last).to_have_text("Cheap.")
    [chat] = app.sent_of("chat")
    assert chat["agent_budget"] == {"cost_usd": 0.5}
    assert len(llm.requests) == 1


ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789ab"


async def signed_in(open_app: OpenApp, harness: Any, token: str) -> App:
    """A page of `harness` signed in through the login form with `token`."""
    app = await open_app(harness, load=False, bypass_csp=True)  # for axe
    await app.page.goto(app.base_url + "/login")
    await app.page.get_by_label("Token").fill(token)
    await app.page.get_by_role("button", name="Sign in").click()
    await expect(app.page).to_have_url(app.base_url + "/")
    await app.expect_connected()
    return app


async def open_usage(app: App) -> Locator:
    """The usage dialog, opened with its button at the desktop size."""
    await app.page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]
    await click(app.page.get_by_role("button", name="Usage", exact=True))
    dialog = app.loc("#usage")
    await expect(dialog).to_have_attribute("data-state", "loaded")
    return dialog


async def test_an_admin_sees_everyones_usage_and_a_user_only_their_own(
    start_server: StartServer, open_app: OpenApp, tmp_path: Any
) -> None:
    """Everyone shows the admin a row per user, most tokens first; a user is not offered it."""
    llm = ScriptedLLM(
        *(costing(reason("done", finish=True, final=f"{n}.")) for n in range(3))
    )
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {ALICE} admin\nbob: {BOB}\n", encoding="utf-8")
    harness = await start_server(
        llm, test_registry(), prices=PRICES, auth_tokens_file=tokens
    )
    alice = await signed_in(open_app, harness, ALICE)
    await alice.type_and_send("Alice's?")
    await alice.wait_idle()
    bob = await signed_in(open_app, harness, BOB)
    for question in ("Bob's?", "Bob's again?"):
        await bob.type_and_send(question)
        await bob.wait_idle()
    await harness.service.flush_all()

    dialog = await open_usage(alice)
    everyone = dialog.get_by_role("button", name="Everyone")
    await click_at_both_sizes(alice.page, everyone)
    await expect(everyone).to_have_attribute("aria-pressed", "true")
    await expect(dialog.locator("#usage-today-section")).to_be_hidden()
    rows = dialog.locator("#usage-users tr")
    await expect(rows).to_have_count(2)
    assert [
        await row.locator("th, td").all_text_contents() for row in await rows.all()
    ] == [
        ["bob", "2", "160", "$0.0180"],
        ["alice", "1", "80", "$0.0090"],
    ]
    used = dialog.locator(".usage-bar:not(.usage-bar-empty)")
    await expect(used).to_have_count(1)
    assert await used.get_attribute("data-tokens") == "240"
    for size in (PHONE, DESKTOP):
        await alice.page.set_viewport_size(size)  # type: ignore[arg-type]
        assert await violations(alice) == [], size
        assert await layout_problems(alice.page) == [], size
    mine = dialog.get_by_role("button", name="Mine")
    await click_at_both_sizes(alice.page, mine)
    await expect(dialog.locator("#usage-users-section")).to_be_hidden()
    await expect(dialog.locator(".usage-today-row[data-what=tokens] dd")).to_have_text(
        "80 tokens"
    )

    dialog = await open_usage(bob)  # not an admin: no switch, their own usage
    await expect(dialog.locator("#usage-whose")).to_be_hidden()
    await expect(dialog.get_by_role("button", name="Everyone")).to_have_count(0)
    await expect(dialog).to_have_attribute("data-scope", "mine")
    await expect(dialog.locator(".usage-today-row[data-what=tokens] dd")).to_have_text(
        "160 tokens"
    )
    await expect(dialog.locator("#usage-users-section")).to_be_hidden()
