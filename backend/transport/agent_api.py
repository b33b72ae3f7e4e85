"""The agent over HTTP: one request per run, frames as Server-Sent Events.

- `POST /api/agent` with `{query, conversation_id?, stream?, detach?, …}`
  starts a run in the caller's conversation (a new one without an id);
  `replace_from` (a run of that conversation) edits and resends, as a
  WebSocket `chat` with `replace_from` does.
  `stream: true` (the default) answers `text/event-stream`: each protocol
  frame of the conversation as an event (`event: <type>`, `id: <seq>`,
  `data: <the frame's JSON>`), keep-alive comments while nothing happens,
  and last `event: done` with `{conversation_id, run_id, steps, reason,
  tools_used, message_id}`. A client that goes away stops the run, unless
  it asked `detach: true`. `stream: false` waits for the end and answers
  one JSON document (the user's and the assistant's messages, the trace,
  `agent_metadata`).
- The same request with a `Last-Event-ID` header and the `conversation_id`
  starts nothing: it replays the frames after that id and follows the run
  in progress to its end. `GET /api/conversations/{id}/events` does the
  same (what a browser's `EventSource` reconnects with).
- The controls (input, stop, steps, approvals) are in `transport/api.py`.

Errors are JSON `{"error_type", "message"}`: 400 for a bad body (naming
each bad field), 404 for a conversation that is not the caller's, 409 when
the conversation is busy or has nothing to answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.aio import race
from backend.chat.service import ChatService
from backend.chat.subscription import CLOSING, OVERFLOW, Subscription
from backend.chat.target import Target
from backend.errors import NoSuchConversation, ProtocolError
from backend.protocol import (
    AgentCompletion,
    AgentError,
    BudgetLimits,
    ChatMessage,
    ChatResponse,
    ClientTool,
    Envelope,
    Error,
    Id,
    Name,
    ResponseComplete,
    Steps,
    SystemPrompt,
    ToolNames,
    ToolStart,
)
from backend.protocol.client import CLIENT_TOOLS_LIMIT, check_client_tools
from backend.transport.bodies import StrictBody, read_model, whole_number
from backend.transport.refusal import Refused
from backend.transport.run_streams import (
    PING_S,
    connected,
    gone,
    open_conversation,
    read_frame,
    restarting,
)

CONVERSATION_ID = r"^[0-9a-f]{32}$"


class AgentRequest(StrictBody):
    query: Annotated[str, Field(min_length=1)]
    conversation_id: Annotated[str, Field(pattern=CONVERSATION_ID)] | None = None
    stream: bool = True
    detach: bool = False
    """Streaming only: keep the run going if the client goes away."""
    save_chat: bool = True
    include_history: bool = True
    max_steps: Steps | None = None
    budget: BudgetLimits | None = None
    """The run's budget, below the server's (as `ChatMessage.agent_budget`)."""
    loop_strategy: Name | None = None
    selected_tools: ToolNames | None = None
    model: Name | None = None
    system_prompt: SystemPrompt | None = None
    replace_from: Id | None = None
    """Edit and resend, as `ChatMessage.replace_from` (with a conversation_id)."""
    selected_data_sources: Annotated[list[Name], Field(max_length=50)] | None = None
    """The data sources `search_documents` may search (None: all)."""
    when_busy: Literal["refuse", "queue", "steer", "interrupt"] = "refuse"
    """While a run works: as `ChatMessage.when_busy`; a held message is
    answered 202 `{conversation_id, input_id, mode, state}` (follow
    `…/events` to see it run)."""
    client_tools: (
        Annotated[list[ClientTool], Field(max_length=CLIENT_TOOLS_LIMIT)] | None
    ) = None
    """Tools the caller runs itself, as `ChatMessage.client_tools`; a call
    of one is answered by `POST …/tool-results/{tool_call_id}`."""

    @field_validator("query", "system_prompt")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("client_tools")
    @classmethod
    def _named_once(cls, value: list[ClientTool] | None) -> list[ClientTool] | None:
        check_client_tools(value)
        return value

    def message(self) -> ChatMessage:
        return ChatMessage(
            type="chat",
            content=self.query,
            agent_mode=True,
            agent_max_steps=self.max_steps,
            agent_budget=self.budget,
            selected_tools=self.selected_tools,
            loop_strategy=self.loop_strategy,
            model=self.model,
            save_chat=self.save_chat,
            include_history=self.include_history,
            system_prompt=self.system_prompt,
            replace_from=self.replace_from,
            selected_data_sources=self.selected_data_sources,
            client_tools=self.client_tools,
            when_busy=self.when_busy,
        )


class _Follow:
    """What a stream learns of its run from the frames going by."""

    def __init__(self, run_id: str | None) -> None:
        self.run_id = run_id
        self.steps = 0
        self.reason: str | None = None
        self.tools: list[str] = []
        self.answer: str | None = None
        self.errors: list[dict[str, Any]] = []
        self.ended = False

    def see(self, frame: Envelope) -> None:
        if self.run_id is None or frame.run_id != self.run_id:
            return
        if isinstance(frame, ToolStart):
            if frame.tool_name not in self.tools:
                self.tools.append(frame.tool_name)
        elif isinstance(frame, ChatResponse):
            self.answer = frame.message
        elif isinstance(frame, Error):
            self.errors.append(
                {"error_type": frame.error_type, "message": frame.message}
            )
        elif isinstance(frame, AgentError):
            self.errors.append({"error_type": "agent_error", "message": frame.message})
        elif isinstance(frame, AgentCompletion):
            self.steps, self.reason = frame.steps, frame.reason
        elif isinstance(frame, ResponseComplete):
            self.ended = True

    def done(self, outcome: dict[str, Any]) -> dict[str, Any]:
        """The `done` event's fields (`outcome`: the owner's account)."""
        return {
            "run_id": self.run_id,
            "steps": self.steps,
            "reason": self.reason,
            "tools_used": self.tools,
            "message_id": outcome.get("assistant_message_id"),
        }


class AgentAPI:
    def routes(self) -> list[Route]:
        return [
            Route("/api/agent", self.agent, methods=["POST"]),
            Route(
                "/api/conversations/{conversation_id}/events",
                self.events,
                methods=["GET"],
            ),
        ]

    async def agent(self, request: Request) -> Response:
        service: ChatService = request.app.state.chat
        # as large as a chat frame may be on the WebSocket
        limit = service.settings.max_message_bytes
        body = await read_model(request, AgentRequest, "agent request", limit)
        resume_from = request.headers.get("last-event-id")
        if resume_from is not None:
            if body.conversation_id is None:
                raise Refused(
                    400,
                    "invalid_message",
                    "Last-Event-ID resumes a conversation: send its conversation_id",
                )
            return await self._resume(request, body.conversation_id, resume_from)
        return await connected(request, lambda: self._run(request, body), run=True)

    async def _run(self, request: Request, body: AgentRequest) -> Response:
        """A new run of `body` in the caller's conversation: its stream, or
        (not streaming) its outcome once it ends."""
        service: ChatService = request.app.state.chat
        session = await open_conversation(request, body.conversation_id, origin="api")
        subscription = session.outbox.subscribe(None)
        try:
            started = await service.dispatch_to(session, body.message())
        except ProtocolError as exc:
            session.outbox.unsubscribe(subscription)
            raise Refused.by_service(exc) from exc
        except NoSuchConversation as exc:
            session.outbox.unsubscribe(subscription)
            raise Refused(404, "not_found", f"no conversation {session.id!r}") from exc
        if "input_id" in started:  # a run works: the message is held
            session.outbox.unsubscribe(subscription)
            held = {"conversation_id": session.id, **started}
            return JSONResponse(held, status_code=202)
        follow = _Follow(started["run_id"])
        user_at = started["request_at"] if body.save_chat else None
        if not body.stream:
            return await _collect(request, session, subscription, follow, user_at)
        return EventSourceResponse(
            _stream(request, session, subscription, follow, detach=body.detach),
            ping=PING_S,
        )

    async def events(self, request: Request) -> Response:
        conversation_id = request.path_params["conversation_id"]
        return await self._resume(
            request, conversation_id, request.headers.get("last-event-id", "0")
        )

    async def _resume(
        self, request: Request, conversation_id: str, last_event_id: str
    ) -> Response:
        after = whole_number(last_event_id)
        if after is None:
            raise Refused(
                400, "invalid_message", "Last-Event-ID must be a seq (a whole number)"
            )
        return await connected(
            request, lambda: _replay(request, conversation_id, after), run=False
        )


async def _replay(request: Request, conversation_id: str, after: int) -> Response:
    """The frames after `after`, then the run in progress to its end."""
    session = await open_conversation(request, conversation_id)
    subscription = session.outbox.subscribe(after)
    follow = _Follow(session.run_id)
    return EventSourceResponse(
        _stream(request, session, subscription, follow, detach=True),
        ping=PING_S,
    )


async def _stream(
    request: Request,
    session: Target,
    subscription: Subscription,
    follow: _Follow,
    *,
    detach: bool,
) -> AsyncIterator[ServerSentEvent]:
    """The conversation's frames as events until the run ends, then
    `done`. Leaving early stops the run unless `detach`."""
    service: ChatService = request.app.state.chat
    try:
        while not follow.ended:
            if follow.run_id is None and not subscription.pending():
                break  # nothing running: the replay was all there is
            text = await subscription.next_frame()
            if text in (OVERFLOW, CLOSING):  # too slow, or a restart
                return
            frame = read_frame(text)
            follow.see(frame)
            yield ServerSentEvent(data=text, event=frame.type, id=str(frame.seq))
        outcome = await service.outcome_of(session, follow.run_id, follow.answer)
        done = {"conversation_id": session.id, **follow.done(outcome)}
        yield ServerSentEvent(data=json.dumps(done), event="done")
    finally:
        session.outbox.unsubscribe(subscription)
        session.touch()
        if not follow.ended and not detach:
            service.stop_soon(session, follow.run_id)


async def _collect(
    request: Request,
    session: Target,
    subscription: Subscription,
    follow: _Follow,
    user_at: int | None,
) -> Response:
    """Wait for the run's end; one JSON document. A client that goes away
    meanwhile stops the run."""
    service: ChatService = request.app.state.chat

    async def until_the_end() -> None:
        while not follow.ended:
            text = await subscription.next_frame()
            if text in (OVERFLOW, CLOSING):
                return
            follow.see(read_frame(text))

    try:
        await race(until_the_end(), gone(request))
    finally:
        session.outbox.unsubscribe(subscription)
        session.touch()
        if not follow.ended:
            service.stop_soon(session, follow.run_id)
    if not follow.ended:
        raise restarting()
    outcome = await service.outcome_of(session, follow.run_id, follow.answer)
    return JSONResponse(_document(session.id, follow, outcome, user_at))


def _document(
    conversation_id: str,
    follow: _Follow,
    outcome: dict[str, Any],
    user_at: int | None,
) -> dict[str, Any]:
    return {
        "conversation_id": conversation_id,
        "run_id": follow.run_id,
        "user_message": {
            "id": user_at,
            "role": "user",
            "content": outcome.get("request", ""),
        },
        "assistant_message": {
            "id": outcome.get("assistant_message_id"),
            "role": "assistant",
            "content": follow.answer,
        },
        "agent_metadata": {
            "steps": follow.steps,
            "reason": follow.reason,
            "tools_used": follow.tools,
            "execution_trace": outcome.get("trace", []),
            "usage": outcome.get("usage", {}),
            "errors": follow.errors,
        },
    }
