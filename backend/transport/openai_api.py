"""An OpenAI-compatible endpoint: `POST /v1/chat/completions`, `GET /v1/models`.

Each loopwire loop strategy is a model, `loopwire-<strategy>` (optionally
`loopwire-<strategy>:<upstream>`, one of the server's `LOOPWIRE_LLM_MODELS`);
a request starts a loopwire run as `POST /api/agent` does (the same
`ChatService` calls, limits, auth and ownership), and its frames are told as
OpenAI's completion or chunk stream (`openai_chunks`): the loop's phases as
`reasoning_content`, the answer as `content`, usage at the end.

Conversations: a client names one with the `X-Loopwire-Conversation` header
or `metadata.conversation_id` (every response names its conversation in
that header and in `system_fingerprint`). Then only the last user message
counts: it answers the run's pending question, decides its pending approval
(yes approves, anything else declines), or starts the conversation's next
run. Without an id each request is a new conversation whose run is given
the earlier messages before the new one, and an approval is declined at
once: a stateless client cannot be asked. Errors are OpenAI's
`{"error": {"message", "type", "code", "param"}}`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
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
    AgentRequestInput,
    AgentUserInputMessage,
    ChatMessage,
    ClientMessage,
    Envelope,
    ToolApprovalRequest,
    ToolApprovalResponseMessage,
    server_message_adapter,
)
from backend.text import shorten
from backend.transport.bodies import describe, read_json
from backend.transport.openai_chunks import (
    USAGE_FIELDS,
    Delta,
    Head,
    Reply,
    chunk,
    completion,
    usage_between,
    usage_chunk,
)
from backend.transport.openai_requests import (
    MODEL_PREFIX,
    NEW,
    REFUSALS,
    ChatCompletionRequest,
    approves,
    conversation_of,
    parse_model,
    system_prompt_problem,
)
from backend.transport.refusal import Refused, openai_body
from backend.transport.run_streams import PING_S, connected, gone, open_conversation

CONVERSATION_HEADER = "X-Loopwire-Conversation"
STATELESS = (
    "this client sent no conversation id, so it cannot be asked; "
    f"send {CONVERSATION_HEADER} to answer approvals"
)
Pause = AgentRequestInput | ToolApprovalRequest
NO_USAGE = dict.fromkeys(USAGE_FIELDS, 0)
PROBLEMS = 8
"""Validation problems named in a 400 (a union's each cost one or two)."""


def routes() -> list[Route]:
    return [
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
    ]


async def models(request: Request) -> Response:
    """Each loop strategy as a model; with several upstream models, each
    strategy on each of them too."""
    info = request.app.state.chat.server_info()
    names = [MODEL_PREFIX + s for s in info.strategies]
    if len(info.models) > 1:
        names += [
            f"{MODEL_PREFIX}{s}:{m}" for s in info.strategies for m in info.models
        ]
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "loopwire"}
        for name in names
    ]
    return JSONResponse({"object": "list", "data": data})


def error_body(exc: Refused) -> dict[str, Any]:
    """A route's refusal in OpenAI's shape (as the middleware's are)."""
    param = exc.fields[0]["field"] if exc.fields else None
    return openai_body(exc.status, exc.error_type, exc.message, param)


async def completions(request: Request) -> Response:
    try:
        return await _completions(request)
    except Refused as exc:
        return JSONResponse(error_body(exc), exc.status, headers=exc.headers)


@dataclass(frozen=True)
class _Ask:
    """A checked request: what it asks of which conversation."""

    body: ChatCompletionRequest
    strategy: str
    upstream: str | None
    conversation_id: str | None
    """The conversation to continue (None: a new one)."""
    stateless: bool
    """No id at all: the client cannot answer a question or an approval."""


async def _completions(request: Request) -> Response:
    service: ChatService = request.app.state.chat
    limit = service.settings.max_message_bytes
    body = await _read(request, max(4 * limit, 1 << 20))
    ask = _checked(request, service, body)
    if ask.conversation_id is None:  # a new conversation
        return await connected(request, lambda: _start(request, ask, None), run=True)
    session = await open_conversation(request, ask.conversation_id)
    pause = _pause_of(session)
    if pause is None:
        return await connected(request, lambda: _start(request, ask, session), run=True)
    return await connected(
        request, lambda: _resume(request, ask, session, pause), run=False
    )


