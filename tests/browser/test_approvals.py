"""Tool approvals in the browser: the dialog, Approve, Reject with a reason;
a decision that the connection lost, or that reached an instance which no
longer holds the conversation (`moved`), sent again after the reconnect;
a call asked about again because it may have run (`in_doubt`)."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.async_api import WebSocketRoute, expect
from pydantic import BaseModel

from backend.llm.base import Completion, ToolCall, Usage
from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from tests.browser.geometry import why_not_clickable
from tests.browser.test_ui_accessibility import violations
from tests.browser.ui import DESKTOP, PHONE, App, OpenApp
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason
from tests.scripted_server import MOVED_CLOSE, MOVED_DECISION

pytestmark = pytest.mark.asyncio(loop_scope="session")


DESCRIPTION = "Deploy a service to an environment. Asks the user first."


class DeployArgs(BaseModel):
    service: str
    environment: str


class Sockets:
    """The page's WebSockets through Playwright to the real server, with
    what the page sent on each. On the first socket a decision may be kept
    from the server (`decision`), and server frames rewritten (`frame`) or
    held back (`hold_frames`); later sockets pass everything through."""

    def __init__(self) -> None:
        self.pages: list[WebSocketRoute] = []
        self.sent: list[list[dict[str, Any]]] = []
        """Per socket, every frame the page sent on it."""
        self.hold_frames = False
        self.refuse_later = False
        """Close the later sockets at once (1013), as an instance that
        cannot serve the conversation yet would."""

    async def handle(self, page_side: WebSocketRoute) -> None:
        first = not self.pages
        if not first and self.refuse_later:
            await page_side.close(code=1013, reason="try again later")
            return
        sent: list[dict[str, Any]] = []
        self.pages.append(page_side)
        self.sent.append(sent)
        server_side = page_side.connect_to_server()

        def from_page(message: str | bytes) -> None:
            frame = json.loads(message)
            sent.append(frame)
            if not (first and self.decision(frame)):
                server_side.send(message)

        def from_server(message: str | bytes) -> None:
            if not (first and self.hold_frames):
                page_side.send(self.frame(message) if first else message)

        page_side.on_message(from_page)
        server_side.on_message(from_server)

    def approvals(self) -> list[list[dict[str, Any]]]:
        """Per socket, the approval responses the page sent (no call ids)."""
        return [
            [
                {k: v for k, v in f.items() if k != "tool_call_id"}
                for f in frames
                if f["type"] == "tool_approval_response"
            ]
            for frames in self.sent
        ]

    def decision(self, frame: dict[str, Any]) -> bool:
        """True: `frame`, sent on the first socket, does not reach the server."""
        return False

    def frame(self, message: str | bytes) -> str | bytes:
        """What the page gets on the first socket instead of `message`."""
        return message

    async def drop(self) -> None:
        """Close the page's first socket as a server letting go would (1012)."""
        await self.pages[0].close(code=1012, reason=MOVED_CLOSE)


class RefusedAsMoved(Sockets):
    """The first decision reaches an instance that no longer holds the
    conversation: refused with `moved` (seq 0), then the socket closes."""

    closing: asyncio.Task[None] | None = None

    def decision(self, frame: dict[str, Any]) -> bool:
        if frame["type"] != "tool_approval_response" or self.closing is not None:
            return False
        page_side = self.pages[0]
        moved = {
            "seq": 0,
            "session_id": "",
            "run_id": None,
            "ts": 0.0,
            "type": "error",
            "message": MOVED_DECISION,
            "error_type": "moved",
        }
        page_side.send(json.dumps(moved))
        self.closing = asyncio.get_running_loop().create_task(self.drop())
        return True


class AskedAgainInDoubt(Sockets):
    """The approval request comes as after a crash: the call may have run."""

    def frame(self, message: str | bytes) -> str | bytes:
        frame = json.loads(message)
        if frame.get("type") != "tool_approval_request":
            return message
        doubt = f"{frame['tool_name']} was running when the server running it stopped"
        return json.dumps({**frame, "in_doubt": True, "description": doubt})


@dataclass
class Deployer:
    deployed: list[str] = field(default_factory=list)

    async def __call__(self, args: DeployArgs, ctx: ToolContext) -> dict[str, str]:
        self.deployed.append(f"{args.service}@{args.environment}")
        return {"deployed": args.service, "to": args.environment}


def deploy_registry(deployer: Deployer) -> ToolRegistry:
    deploy = Tool(
        "deploy",
        DESCRIPTION,
        DeployArgs,
        deployer,
        ToolEffect(requires_approval=True),
    )
    return ToolRegistry([deploy])


