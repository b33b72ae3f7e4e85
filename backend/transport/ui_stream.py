"""The AI SDK's UI message stream: `useChat` drives loopwire's runs.

- `POST /api/ui-stream` takes what `DefaultChatTransport` sends
  (`ui_stream_body.py`) and answers the run as the UI message stream
  protocol over SSE (`x-vercel-ai-ui-message-stream: v1`; the parts in
  `ui_stream_parts.py`), ending with `data: [DONE]`. A new message starts a
  run exactly as `POST /api/agent` does (`ChatService.dispatch_to`, the
  same auth, limits and ownership); an answer to the run's question or
  decisions on its approval requests go to the waiting run instead, and
  the response follows that run on. A response ends where the run ends or
  waits for the user; a client that aborts before stops the run, unless
  its body asked `detach: true`.
- `GET /api/ui-stream/{chat_id}/stream` is the SDK's `resumeStream`: the
  run in progress in the conversation `chat_id`, replayed from its first
  frame the server still holds and followed on; 204 when nothing runs.

The chat's `id` is the conversation when it names one of the caller's;
else the conversation is the one the client's latest assistant message
says (its `metadata.conversationId`, from the `start` part), else a new one
— but never for an edit or a regenerate, which must find the conversation
whose runs they replace (400 naming the message otherwise).
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from backend.chat.service import ChatService
from backend.chat.subscription import CLOSING, OVERFLOW, Subscription
from backend.chat.target import Target
from backend.errors import NoSuchConversation, ProtocolError
from backend.protocol import AgentUserInputMessage, ToolApprovalResponseMessage
from backend.store.base import StoreError
from backend.transport.auth import user_of
from backend.transport.limits import ClientLimits
from backend.transport.refusal import Refused
from backend.transport.run_streams import (
    PING_S,
    connected,
    open_conversation,
    read_frame,
)
from backend.transport.ui_stream_body import (
    CONVERSATION_ID,
    SEGMENT,
    Answer,
    Ask,
    Decide,
    Edit,
    Turn,
    UIStreamRequest,
    read_body,
    turn_of,
)
from backend.transport.ui_stream_parts import Chunk, Parts

BODY_FACTOR = 16
"""The body may be this many chat frames long (`max_message_bytes`): it
carries the client's copy of the conversation. The message itself is
bounded as a chat frame is."""
HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "x-accel-buffering": "no"}
LOST = {
    OVERFLOW: "the client fell too far behind the run; resume the stream",
    CLOSING: "the server is restarting; resume the stream",
}


async def ui_stream(request: Request) -> Response:
    service: ChatService = request.app.state.chat
    limit = service.settings.max_message_bytes
    body = await read_body(request, limit * BODY_FACTOR)
    turn = turn_of(body)
    if not isinstance(turn, Decide) and len(turn.content.encode()) > limit:
        raise Refused(
            413, "invalid_message", f"the message is over {limit} bytes, the limit"
        )
    return await connected(request, lambda: _respond(request, body, turn), run=False)


async def resume(request: Request) -> Response:
    chat_id = request.path_params["chat_id"]
    return await connected(request, lambda: _resumed(request, chat_id), run=False)


async def _respond(request: Request, body: UIStreamRequest, turn: Turn) -> Response:
    session = await _conversation(request, body, _edited(body, turn))
    subscription = session.outbox.subscribe(None)
    try:
        parts = await _begin(request, body, session, turn)
    except BaseException:
        session.outbox.unsubscribe(subscription)
        raise
    return _response(request, session, subscription, parts, detach=body.detach)


async def _resumed(request: Request, chat_id: str) -> Response:
    """The conversation's run in progress, from its start; 204 for none."""
    nothing = Response(status_code=204)
    if not re.fullmatch(CONVERSATION_ID, chat_id):
        return nothing
    try:
        session = await open_conversation(request, chat_id)
    except Refused as exc:
        if exc.status == 404:
            return nothing
        raise
    if session.run_id is None:
        return nothing
    subscription = session.outbox.subscribe(0)
    parts = Parts(session.id, session.run_id)
    return _response(request, session, subscription, parts, detach=True)


