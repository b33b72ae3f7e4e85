"""What every HTTP adapter of a run shares (`/api/agent`, AG-UI, the AI
SDK's UI message stream, the OpenAI-compatible endpoint): the caller's
conversation opened (`open_conversation`), a connection and a run held
against the caller's limits (`connected`), the client's leaving noticed
(`gone`), a frame read back as its protocol model (`read_frame`), and how
often a quiet stream sends a keep-alive (`PING_S`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from backend.chat.service import ChatService
from backend.chat.target import Target
from backend.errors import NoSuchConversation, ProtocolError
from backend.protocol import server_message_adapter
from backend.store.base import StoreError
from backend.transport.auth import user_of
from backend.transport.limits import ClientLimits, Limited
from backend.transport.refusal import Refused

PING_S = 15.0
"""A stream with nothing to say sends a keep-alive comment this often."""


def read_frame(text: str) -> Any:
    """A frame's text read back as its protocol model (an `Envelope` and
    its payload): as fast as `json.loads`, and typed."""
    return server_message_adapter.validate_json(text)


async def open_conversation(
    request: Request,
    conversation_id: str | None,
    *,
    create: bool = False,
    named: bool = False,
    origin: str = "unknown",
) -> Target:
    """The caller's conversation (a new one for None, or if `create`: with
    the id `conversation_id` if `named`, tagged with `origin`: the kind of
    client); 404 for one that is not the caller's, 503 while the server
    restarts or the store is down."""
    service: ChatService = request.app.state.chat
    if service.draining:
        raise restarting()
    try:
        session, _ = await service.open_session(
            conversation_id,
            owner=user_of(request),
            create=create or conversation_id is None,
            named=named,
            origin=origin,
        )
    except NoSuchConversation as exc:
        raise Refused(404, "not_found", f"no conversation {conversation_id!r}") from exc
    except ProtocolError as exc:
        raise Refused(503, exc.error_type, str(exc)) from exc
    except StoreError as exc:
        raise Refused(
            503, "store_error", "the conversation store is unavailable; try later"
        ) from exc
    return session


def restarting() -> Refused:
    return Refused(503, "server_restarting", "the server is restarting")


async def connected(
    request: Request, respond: Callable[[], Awaitable[Response]], *, run: bool
) -> Response:
    """`respond()`, holding one of the caller's connections until what it
    answers is sent (a stream: until it ends); spending one of the caller's
    runs first if it starts one (`run`). 429 past either limit."""
    limits: ClientLimits = request.app.state.limits
    key = limits.key(request.scope, user_of(request))
    try:
        limits.connect(key)
    except Limited as exc:
        raise Refused.limited(exc) from exc
    try:
        if run:
            limits.start_run(key)
        response = await respond()
    except Limited as exc:
        limits.leave(key)
        raise Refused.limited(exc) from exc
    except BaseException:
        limits.leave(key)
        raise
    return _held(response, lambda: limits.leave(key))


class _Held(Response):
    """A response that holds one of its client's connections until it has
    been sent (or the client went away)."""

    def __init__(self, inner: Response, release: Callable[[], None]) -> None:
        self.inner = inner
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.inner(scope, receive, send)
        finally:
            self.release()


def _held(response: Response, release: Callable[[], None]) -> Response:
    """`release` once `response` is sent: at once for one already complete."""
    if isinstance(response, EventSourceResponse):
        return _Held(response, release)
    release()
    return response


async def gone(request: Request) -> None:
    """Returns when the client has gone away (its body is already read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
