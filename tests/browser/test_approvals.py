"""Tool approvals in the browser: the dialog, Approve, Reject with a reason."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from playwright.async_api import expect
from pydantic import BaseModel

from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from tests.browser.ui import App, OpenApp
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason

pytestmark = pytest.mark.asyncio(loop_scope="session")


DESCRIPTION = "Deploy a service to an environment. Asks the user first."


class DeployArgs(BaseModel):
    service: str
    environment: str


@dataclass
class Deployer:
    deployed: list[str] = field(default_factory=list)

    async def __call__(self, args: DeployArgs, ctx: ToolContext) -> dict[str, str]:
        self.deployed.append(f"{args.service}@{args.environment}")
        return {"deployed": args.service, "to": args.environment}


async def start_deploy_run(
    start_server: StartServer, open_app: OpenApp, deployer: Deployer, *replies: object
) -> tuple[Harness, App]:
    llm = ScriptedLLM(
        reason("Deploy it.", prose="I'll deploy the web service."),
        calls(("deploy", {"service": "web", "environment": "production"})),
        *replies,  # type: ignore[arg-type]
    )
    registry = ToolRegistry(
        [
            Tool(
                "deploy",
                DESCRIPTION,
                DeployArgs,
                deployer,
                ToolEffect(requires_approval=True),
            )
        ]
    )
    harness = await start_server(llm, registry)
    app = await open_app(harness)
    await expect(app.loc(".tool-option .badge-warn")).to_have_text(
        ["writes", "needs approval"]
    )
    await app.type_and_send("deploy web to production")
    await expect(app.dialog).to_be_visible()
    return harness, app


async def test_approve_runs_the_tool(
    start_server: StartServer, open_app: OpenApp
) -> None:
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

    deployer = Deployer()
    _, app = await start_deploy_run(start_server, open_app, deployer)

    await app.page.evaluate(
        "() => window.loopwire.connection.send({type: 'agent_control', action: 'stop'})"
    )
    await expect(app.dialog).to_be_hidden()
    await app.wait_idle()
    await expect(app.loc(".tool-card")).to_have_attribute("data-status", "cancelled")
    assert deployer.deployed == []