async def start_deploy_run(
    start_server: StartServer,
    open_app: OpenApp,
    deployer: Deployer,
    *replies: object,
    sockets: Sockets | None = None,
    **options: Any,
) -> tuple[Harness, App]:
    """`sockets`: the page's WebSockets go through it; `options`: `open_app`'s."""
    llm = ScriptedLLM(
        reason("Deploy it.", prose="I'll deploy the web service."),
        calls(("deploy", {"service": "web", "environment": "production"})),
        *replies,  # type: ignore[arg-type]
    )
    harness = await start_server(llm, deploy_registry(deployer))
    app = await open_app(harness, load=sockets is None, **options)
    if sockets is not None:
        await app.page.route_web_socket(re.compile(r"/ws"), sockets.handle)
        await app.load()
    await expect(app.loc(".tool-option .badge-warn")).to_have_text(
        ["writes", "needs approval"]
    )
    await app.type_and_send("deploy web to production")
    await expect(app.dialog).to_be_visible()
    return harness, app


async def test_approve_runs_the_tool(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """The dialog shows the call, Esc does not dismiss it, and Approve runs the tool."""
    deployer = Deployer()
    _, app = await start_deploy_run(
        start_server,
        open_app,
        deployer,
        observe(should_continue=False, final="Deployed **web** to production."),
    )

    await expect(app.loc("#approval-tool")).to_have_text("deploy")
    await expect(app.loc("#approval-step")).to_have_text("Step 1")
    # the tool gives no summary for people: the first sentence of the model's
    await expect(app.loc("#approval-description")).to_have_text(
        "Deploy a service to an environment."
    )
    await expect(app.loc("#approval-args")).to_have_text(
        '{\n  "service": "web",\n  "environment": "production"\n}'
    )
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "approval")
    await expect(app.loc(".busy-text")).to_have_text("Waiting for your approval")
    await expect(app.page.get_by_role("button", name="Reject")).to_be_focused()
    await app.page.keyboard.press(
        "Escape"
    )  # a decision is needed: Esc does not dismiss
    await expect(app.dialog).to_be_visible()
    assert deployer.deployed == []

    await app.page.get_by_role("button", name="Approve").click()
    await expect(app.dialog).to_be_hidden()
    await app.wait_idle()

    call_id = app.sent_of("tool_approval_response")[0]["tool_call_id"]
    assert app.sent_of("tool_approval_response") == [
        {"type": "tool_approval_response", "tool_call_id": call_id, "approved": True}
    ]
    assert deployer.deployed == ["web@production"]
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "done")
    await expect(app.answers()).to_have_text("Deployed web to production.")


async def test_reject_with_a_reason(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Reject sends the typed reason; the tool never runs and the card shows why."""
    deployer = Deployer()
    _, app = await start_deploy_run(
        start_server, open_app, deployer, "I did not deploy, since you declined."
    )

    await app.page.get_by_label("Reason").fill("not on a Friday")
    await app.page.get_by_role("button", name="Reject").click()
    await expect(app.dialog).to_be_hidden()
    await app.wait_idle()

    call_id = app.sent_of("tool_approval_response")[0]["tool_call_id"]
    assert app.sent_of("tool_approval_response") == [
        {
            "type": "tool_approval_response",
            "tool_call_id": call_id,
            "approved": False,
            "reason": "not on a Friday",
        }
    ]
    assert deployer.deployed == []
    card = app.loc(".tool-card")
    await expect(card).to_have_attribute("data-status", "rejected")
    await expect(card.locator(".tool-outcome pre")).to_have_text(
        "the user declined to run deploy (reason: not on a Friday)"
    )
    await expect(app.answers()).to_have_text("I did not deploy, since you declined.")
    await expect(app.assistant().locator(".run-meta")).to_contain_text(
        "Ended after a rejected tool"
    )


async def test_stop_closes_the_dialog(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A stop while the dialog is open hides it and marks the call cancelled."""

    deployer = Deployer()
    _, app = await start_deploy_run(start_server, open_app, deployer)

    await app.connection("connection.send({type: 'agent_control', action: 'stop'})")
    await expect(app.dialog).to_be_hidden()
    await app.wait_idle()
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "cancelled")
    assert deployer.deployed == []


APPROVED = {"type": "tool_approval_response", "approved": True}
DONE = "Deployed **web** to production."


async def test_an_approval_refused_as_moved_is_sent_again_without_asking(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """An approval refused as `moved` is resent after the reconnect, not asked again."""
    deployer = Deployer()
    sockets = RefusedAsMoved()
    _, app = await start_deploy_run(
        start_server, open_app, deployer, observe(final=DONE), sockets=sockets
    )
    await app.page.get_by_role("button", name="Approve").click()
    await expect(app.dialog).to_be_hidden()
    await app.wait_idle()

    # refused, closed, reconnected, sent again
    assert sockets.approvals() == [[APPROVED], [APPROVED]]
    assert deployer.deployed == ["web@production"]
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "done")
    await expect(app.answers()).to_have_text("Deployed web to production.")
    await expect(app.loc(".notice")).to_have_count(0)  # nothing alarming
    await expect(app.dialog).to_be_hidden()  # and not asked again


async def test_an_approval_the_replay_shows_taken_is_not_sent_again(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """The approval reached the server, then the socket dropped (1012)
    before the page saw what came of it; the replay shows the tool ran."""
    deployer = Deployer()
    sockets = Sockets()
    harness, app = await start_deploy_run(
        start_server, open_app, deployer, observe(final=DONE), sockets=sockets
    )
    run = next(iter(harness.service.sessions.values())).run.task
    sockets.hold_frames = True
    await app.page.get_by_role("button", name="Approve").click()
    await run  # the tool ran and the run ended while the page saw nothing
    await sockets.drop()
    await app.wait_idle()

    assert sockets.approvals() == [[APPROVED], []]
    assert deployer.deployed == ["web@production"]
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "done")
    await expect(app.loc(".notice")).to_have_count(0)