def _edited(body: UIStreamRequest, turn: Turn) -> str | None:
    """The message an edit or a regenerate names (None for other turns)."""
    if isinstance(turn, Edit):
        return turn.message_id
    if isinstance(turn, Ask) and turn.replace_from is not None:
        return body.messageId or turn.replace_from
    return None


async def _conversation(
    request: Request, body: UIStreamRequest, edited: str | None
) -> Target:
    """The chat's conversation: its id's, the one its messages say, or new
    (not for an edit of the message `edited`: 400)."""
    if re.fullmatch(CONVERSATION_ID, body.id):
        try:
            return await open_conversation(request, body.id)
        except Refused as exc:
            if exc.status != 404:
                raise
    hint = body.conversation_hint()
    if hint is None and edited is not None:
        raise Refused(
            400,
            "invalid_message",
            f"cannot tell the conversation of message {edited!r}: the chat's id "
            "is not one of the caller's conversations and no assistant message "
            "names one (open the chat with its conversation's id: "
            "useChat({ id: conversationId }))",
        )
    if hint is None:
        return await open_conversation(request, None, origin="ai-sdk")
    if not re.fullmatch(CONVERSATION_ID, hint):
        raise Refused(
            400, "invalid_message", "metadata.conversationId is not a conversation id"
        )
    return await open_conversation(request, hint)


async def _begin(
    request: Request, body: UIStreamRequest, session: Target, turn: Turn
) -> Parts:
    """Dispatch what the request asks; the parts of the run it goes on with."""
    service: ChatService = request.app.state.chat
    run_id = session.run_id
    if isinstance(turn, Decide):
        if run_id is None:
            raise Refused(409, "no_pending_approval", "no run waits for an approval")
        await _decide(service, session, turn.decisions)
        return Parts(session.id, run_id, turn.message_id, continued=True)
    if isinstance(turn, Answer) and run_id is not None:
        answer = AgentUserInputMessage(
            type="agent_user_input",
            content=turn.content,
            question_id=turn.question_id,
            action=turn.action,
        )
        try:
            await service.dispatch_to(session, answer)
        except ProtocolError as exc:
            if exc.error_type != "no_pending_input" or turn.refusal:
                raise Refused.by_service(exc) from exc
        else:
            # a message of its own, after the user's answer
            segment = turn.question_id or uuid.uuid4().hex
            return Parts(session.id, run_id, f"{run_id}{SEGMENT}{segment}")
    if isinstance(turn, Answer) and turn.refusal:
        raise Refused(409, "no_pending_input", "no question waits to be declined")
    replace_from = await _replaced(service, session, turn)
    limits: ClientLimits = request.app.state.limits
    limits.start_run(limits.key(request.scope, user_of(request)))
    try:
        started = await service.dispatch_to(
            session, body.chat(turn.content, replace_from)
        )
    except ProtocolError as exc:
        raise Refused.by_service(exc) from exc
    except NoSuchConversation as exc:
        raise Refused(404, "not_found", f"no conversation {session.id!r}") from exc
    return Parts(session.id, started["run_id"])


async def _replaced(service: ChatService, session: Target, turn: Turn) -> str | None:
    """The run a chat replaces (`replace_from`): the one a regenerate names,
    or the one the edited message started."""
    if isinstance(turn, Ask):
        return turn.replace_from
    if not isinstance(turn, Edit):
        return None
    return turn.run_in(await _saved_runs(service, session), session.id)


async def _saved_runs(service: ChatService, session: Target) -> list[str]:
    """The ids of the conversation's saved runs, oldest first (what it has
    pending saved first, wherever it is in memory)."""
    if service.store is None:
        raise Refused(
            400, "invalid_message", "this server keeps no runs, so none can be edited"
        )
    with contextlib.suppress(ProtocolError, NoSuchConversation):
        await service.flush_session(session.id, session.owner)
    try:
        runs = await service.store.runs(session.id)
    except StoreError as exc:
        raise Refused(
            503, "store_error", "the conversation store is unavailable; try later"
        ) from exc
    return [run.id for run in sorted(runs, key=lambda run: (run.started_at, run.id))]


