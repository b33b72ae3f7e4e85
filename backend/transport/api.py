"""The HTTP controls: the levers a run's WebSocket has, for scripts.

- `POST /api/conversations/{id}/input` `{content, question_id?}`,
  `…/stop` `{mode: immediate | after_step}`, `…/steps` `{add}`,
  `…/budget` `{tokens?, cost_usd?, time_s?}` (amounts to add),
  `…/approvals/{tool_call_id}` `{approved, reason?}`: dispatched to the
  caller's conversation as the frame would be (`ChatService.control`), on
  whichever instance holds it. 200 JSON; 400 for a bad body, 404 for a
  conversation that is not the caller's, 409 when nothing is waiting.
- `POST /api/conversations/{id}/tool-results/{tool_call_id}`
  `{content, is_error?}`: the result of a client tool's call the run waits
  for (`chat.client_tools`, `POST /api/agent`'s `client_tools`).
- `POST /api/sessions/{session_id}/approvals/{tool_call_id}`: the first
  approvals URL, served by the same handler and answering as it always
  has: 404 "no such session", 409 for any refusal.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.chat.service import ChatService
from backend.errors import NoSuchConversation, ProtocolError
from backend.protocol import (
    AgentControlMessage,
    AgentUserInputMessage,
    AnswerAction,
    BudgetLimits,
    ClientMessage,
    Id,
    Remember,
    Steps,
    ToolApprovalResponseMessage,
    ToolResultMessage,
)
from backend.protocol.client import TOOL_RESULT_LIMIT
from backend.transport.auth import user_of
from backend.transport.bodies import StrictBody, describe, read_model
from backend.transport.refusal import Refused


class InputBody(StrictBody):
    content: str = ""
    question_id: Id | None = None
    action: AnswerAction = "accept"
    """`decline` or `cancel`: no answer (then without `content`)."""

    @model_validator(mode="after")
    def _content_with_accept(self) -> InputBody:
        if self.action != "accept" and self.content:
            raise ValueError(f"an answer with action {self.action!r} has no content")
        return self


class StopBody(StrictBody):
    mode: Literal["immediate", "after_step"] = "immediate"


class StepsBody(StrictBody):
    add: Steps


class BudgetBody(BudgetLimits):
    """What to add to the run's budget: tokens, dollars, seconds of work."""


class ApprovalBody(StrictBody):
    approved: bool
    reason: Annotated[str, Field(max_length=2000)] | None = None
    arguments: dict[str, Any] | None = None
    remember: Remember | None = None


class ToolResultBody(StrictBody):
    content: Annotated[str, Field(max_length=TOOL_RESULT_LIMIT)]
    is_error: bool = False


async def answer(request: Request) -> Response:
    body = await read_model(request, InputBody, "answer")
    message = AgentUserInputMessage(
        type="agent_user_input",
        content=body.content,
        question_id=body.question_id,
        action=body.action,
    )
    await _control(request, message)
    return JSONResponse({"status": "answered"})


async def stop(request: Request) -> Response:
    body = await read_model(request, StopBody, "stop")
    message = AgentControlMessage(
        type="agent_control",
        action="stop" if body.mode == "immediate" else "stop_after_step",
    )
    await _control(request, message)
    return JSONResponse({"status": "stopping", "mode": body.mode})


async def grant(request: Request) -> Response:
    body = await read_model(request, StepsBody, "steps")
    message = AgentControlMessage(
        type="agent_control", action="grant_steps", steps=body.add
    )
    done = await _control(request, message)
    if "max_steps" in done:  # steps granted
        return JSONResponse({"status": "granted", "max_steps": done["max_steps"]})
    return JSONResponse({"status": "done"})


async def grant_budget(request: Request) -> Response:
    body = await read_model(request, BudgetBody, "budget")
    try:
        message = AgentControlMessage(
            type="agent_control", action="grant_budget", budget=body
        )
    except ValidationError as exc:
        raise Refused(400, "invalid_message", describe(exc, most=5)[1]) from exc
    done = await _control(request, message)
    return JSONResponse({"status": "granted", "budget": done.get("budget")})


async def approve(request: Request) -> Response:
    """Both approvals URLs."""
    body = await read_model(request, ApprovalBody, "approval")
    call_id = request.path_params["tool_call_id"]
    try:
        message = ToolApprovalResponseMessage(
            type="tool_approval_response",
            tool_call_id=call_id,
            approved=body.approved,
            reason=body.reason,
            arguments=body.arguments,
            remember=body.remember,
        )
    except ValidationError as exc:
        raise Refused(400, "invalid_message", describe(exc, most=5)[1]) from exc
    await _control(request, message)
    status = "approved" if body.approved else "rejected"
    return JSONResponse({"tool_call_id": call_id, "status": status})


async def tool_result(request: Request) -> Response:
    body = await read_model(request, ToolResultBody, "tool result")
    call_id = request.path_params["tool_call_id"]
    message = ToolResultMessage(
        type="tool_result",
        tool_call_id=call_id,
        content=body.content,
        is_error=body.is_error,
    )
    await _control(request, message)
    return JSONResponse({"tool_call_id": call_id, "status": "returned"})


async def _control(request: Request, message: ClientMessage) -> dict[str, Any]:
    """`message` dispatched to the caller's conversation, as if it came
    over its WebSocket, on whichever instance holds it: what it did."""
    service: ChatService = request.app.state.chat
    params = request.path_params
    first = "session_id" in params  # the first approvals URL, answering as it did
    conversation_id = params["session_id"] if first else params["conversation_id"]
    try:
        return await service.control(conversation_id, user_of(request), message)
    except NoSuchConversation as exc:
        missing = (
            "no such session" if first else f"no active run in {conversation_id!r}"
        )
        raise Refused(404, "not_found", missing) from exc
    except ProtocolError as exc:
        if first:
            raise Refused(409, exc.error_type, str(exc)) from exc
        raise Refused.by_service(exc) from exc


def routes() -> list[Route]:
    base = "/api/conversations/{conversation_id}"
    approval = "/approvals/{tool_call_id}"
    return [
        Route(f"{base}/input", answer, methods=["POST"]),
        Route(f"{base}/stop", stop, methods=["POST"]),
        Route(f"{base}/steps", grant, methods=["POST"]),
        Route(f"{base}/budget", grant_budget, methods=["POST"]),
        Route(base + approval, approve, methods=["POST"]),
        Route(f"{base}/tool-results/{{tool_call_id}}", tool_result, methods=["POST"]),
        Route("/api/sessions/{session_id}" + approval, approve, methods=["POST"]),
    ]
