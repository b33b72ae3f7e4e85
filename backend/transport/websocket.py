"""The WebSocket endpoint: one reader and one writer per socket.

The reader is the only code that receives from the socket; it decodes and
validates each frame and routes it to the `ChatService`. The writer drains
the session's subscription. Bad frames get an `error` frame naming the
problem and the connection stays open. Query parameters: `session_id` and
`last_seq` to resume. Who is connecting was settled before the handshake
(`transport/auth.py`); a session belongs to its user, and another user's
session id opens a new session, as an unknown one would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from backend.aio import race
from backend.bounded_json import load_json
from backend.chat.dispatcher import RESTARTING
from backend.chat.service import ChatService
from backend.chat.subscription import CLOSING, OVERFLOW, Subscription
from backend.chat.target import Target
from backend.errors import Busy, InvalidMessage, Unavailable, incident
from backend.identity.identities import Identities
from backend.notifications import outside_session
from backend.origins import ws_origin
from backend.protocol import (
    CLIENT_MESSAGE_TYPES,
    ChatMessage,
    ClientMessage,
    Error,
    ErrorType,
    client_message_adapter,
)
from backend.settings import Settings
from backend.store.base import StoreError
from backend.telemetry.metrics import Metrics
from backend.text import shorten
from backend.transport.auth import Credentials, credentials, identify, user_of
from backend.transport.bodies import describe
from backend.transport.instance import HEADER
from backend.transport.limits import Client, ClientLimits, Limited, TokenBucket
from backend.transport.refusal import handshake_refusal

log = logging.getLogger(__name__)

CLOSE_POLICY_VIOLATION = 1008
CLOSE_INTERNAL_ERROR = 1011
FLOODING = "too many messages; slow down and reconnect"
CLOSE_TIMEOUT_S = 5.0
"""How long the writer may take to flush what is queued before a close."""
CLOSE_SERVICE_RESTART = 1012
CLOSE_TRY_AGAIN_LATER = 1013
SIGNED_OUT = "signed out: this sign-in was revoked or has expired"
RECHECK_S = 30.0
"""How often an open socket's sign-in is checked again (besides at once
after each revocation on this instance)."""
MAX_PROBLEMS = 5
"""Validation problems named in one error; the rest are only counted."""


async def websocket_endpoint(websocket: WebSocket) -> None:
    """Authenticated already (`transport/auth.py`): the user is in the scope.
    The client's limits (`transport/limits.py`) admit the socket first."""
    service: ChatService = websocket.app.state.chat
    user = user_of(websocket)
    limits: ClientLimits = websocket.app.state.limits
    key = limits.key(websocket.scope, user)
    try:
        client = limits.connect(key)
    except Limited as exc:
        await limits.hold(key, exc)
        retry = exc.retry_after
        await handshake_refusal(
            websocket.scope,
            websocket.receive,
            websocket.send,
            429,
            exc.error_type,
            str(exc),
            [(b"retry-after", retry.encode())] if retry else (),
        )
        return
    identities: Identities = websocket.app.state.identities
    presented = credentials(Headers(scope=websocket.scope))
    signed_in = None
    if identities.enabled and presented is not None:
        signed_in = SignedIn(identities, presented)
    try:
        await _connect(websocket, service, user, Quota(limits, key, client), signed_in)
    finally:
        limits.leave(key)


@dataclass(frozen=True, slots=True)
class SignedIn:
    """What a socket was opened with, checked again while it is open: at
    each revocation here and every `RECHECK_S` (a revocation elsewhere, an
    expired sign-in or JWT), so a revoked sign-in's sockets are closed."""

    identities: Identities
    presented: Credentials

    async def until_signed_out(
        self, subscription: Subscription, done: asyncio.Event
    ) -> None:
        """Close the socket (through `subscription`) once its sign-in is no
        longer good; return when `done` is set. It ends only between checks:
        a query cancelled midway would cost the store its connection."""
        revoked = self.identities.signins.revoked
        while True:
            won = await race(revoked(), done.wait(), limit_s=RECHECK_S)
            if won is not None and won[0] == 1:
                return
            try:
                still = await identify(self.identities, self.presented)
            except StoreError as exc:  # not known to be revoked: kept open
                log.warning("cannot check a socket's sign-in: %s", exc)
                continue
            if still is None:
                subscription.close(CLOSE_POLICY_VIOLATION, SIGNED_OUT)
                return


