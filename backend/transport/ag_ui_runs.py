"""The AG-UI run behind `POST /api/ag-ui` (`transport/ag_ui.py`, which
says what it does): the input read, the conversation's run started, answered
or followed on, and its frames streamed as AG-UI events until it ends or
pauses.

This module and the `ag_ui` package's models it uses are imported by the
first AG-UI request, not when the server starts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from backend.chat.service import ChatService
from backend.chat.subscription import CLOSING, OVERFLOW, Subscription
from backend.chat.target import Target
from backend.errors import NoSuchConversation, ProtocolError
from backend.protocol import (
    AgentUserInputMessage,
    ChatMessage,
    ClientMessage,
)
from backend.transport.ag_ui_events import AgUiRun
from backend.transport.ag_ui_input import (
    Props,
    answer_of,
    client_tools_of,
    conversation_of,
    props_of,
    said,
    tool_results,
)
from backend.transport.bodies import read_model
from backend.transport.refusal import Refused
from backend.transport.run_streams import (
    PING_S,
    connected,
    open_conversation,
    read_frame,
)


async def _thread(request: Request, thread_id: str, *, create: bool) -> Target:
    """The thread's conversation: the caller's own, or (`create`) a new one
    for a thread loopwire does not know, with the thread's id if it spells
    one; 404 for another user's."""
    conversation = conversation_of(thread_id)
    if conversation is None and not create:
        raise Refused(404, "not_found", f"no conversation {thread_id[:64]!r}")
    return await open_conversation(
        request,
        conversation,
        create=create,
        named=conversation is not None,
        origin="ag-ui",
    )


class AgUiAPI:
    async def run(self, request: Request) -> Response:
        service: ChatService = request.app.state.chat
        limit = service.settings.max_message_bytes
        body = await read_model(request, RunAgentInput, "AG-UI run input", limit)
        props = props_of(body)
        if body.resume:
            answers = [answer_of(entry, body) for entry in body.resume]
            return await connected(
                request, lambda: self._follow(request, body, props, answers), run=False
            )
        results = tool_results(body)
        if results:
            return await connected(
                request, lambda: self._follow(request, body, props, results), run=False
            )
        query = said(body)
        return await connected(
            request, lambda: self._start(request, body, props, query), run=True
        )

    async def _start(
        self, request: Request, body: RunAgentInput, props: Props, query: str
    ) -> Response:
        """A new run of the user's message; or, while the conversation's run
        waits for an answer, that message answers it."""
        service: ChatService = request.app.state.chat
        session = await _thread(request, body.thread_id, create=True)
        message = ChatMessage(
            type="chat",
            content=query,
            agent_mode=True,
            agent_max_steps=props.max_steps,
            selected_tools=props.selected_tools,
            loop_strategy=props.loop_strategy,
            model=props.model,
            client_tools=client_tools_of(body),
        )
        subscription = session.outbox.subscribe(None)
        try:
            started = await _dispatch(service, session, message)
        except BaseException:
            session.outbox.unsubscribe(subscription)
            raise
        if started is None:  # busy: the run may wait for an answer
            answer = AgentUserInputMessage(type="agent_user_input", content=query)
            try:
                return await self._resumed(
                    request, body, props, session, [answer], subscription
                )
            except Refused as refused:
                if refused.error_type != "no_pending_input":
                    raise
                raise Refused(409, "busy", "a run is in progress") from refused
        run = AgUiRun(body, started["run_id"])
        return _response(request, session, subscription, run, props.detach)

    async def _follow(
        self,
        request: Request,
        body: RunAgentInput,
        props: Props,
        answers: list[ClientMessage],
    ) -> Response:
        """The paused run of the thread, answered, followed to its next
        pause or its end."""
        session = await _thread(request, body.thread_id, create=False)
        subscription = session.outbox.subscribe(None)
        return await self._resumed(request, body, props, session, answers, subscription)

    async def _resumed(
        self,
        request: Request,
        body: RunAgentInput,
        props: Props,
        session: Target,
        answers: list[ClientMessage],
        subscription: Subscription,
    ) -> Response:
        service: ChatService = request.app.state.chat
        loopwire_run = session.run_id
        try:
            for answer in answers:
                await _act(service, session, answer)
        except BaseException:
            session.outbox.unsubscribe(subscription)
            raise
        run = AgUiRun(body, loopwire_run)
        return _response(request, session, subscription, run, props.detach)


async def _dispatch(
    service: ChatService, session: Target, message: ChatMessage
) -> dict[str, Any] | None:
    """`message` dispatched: what the service says; None if busy."""
    try:
        return await _act(service, session, message)
    except Refused as refused:
        if refused.error_type == "busy":
            return None
        raise


async def _act(
    service: ChatService, session: Target, message: ClientMessage
) -> dict[str, Any]:
    try:
        return await service.dispatch_to(session, message)
    except ProtocolError as exc:
        raise Refused.by_service(exc) from exc
    except NoSuchConversation as exc:
        raise Refused(404, "not_found", f"no conversation {session.id!r}") from exc


def _response(
    request: Request,
    session: Target,
    subscription: Subscription,
    run: AgUiRun,
    detach: bool,
) -> Response:
    return EventSourceResponse(
        _events(request, session, subscription, run, detach=detach), ping=PING_S
    )


async def _events(
    request: Request,
    session: Target,
    subscription: Subscription,
    run: AgUiRun,
    *,
    detach: bool,
) -> AsyncIterator[bytes]:
    """The AG-UI run's events, encoded, until it finishes or pauses.
    Leaving early stops the loopwire run unless `detach`."""
    service: ChatService = request.app.state.chat
    encoder = EventEncoder()
    try:
        yield encoder.encode(run.started(session.id)).encode()
        while not run.ended:
            text = await subscription.next_frame()
            if text in (OVERFLOW, CLOSING):  # too slow, or a restart
                for event in run.cut_off(
                    "the stream was cut off; send the input again"
                ):
                    yield encoder.encode(event).encode()
                return
            for event in run.see(read_frame(text)):
                yield encoder.encode(event).encode()
    finally:
        session.outbox.unsubscribe(subscription)
        session.touch()
        if not run.ended and not detach:
            service.stop_soon(session, run.loopwire_run)


AG_UI = AgUiAPI()
"""The handler `transport/ag_ui.py` hands each request to (it keeps no state)."""