async def _read(request: Request, limit: int) -> ChatCompletionRequest:
    """The body, within `limit` bytes; 400 naming its first bad fields."""
    data = await read_json(request, limit)
    try:
        return ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        fields, problems = describe(exc, most=PROBLEMS)
        message = f"invalid chat completion request: {problems}"
        raise Refused(400, "invalid_message", message, fields=fields) from exc


def _checked(
    request: Request, service: ChatService, body: ChatCompletionRequest
) -> _Ask:
    parsed = parse_model(body.model)
    if parsed is None or parsed[0] not in service.server_info().strategies:
        raise Refused(
            404,
            "model_not_found",
            f"no model {shorten(body.model, 80)!r} here; GET /v1/models lists them",
        )
    allowed = service.settings.client_system_prompts
    problem = system_prompt_problem(body.system_prompt, allowed)
    if problem is not None:
        raise Refused(
            400, "invalid_message", problem, fields=_field("messages", problem)
        )
    try:
        named = conversation_of(request.headers.get(CONVERSATION_HEADER), body)
    except ValueError as exc:
        raise Refused(400, "invalid_message", str(exc)) from exc
    upstream = parsed[1]
    if upstream is not None and upstream not in service.models:
        raise Refused(
            404,
            "model_not_found",
            f"no upstream model {shorten(upstream, 80)!r} here; "
            "GET /v1/models lists them",
        )
    continued = None if named in (None, NEW) else named
    return _Ask(body, parsed[0], upstream, continued, stateless=named is None)


def _field(name: str, problem: str) -> list[dict[str, str]]:
    return [{"field": name, "problem": problem}]


def _pause_of(session: Target) -> Pause | None:
    """The question or approval the conversation's run waits on: its last frame."""
    run_id = session.run_id
    if run_id is None:
        return None
    for _seq, text in reversed(session.outbox.after(0)):
        if run_id not in text:
            continue
        frame = server_message_adapter.validate_json(text)
        if frame.run_id == run_id:
            return frame if isinstance(frame, Pause) else None
    return None


async def _start(request: Request, ask: _Ask, session: Target | None) -> Response:
    """A new run: in `session`, or in a new conversation given the history."""
    service: ChatService = request.app.state.chat
    body = ask.body
    content = _content(service, body, history=session is None)
    message = ChatMessage(
        type="chat",
        content=content,
        agent_mode=True,
        loop_strategy=ask.strategy,
        model=ask.upstream,
        temperature=body.temperature,
        system_prompt=body.system_prompt,
    )
    if session is None:
        session = await open_conversation(request, None, origin="openai")
    return await _follow(request, ask, session, message, None)


def _content(
    service: ChatService, body: ChatCompletionRequest, *, history: bool
) -> str:
    """The run's message: the last one, after the earlier ones (`history`),
    within `max_message_bytes` as a chat frame is."""
    limit = service.settings.max_message_bytes
    content = body.with_history(limit if history else 0, limit)
    if content is None:
        raise Refused(
            413, "invalid_message", f"the last message is over {limit} bytes, the limit"
        )
    return content


async def _resume(
    request: Request, ask: _Ask, session: Target, pause: Pause
) -> Response:
    """The last message answers the pending question or decides the approval."""
    answer = ask.body.last
    message: ClientMessage
    if isinstance(pause, AgentRequestInput):
        refusal = REFUSALS.get(answer.strip())
        message = AgentUserInputMessage(
            type="agent_user_input",
            content="" if refusal else answer,
            question_id=pause.question_id,
            action=refusal,
        )
    else:
        approved = approves(answer)
        message = ToolApprovalResponseMessage(
            type="tool_approval_response",
            tool_call_id=pause.tool_call_id,
            approved=approved,
            reason=None if approved else shorten(answer, 2000),
            in_doubt=True if approved and pause.in_doubt else None,
        )
    return await _follow(request, ask, session, message, session.run_id)