async def _decide(
    service: ChatService, session: Target, decisions: list[ToolApprovalResponseMessage]
) -> None:
    """Each decision to the run; those it no longer waits on (sent before)
    are passed over, but one at least must be taken."""
    refused: ProtocolError | None = None
    taken = 0
    for decision in decisions:
        try:
            await service.dispatch_to(session, decision)
            taken += 1
        except ProtocolError as exc:
            if exc.error_type != "no_pending_approval":
                raise Refused.by_service(exc) from exc
            refused = refused or exc
    if not taken and refused is not None:
        raise Refused.by_service(refused) from refused


def _response(
    request: Request,
    session: Target,
    subscription: Subscription,
    parts: Parts,
    *,
    detach: bool,
) -> Response:
    headers = {**HEADERS, "x-loopwire-conversation-id": session.id}
    return EventSourceResponse(
        _stream(request, session, subscription, parts, detach=detach),
        ping=PING_S,
        headers=headers,
    )


def _event(chunk: Chunk) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps(chunk, separators=(",", ":")))


async def _stream(
    request: Request,
    session: Target,
    subscription: Subscription,
    parts: Parts,
    *,
    detach: bool,
) -> AsyncIterator[ServerSentEvent]:
    """The run's parts until it ends or waits for the user, then `[DONE]`.
    Leaving before stops the run unless `detach`."""
    service: ChatService = request.app.state.chat
    try:
        for chunk in parts.start():
            yield _event(chunk)
        while not parts.ended:
            if parts.paused is not None and not subscription.pending():
                for chunk in parts.pause():
                    yield _event(chunk)
                break
            text = await subscription.next_frame()
            if text in LOST:
                yield _event({"type": "error", "errorText": LOST[text]})
                return
            for chunk in parts.see(read_frame(text)):
                yield _event(chunk)
        yield ServerSentEvent(data="[DONE]")
    finally:
        session.outbox.unsubscribe(subscription)
        session.touch()
        if not parts.ended and not detach:
            service.stop_soon(session, parts.run_id)


def routes() -> list[Route]:
    return [
        Route("/api/ui-stream", ui_stream, methods=["POST"]),
        Route("/api/ui-stream/{chat_id}/stream", resume, methods=["GET"]),
    ]


REFUSALS = {
    "400": "a bad body (`fields` names each problem), a last message that "
    "asks for nothing loopwire does (a file part, an edited answer to a "
    "question, …), or an edit or regenerate whose conversation cannot be told",
    "401": "not signed in",
    "404": "the conversation the messages name is not the caller's, or the "
    "message an edit or a regenerate names started no saved run of it",
    "409": "busy, or no question or approval waiting for this",
    "413": "the body or the message is over the limit",
    "415": "the body is not application/json",
    "429": "too many runs or connections",
    "503": "the server is restarting or its store is unavailable",
}
"""The refusals of `POST /api/ui-stream`, by status (for the OpenAPI document)."""


def ui_stream_paths() -> dict[str, Any]:
    """The two routes in the OpenAPI document (`transport/openapi.py`)."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    refusals = REFUSALS
    stream = {"text/event-stream": {"schema": {"type": "string"}}}
    body = {"$ref": "#/components/schemas/UIStreamRequest"}
    return {
        "/api/ui-stream": {
            "post": {
                "summary": "Run the agent for the AI SDK's useChat "
                "(UI message stream; docs/integrations.md)",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                },
                "responses": {
                    "200": {
                        "description": "the run's UI message stream parts, "
                        "to `finish` and `data: [DONE]` (the run ended, or "
                        "waits for an answer or an approval)",
                        "content": stream,
                    },
                    **{
                        code: {"description": meaning, "content": error}
                        for code, meaning in refusals.items()
                    },
                },
            }
        },
        "/api/ui-stream/{chat_id}/stream": {
            "get": {
                "summary": "Resume the chat's stream (the SDK's resumeStream)",
                "parameters": [
                    {
                        "name": "chat_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "the conversation's id",
                    }
                ],
                "responses": {
                    "200": {
                        "description": "the run in progress, replayed from "
                        "its start, then followed",
                        "content": stream,
                    },
                    "204": {"description": "no run in progress in this chat"},
                    "401": {"description": "not signed in", "content": error},
                    "429": {"description": refusals["429"], "content": error},
                },
            }
        },
    }