@dataclass(frozen=True, slots=True)
class Quota:
    """What a socket's client may still do: its limits, its key, its entry
    (None: not limited)."""

    limits: ClientLimits
    key: str | None
    client: Client | None

    @property
    def shared(self) -> TokenBucket | None:
        """The client's frame bucket, spent by all its sockets."""
        return self.client.frames if self.client is not None else None


async def _connect(
    websocket: WebSocket,
    service: ChatService,
    user: str,
    quota: Quota | None,
    signed_in: SignedIn | None = None,
) -> None:
    await websocket.accept(headers=[(HEADER, instance_id(service))])
    if service.draining:
        await _refuse(websocket, CLOSE_SERVICE_RESTART, RESTARTING, "server_restarting")
        return
    session_id = websocket.query_params.get("session_id") or None
    last_seq = websocket.query_params.get("last_seq")
    problem = _bad_resume(session_id, last_seq)
    if problem is not None:
        await _refuse(websocket, CLOSE_POLICY_VIOLATION, problem, "invalid_message")
        return
    try:
        origin = ws_origin(websocket.query_params.get("client"))
        session, resumed = await service.open_session(
            session_id, owner=user, origin=origin
        )
    except Busy as exc:
        await _refuse(websocket, CLOSE_TRY_AGAIN_LATER, str(exc), "busy")
        return
    except Unavailable as exc:
        await _refuse(websocket, CLOSE_TRY_AGAIN_LATER, str(exc), "unavailable")
        return
    except StoreError as exc:
        log.error("cannot open session %s: %s", session_id, exc)
        reason = "the conversation store is unavailable; try again later"
        await _refuse(websocket, CLOSE_TRY_AGAIN_LATER, reason, "store_error")
        return
    after = (int(last_seq) if last_seq else 0) if resumed else None
    subscription = session.outbox.subscribe(after)
    try:
        await websocket.send_text(service.ready_frame(session, resumed=resumed))
        service.telemetry.metrics.frames_sent(1)
        await _serve(websocket, service, session, subscription, quota, signed_in)
    finally:
        session.outbox.unsubscribe(subscription)
        session.touch()


async def _serve(
    websocket: WebSocket,
    service: ChatService,
    session: Target,
    subscription: Subscription,
    quota: Quota | None,
    signed_in: SignedIn | None = None,
) -> None:
    async with asyncio.TaskGroup() as tasks:
        metrics = service.telemetry.metrics
        writer = tasks.create_task(_write(websocket, subscription, metrics))
        done: asyncio.Event | None = None  # only a signed-in client's watch needs it
        if signed_in is not None:
            done = asyncio.Event()
            tasks.create_task(signed_in.until_signed_out(subscription, done))
        try:
            closing = await _read(websocket, service, session, quota)
            if closing is not None:  # the writer closes after what is queued
                subscription.close(*closing)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(CLOSE_TIMEOUT_S):
                        await asyncio.shield(writer)
        finally:
            writer.cancel()
            if done is not None:
                done.set()


async def _write(
    websocket: WebSocket, subscription: Subscription, metrics: Metrics
) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        while True:
            text = await subscription.next_frame()
            if text == OVERFLOW:
                reason = "client too slow; reconnect with session_id and last_seq"
                await websocket.close(code=CLOSE_TRY_AGAIN_LATER, reason=reason)
                return
            if text == CLOSING:
                code, reason = subscription.closing
                await websocket.close(code=code, reason=reason[:120])
                return
            await websocket.send_text(text)
            metrics.frames_sent(1)


