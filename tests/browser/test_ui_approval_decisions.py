"""Approval decisions in the browser: edit the arguments in the dialog
(JSON that does not parse caught in the page, arguments the tool refuses
shown next to the box while the request waits), "Always allow" for the
conversation, and the Tool permissions list that revokes it; every control
clicked is on screen and unobstructed on a desktop and on a phone."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.async_api import Locator, expect

from tests.browser.geometry import why_not_clickable
from tests.browser.test_approvals import (
    AskedAgainInDoubt,
    Deployer,
    Sockets,
    start_deploy_run,
)
from tests.browser.test_ui_accessibility import violations
from tests.browser.ui import App, OpenApp
from tests.conftest import StartServer
from tests.fakes import Saver, ScriptedLLM, approval_registry, calls, observe, reason

pytestmark = pytest.mark.asyncio(loop_scope="session")

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
REFUSED = (
    "invalid arguments for save: text: Input should be a valid string; the "
    "approval still waits (send it again with arguments that fit, or as they were)"
)


def saving(*texts: str) -> ScriptedLLM:
    """One react run per text: save it (a tool that asks first), then answer."""
    replies: list[Any] = []
    for text in texts:
        replies += [
            reason("save it"),
            calls(("save", {"text": text})),
            observe(should_continue=False, final=f"Saved {text}."),
        ]
    return ScriptedLLM(*replies)


async def on_screen(
    app: App, control: Locator, sizes: tuple[dict[str, int], ...] = (PHONE, DESKTOP)
) -> None:
    """`control` is in view, unclipped and itself at its centre, at `sizes`
    (the desktop's last: the test goes on at that size)."""
    for size in sizes:
        await app.page.set_viewport_size(size)  # type: ignore[arg-type]
        await control.scroll_into_view_if_needed()
        assert await why_not_clickable(control) == [], size


async def click(
    app: App, control: Locator, sizes: tuple[dict[str, int], ...] = (PHONE, DESKTOP)
) -> None:
    await on_screen(app, control, sizes)
    await control.click()


async def send(app: App, text: str) -> None:
    """Type into the message box and press Enter, as a mouse user after a dialog."""
    await app.composer.click()
    await app.page.keyboard.type(text)
    await app.page.keyboard.press("Enter")


def approvals(app: App) -> list[dict[str, Any]]:
    """The approval responses the page sent, without their call ids."""
    return [
        {k: v for k, v in frame.items() if k not in ("type", "tool_call_id")}
        for frame in app.sent_of("tool_approval_response")
    ]


async def edit_arguments(app: App, text: str) -> None:
    box = app.page.get_by_role("textbox", name="Arguments to run with (JSON)")
    await box.fill(text)
    await click(app, app.page.get_by_role("button", name="Approve"))


async def test_edited_arguments_run_and_the_card_says_so(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Approve after editing sends the edited arguments; the tool runs with
    them, and the card shows them as edited, the model's kept aside."""
    saver, llm = Saver(), saving("milk")
    harness = await start_server(llm, approval_registry(saver))
    app = await open_app(harness, bypass_csp=True)  # for axe-core
    await app.type_and_send("remember milk")
    await expect(app.dialog).to_be_visible()

    toggle = app.page.get_by_role("button", name="Edit arguments")
    await expect(toggle).to_have_attribute("aria-expanded", "false")
    await click(app, toggle)
    box = app.page.get_by_role("textbox", name="Arguments to run with (JSON)")
    await expect(box).to_be_focused()
    await expect(box).to_have_value('{\n  "text": "milk"\n}')
    await expect(app.loc("#approval-args")).to_be_hidden()
    await expect(app.loc("#approval-args-label")).to_have_text(
        "Arguments to run with (JSON)"
    )
    await on_screen(app, box)
    assert await violations(app) == []
    await edit_arguments(app, '{"text": "oat milk"}')
    await expect(app.dialog).to_be_hidden()
    await app.wait_idle()

    assert approvals(app) == [{"approved": True, "arguments": {"text": "oat milk"}}]
    assert saver.saved == ["oat milk"]
    card = app.loc(".tool-card")
    await expect(card).to_have_attribute("data-status", "done")
    await expect(card).to_have_attribute("data-edited", "true")
    await expect(card.locator(".tool-args .tool-block-label")).to_have_text(
        "Arguments edited by you"
    )
    await expect(card.locator(".tool-args-body > pre")).to_have_text(
        '{"text": "oat milk"}'
    )
    await expect(card.locator(".tool-asked pre")).to_have_text('{"text": "milk"}')
    await expect(app.answers()).to_have_text("Saved milk.")
    (result,) = [m.content for m in llm.requests[2].messages if m.role == "tool"]
    assert result.endswith(
        '(The user changed the arguments before approving: {"text": "oat milk"})'
    )

    await app.page.reload()  # the replay shows the same
    await app.wait_idle()
    await expect(card).to_have_attribute("data-edited", "true")
    await expect(card.locator(".tool-args-body > pre")).to_have_text(
        '{"text": "oat milk"}'
    )
    await expect(app.dialog).to_be_hidden()


async def test_unchanged_arguments_are_not_sent(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Opening the editor and approving without a change is a plain yes."""
    saver = Saver()
    app = await open_app(await start_server(saving("milk"), approval_registry(saver)))
    await app.type_and_send("remember milk")
    await click(app, app.page.get_by_role("button", name="Edit arguments"))
    await edit_arguments(app, '{ "text":  "milk" }')
    await app.wait_idle()
    assert approvals(app) == [{"approved": True}]
    assert saver.saved == ["milk"]
    await expect(app.loc(".tool-card")).not_to_have_attribute("data-edited", "true")


async def test_bad_edits_are_caught_and_the_request_waits(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """JSON that does not parse is caught in the page (nothing sent);
    arguments the tool refuses get the server's message next to the box,
    the dialog staying open; a fixed edit then runs."""
    saver = Saver()
    app = await open_app(await start_server(saving("milk"), approval_registry(saver)))
    await app.type_and_send("remember milk")
    await click(app, app.page.get_by_role("button", name="Edit arguments"))
    error = app.loc("#approval-args-error")
    box = app.page.get_by_role("textbox", name="Arguments to run with (JSON)")

    await edit_arguments(app, '{"text": ')
    await expect(error).to_contain_text("Not valid JSON")
    await expect(error).to_contain_text("Nothing was sent.")
    await expect(box).to_have_attribute("aria-invalid", "true")
    await edit_arguments(app, '["milk"]')
    await expect(error).to_have_text(
        'The arguments must be a JSON object, such as {"name": "value"}. '
        "Nothing was sent."
    )
    assert approvals(app) == []

    await edit_arguments(app, '{"text": 5}')
    await expect(error).to_have_text(REFUSED)
    await expect(app.dialog).to_be_visible()
    approve = app.page.get_by_role("button", name="Approve")
    await expect(approve).to_be_enabled()
    await expect(box).to_be_focused()
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "approval")
    await expect(app.loc(".notice")).to_have_count(0)  # said in the dialog only
    assert saver.saved == []

    await box.press_sequentially("x")  # typing clears the message
    await expect(error).to_be_hidden()
    await edit_arguments(app, '{"text": "bread"}')
    await expect(app.dialog).to_be_hidden()
    await app.wait_idle()
    assert approvals(app) == [
        {"approved": True, "arguments": {"text": 5}},
        {"approved": True, "arguments": {"text": "bread"}},
    ]
    assert saver.saved == ["bread"]
    await expect(app.loc(".tool-card")).to_have_attribute("data-edited", "true")


async def test_always_allow_in_this_conversation_then_revoke(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """ "Always allow save in this conversation": the next call runs without
    a dialog, the permissions list shows the grant; revoked there, the next
    call asks again."""
    saver = Saver()
    harness = await start_server(
        saving("milk", "eggs", "jam"), approval_registry(saver)
    )
    app = await open_app(harness, bypass_csp=True)  # for axe-core
    await app.type_and_send("remember milk")
    await expect(app.dialog).to_be_visible()
    always = app.page.get_by_role("checkbox", name="Always allow save")
    here = app.page.get_by_role("radio", name="in this conversation")
    await expect(here).to_be_disabled()
    await click(app, always)
    await expect(here).to_be_enabled()
    await click(app, app.page.get_by_role("radio", name="in all my conversations"))
    await click(app, here)
    await click(app, app.page.get_by_role("button", name="Approve"))
    await app.wait_idle()
    assert approvals(app) == [{"approved": True, "remember": "conversation"}]
    await expect(app.loc(".tool-card .tool-remembered")).to_have_text(
        "Always allowed in this conversation"
    )
    # the list was reloaded when the server took the grant
    await expect(app.loc("#permissions-list .permission")).to_have_count(1)

    await send(app, "remember eggs")
    await app.wait_idle()
    assert saver.saved == ["milk", "eggs"]
    assert len(approvals(app)) == 1  # not asked
    await expect(app.dialog).to_be_hidden()

    # on a phone it is in the conversations drawer (see the phone test)
    sidebar_button = app.page.get_by_role("button", name="Tool permissions")
    await click(app, sidebar_button, (DESKTOP,))
    permissions = app.loc("#permissions")
    await expect(permissions).to_be_visible()
    grant = permissions.locator(".permission")
    await expect(grant.locator(".permission-tool")).to_have_text("save")
    await expect(grant.locator(".permission-where")).to_have_text(
        "Always allowed in this conversation"
    )
    await expect(grant.locator(".permission-when")).to_contain_text("Since ")
    await expect(app.loc("#permissions-empty")).to_be_hidden()
    assert await violations(app) == []
    await click(app, permissions.get_by_role("button", name="Revoke save"))
    await expect(grant).to_have_count(0)
    await expect(app.loc("#permissions-empty")).to_have_text(
        "No tool is always allowed: every tool that changes something asks first."
    )
    await click(app, permissions.get_by_role("button", name="Close"))
    await expect(permissions).to_be_hidden()

    await send(app, "remember jam")
    await expect(app.dialog).to_be_visible()
    await click(app, app.page.get_by_role("button", name="Approve"))
    await app.wait_idle()
    assert approvals(app) == [
        {"approved": True, "remember": "conversation"},
        {"approved": True},
    ]
    assert saver.saved == ["milk", "eggs", "jam"]


async def test_the_permissions_list_on_a_phone(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """On a phone the list opens from the conversations drawer; with no
    grant it says so."""
    harness = await start_server(saving(), approval_registry())
    app = await open_app(harness, viewport=PHONE, touch=True, bypass_csp=True)
    toggle = app.page.get_by_role("button", name="Conversations", exact=True)
    if await toggle.get_attribute("aria-expanded") != "true":
        await toggle.click()
    button = app.page.get_by_role("button", name="Tool permissions")
    await expect(button).to_be_visible()
    assert await why_not_clickable(button) == []
    await button.click()
    await expect(app.loc("#permissions-empty")).to_be_visible()
    await expect(app.loc("#permissions-list .permission")).to_have_count(0)
    assert await violations(app) == []
    close = app.loc("#permissions").get_by_role("button", name="Close")
    assert await why_not_clickable(close) == []
    await close.click()
    await expect(app.loc("#permissions")).to_be_hidden()


async def test_reject_with_a_reason_sends_no_edit(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """With the editor open and "Always allow" ticked, the Reason box is on
    screen and labelled, and Reject sends the reason alone."""
    saver = Saver()
    app = await open_app(await start_server(saving("milk"), approval_registry(saver)))
    await app.type_and_send("remember milk")
    await click(app, app.page.get_by_role("button", name="Edit arguments"))
    await app.page.get_by_role("textbox", name="Arguments to run with (JSON)").fill(
        '{"text": "tea"}'
    )
    await click(app, app.page.get_by_role("checkbox", name="Always allow save"))
    reason_box = app.page.get_by_label("Reason")
    await click(app, reason_box)
    await reason_box.fill("not now")
    await click(app, app.page.get_by_role("button", name="Reject"))
    await expect(app.dialog).to_be_hidden()
    await app.wait_idle()
    assert approvals(app) == [{"approved": False, "reason": "not now"}]
    assert saver.saved == []
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "rejected")


async def test_a_call_in_doubt_is_neither_edited_nor_remembered(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A call that may have run offers no Edit arguments and no Always allow."""
    deployer = Deployer()
    _, app = await start_deploy_run(
        start_server,
        open_app,
        deployer,
        observe(final="Done."),
        sockets=AskedAgainInDoubt(),
    )
    await expect(app.dialog).to_have_attribute("data-doubt", "true")
    await expect(app.page.get_by_role("button", name="Edit arguments")).to_be_hidden()
    await expect(
        app.page.get_by_role("checkbox", name="Always allow deploy")
    ).to_be_hidden()
    await click(app, app.page.get_by_role("button", name="Run again"))
    await app.wait_idle()
    assert [f["approved"] for f in app.sent_of("tool_approval_response")] == [True]
    assert "remember" not in app.sent_of("tool_approval_response")[0]
    assert deployer.deployed == ["web@production"]


class KeepsDecisions(Sockets):
    """The first socket keeps the page's decisions from the server."""

    def decision(self, frame: dict[str, Any]) -> bool:
        return bool(frame["type"] == "tool_approval_response")


async def test_an_edit_sent_again_after_a_reload_can_be_refused(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """An edited "yes" that never reached the server before a reload is sent
    again; refused there, the dialog comes back with the edit and the
    server's message, and a fixed edit runs."""
    saver, sockets = Saver(), KeepsDecisions()
    harness = await start_server(saving("milk"), approval_registry(saver))
    app = await open_app(harness, load=False)
    await app.page.route_web_socket(re.compile(r"/ws"), sockets.handle)
    await app.load()
    await app.type_and_send("remember milk")
    await click(app, app.page.get_by_role("button", name="Edit arguments"))
    await edit_arguments(app, '{"text": 5}')
    approving = app.page.get_by_role("button", name="Approving…")
    await expect(approving).to_be_disabled()  # waits for the server's word
    await app.page.reload()

    await expect(app.dialog).to_be_visible()
    await expect(app.loc("#approval-args-error")).to_have_text(REFUSED)
    box = app.page.get_by_role("textbox", name="Arguments to run with (JSON)")
    await expect(box).to_have_value('{\n  "text": 5\n}')
    await edit_arguments(app, '{"text": "soy milk"}')
    await app.wait_idle()
    assert [len(frames) for frames in sockets.approvals()] == [1, 2]
    assert saver.saved == ["soy milk"]