async def test_a_call_that_may_have_run_is_asked_about_plainly(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A maybe-run call gets a plain Run again dialog, and the yes says `in_doubt`."""
    deployer = Deployer()
    sockets = AskedAgainInDoubt()
    _, app = await start_deploy_run(
        start_server,
        open_app,
        deployer,
        observe(final=DONE),
        sockets=sockets,
        bypass_csp=True,  # for axe-core
    )
    await expect(app.dialog).to_have_attribute("data-doubt", "true")
    await expect(app.loc("#approval-title")).to_have_text("Run deploy again?")
    await expect(app.loc("#approval-description")).to_have_text(
        "This may already have run when the server restarted: nobody can tell "
        "whether it took effect. Run again does it once more; Don't run leaves "
        "it as it is."
    )
    await expect(app.page.get_by_label("Reason")).to_be_hidden()
    run_again = app.page.get_by_role("button", name="Run again")
    dont_run = app.page.get_by_role("button", name="Don't run")
    await expect(dont_run).to_be_focused()  # the safe way out, as Reject
    for size in (DESKTOP, PHONE):
        await app.page.set_viewport_size(size)  # type: ignore[arg-type]
        for button in (dont_run, run_again):
            assert await why_not_clickable(button) == [], size
    assert await violations(app) == []

    await run_again.click()
    await app.wait_idle()
    assert sockets.approvals() == [[{**APPROVED, "in_doubt": True}]]  # says so
    assert deployer.deployed == ["web@production"]


async def test_each_run_asks_for_its_own_approval(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Some models number their calls from 1 in every reply: the second
    run's `call_1` is a new request (renamed `call_1~2`), asked for again,
    not the first run's, already decided."""
    deploy = ToolCall(
        id="call_1",
        name="deploy",
        arguments='{"service": "web", "environment": "production"}',
    )
    deploying = Completion(content="", tool_calls=(deploy,), usage=Usage())
    llm = ScriptedLLM(
        reason("Deploy it."),
        deploying,
        observe(final=DONE),
        reason("Deploy it again."),
        deploying,
        observe(final="Deployed again."),
    )
    deployer = Deployer()
    app = await open_app(await start_server(llm, deploy_registry(deployer)))
    for message in ("deploy web", "deploy it again"):
        await app.composer.click()  # a mouse user, after the dialog
        await app.page.keyboard.type(message)
        await app.page.keyboard.press("Enter")
        await expect(app.dialog).to_be_visible()
        await app.page.get_by_role("button", name="Approve").click()
        await app.wait_idle()
    calls = [f["tool_call_id"] for f in app.sent_of("tool_approval_response")]
    assert calls == ["call_1", "call_1~2"]
    assert deployer.deployed == ["web@production"] * 2
    await expect(app.answers().last).to_have_text("Deployed again.")


async def test_a_reloaded_page_sends_again_what_was_refused_as_moved(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """The approval was refused (`moved`) and the page reloaded before it
    could reconnect: the replay shows the request, this tab's decision on it
    (kept in sessionStorage) and nothing done about it, so the decision is
    sent again; the dialog does not come back."""
    deployer = Deployer()
    sockets = RefusedAsMoved()
    _, app = await start_deploy_run(
        start_server, open_app, deployer, observe(final=DONE), sockets=sockets
    )
    sockets.refuse_later = True
    await app.page.get_by_role("button", name="Approve").click()
    await expect(app.loc("#connection")).to_have_attribute("data-state", "reconnecting")
    sockets.refuse_later = False
    await app.page.reload()
    await app.wait_idle()

    sent = [frames for frames in sockets.approvals() if frames]
    assert sent == [[APPROVED], [APPROVED]]
    assert deployer.deployed == ["web@production"]
    await expect(app.dialog).to_be_hidden()
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "done")
    await expect(app.loc(".notice")).to_have_count(0)


async def test_an_approval_made_offline_goes_out_once_the_connection_is_back(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """An approval clicked while offline is sent once the connection is back."""
    deployer = Deployer()
    sockets = Sockets()
    _, app = await start_deploy_run(
        start_server, open_app, deployer, observe(final=DONE), sockets=sockets
    )
    sockets.refuse_later = True
    await sockets.drop()
    await expect(app.loc("#connection")).to_have_attribute("data-state", "reconnecting")
    await app.page.get_by_role("button", name="Approve").click()
    await expect(app.dialog).to_be_hidden()
    assert deployer.deployed == []

    sockets.refuse_later = False
    await app.connection("connection.reconnectNow()")
    await app.wait_idle()
    assert [frames for frames in sockets.approvals() if frames] == [[APPROVED]]
    assert deployer.deployed == ["web@production"]
    await expect(app.loc(".notice")).to_have_count(0)