async def _read(
    websocket: WebSocket,
    service: ChatService,
    session: Target,
    quota: Quota | None = None,
) -> tuple[int, str] | None:
    """Receive until the client leaves (None) or must be closed: then the
    code and reason, for the writer to close with after the queued frames.

    Frames pass this socket's bucket and, when there is one, the client's
    (spent by all their sockets); a `chat` spends one of the client's runs."""
    shared = quota.shared if quota is not None else None
    settings = service.settings
    limit = settings.max_message_bytes
    bucket = TokenBucket(settings.ws_messages_per_s, settings.ws_message_burst)
    # refused frames, at the same rate: a socket that keeps flooding is
    # closed even when a token now and then breaks its run of refusals
    excess = TokenBucket(settings.ws_messages_per_s, settings.ws_message_burst)
    refused = 0
    while True:
        try:
            event = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return None
        if event["type"] == "websocket.disconnect":
            return None
        if not (bucket.take() and (shared is None or shared.take())):
            refused += 1
            if not excess.take():  # a burst's worth past the rate: flooding
                return CLOSE_POLICY_VIOLATION, FLOODING
            if refused == 1:  # one error per burst, not one per frame
                service.telemetry.metrics.rate_limited("messages")
                await service.report(session, _too_many(settings), "rate_limited")
            continue
        refused = 0
        try:
            message = decode(event, limit)
        except InvalidMessage as exc:
            await service.report(session, str(exc), "invalid_message")
            await asyncio.sleep(0)  # one read can hold thousands of bad frames
            continue
        if quota is not None and isinstance(message, ChatMessage):
            try:
                quota.limits.start_run(quota.key)
            except Limited as exc:
                await service.report(session, str(exc), "rate_limited")
                continue
        try:
            await service.handle(session, message)
        except Exception:  # never a silent drop: log it, tell the client
            case = incident()
            log.exception(
                "session %s: handling %s failed (incident %s)",
                session.id,
                message.type,
                case,
            )
            return CLOSE_INTERNAL_ERROR, f"internal error (incident {case})"
        await asyncio.sleep(0)  # a busy socket lets the others have a turn


def instance_id(service: ChatService) -> bytes:
    """The `X-Loopwire-Instance` header's value: which instance answered."""
    return service.bus.instance_id.encode()


def _too_many(settings: Settings) -> str:
    return (
        f"too many messages: at most {settings.ws_messages_per_s:g} per second "
        f"per connection and {settings.user_messages_per_s:g} per user; this one "
        "and the next ones are dropped until the rate falls"
    )


def decode(event: Mapping[str, Any], limit: int) -> ClientMessage:
    """One received WebSocket event → a validated client message."""
    text = event.get("text")
    if text is None:
        raise InvalidMessage("binary frames are not supported; send JSON text frames")
    size = len(text.encode("utf-8"))
    if size > limit:
        raise InvalidMessage(f"frame is {size} bytes; the limit is {limit} bytes")
    return parse_message(load_json(text))


def parse_message(data: Any) -> ClientMessage:
    """Validate decoded JSON as a client message, with errors a person can act on."""
    if not isinstance(data, dict):
        raise InvalidMessage(
            f"a frame must be a JSON object, not {type(data).__name__}"
        )
    kind = data.get("type")
    if kind is None:
        raise InvalidMessage("the frame has no 'type' field")
    if kind not in CLIENT_MESSAGE_TYPES:
        known = ", ".join(CLIENT_MESSAGE_TYPES)
        raise InvalidMessage(
            f"unknown message type {shorten(repr(kind), 40)}; expected one of: {known}"
        )
    try:
        return client_message_adapter.validate_python(data)
    except ValidationError as exc:
        _, problems = describe(exc, most=MAX_PROBLEMS, tagged=True, whole="message")
        raise InvalidMessage(f"invalid {kind} message: {problems}") from exc


SESSION_ID = re.compile(r"[0-9a-f]{32}")
SEQ = re.compile(r"[0-9]{1,18}")


def _bad_resume(session_id: str | None, last_seq: str | None) -> str | None:
    """What is wrong with the resume parameters, if anything."""
    if session_id is not None and not SESSION_ID.fullmatch(session_id):
        return "session_id must be the 32 hex digits the server gave"
    if last_seq and not SEQ.fullmatch(last_seq):
        return "last_seq must be a whole number (the last seq the client saw)"
    return None


async def _refuse(
    websocket: WebSocket, code: int, reason: str, error_type: ErrorType
) -> None:
    """Say why (outside any session: seq 0), then close with `code`."""
    frame = outside_session(Error(message=reason, error_type=error_type))
    if websocket.application_state == WebSocketState.CONNECTED:
        await websocket.send_text(frame)
        await websocket.close(code=code, reason=reason[:120])