async def _follow(
    request: Request,
    ask: _Ask,
    session: Target,
    message: ClientMessage,
    run_id: str | None,
) -> Response:
    """Send `message` to the conversation and answer with the reply of its
    run (`run_id`, or the one it starts) until it ends or pauses."""
    service: ChatService = request.app.state.chat
    before = NO_USAGE
    if run_id is not None:
        before = (await service.outcome_of(session, run_id, None)).get("usage", before)
    subscription = session.outbox.subscribe(None)
    try:
        started = await service.dispatch_to(session, message)
    except ProtocolError as exc:
        session.outbox.unsubscribe(subscription)
        raise Refused.by_service(exc) from exc
    except NoSuchConversation as exc:
        session.outbox.unsubscribe(subscription)
        raise Refused(404, "not_found", f"no conversation {session.id!r}") from exc
    run_id = started.get("run_id", run_id)
    follow = _Following(
        service,
        session,
        subscription,
        Reply(run_id, stateless=ask.stateless),
        before,
    )
    head = Head(f"chatcmpl-{run_id}", int(service.now()), ask.body.model, session.id)
    headers = {CONVERSATION_HEADER: session.id}
    if ask.body.stream:
        chunks = _chunks(follow, head, ask.body.include_usage)
        return EventSourceResponse(chunks, ping=PING_S, headers=headers)
    await follow.whole(request)
    usage = await follow.usage()
    return JSONResponse(completion(head, follow.reply, usage), headers=headers)


@dataclass
class _Following:
    """One reply following its run through a subscription."""

    service: ChatService
    session: Target
    subscription: Subscription
    reply: Reply
    before: dict[str, Any]

    async def deltas(self) -> AsyncIterator[Delta]:
        """What each frame adds, until the reply ends; a stateless run's
        approvals declined as they come."""
        while not self.reply.over:
            text = await self.subscription.next_frame()
            if text in (OVERFLOW, CLOSING):
                raise Refused(
                    503,
                    "server_restarting" if text == CLOSING else "unavailable",
                    "the reply was cut off (the server is restarting, or the "
                    "client read too slowly); the run's conversation goes on",
                )
            frame: Envelope = server_message_adapter.validate_json(text)
            delta = self.reply.see(frame)
            if self.reply.decline is not None:
                await self._decline(self.reply.decline)
            if delta:
                yield delta

    async def _decline(self, tool_call_id: str) -> None:
        message = ToolApprovalResponseMessage(
            type="tool_approval_response",
            tool_call_id=tool_call_id,
            approved=False,
            reason=STATELESS,
        )
        with contextlib.suppress(ProtocolError):  # decided already (a timeout)
            await self.service.dispatch_to(self.session, message)

    async def whole(self, request: Request) -> None:
        """Follow to the reply's end; a client that goes away meanwhile stops it."""

        async def until_the_end() -> None:
            async for _ in self.deltas():
                pass

        try:
            await race(until_the_end(), gone(request))
        finally:
            self.settle()

    async def usage(self) -> dict[str, int]:
        """The tokens this reply's part of the run spent."""
        after = self.reply.usage
        if after is None:
            outcome = await self.service.outcome_of(
                self.session, self.reply.run_id, None
            )
            after = outcome.get("usage", NO_USAGE)
        return usage_between(self.before, after)

    def settle(self) -> None:
        """Let go of the run: stopped unless it ended or waits for its
        client (a stateless client's question: nobody can answer it)."""
        reply, session = self.reply, self.session
        session.outbox.unsubscribe(self.subscription)
        session.touch()
        if not reply.over or (reply.question and reply.stateless):
            self.service.stop_soon(session, reply.run_id)


def _event(data: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps(data, ensure_ascii=False))


async def _chunks(
    follow: _Following, head: Head, include_usage: bool
) -> AsyncIterator[ServerSentEvent]:
    """The reply as OpenAI's chunk stream; a client that goes away stops it."""
    try:
        yield _event(chunk(head, {"role": "assistant", "content": ""}))
        try:
            async for delta in follow.deltas():
                yield _event(chunk(head, _fields(delta)))
        except Refused as exc:
            yield _event(error_body(exc))
            return
        usage = await follow.usage()
        yield _event(chunk(head, {}, follow.reply.finish_reason))
        if include_usage:
            yield _event(usage_chunk(head, usage))
        yield ServerSentEvent(data="[DONE]")
    finally:
        follow.settle()


def _fields(delta: Delta) -> dict[str, str]:
    fields = {}
    if delta.reasoning:
        fields["reasoning_content"] = delta.reasoning
    if delta.content:
        fields["content"] = delta.content
    return fields
