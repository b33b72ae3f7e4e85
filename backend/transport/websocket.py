"""The WebSocket endpoint: one reader and one writer per socket.

The reader is the only code that receives from the socket; it decodes and
validates each frame and routes it to the `ChatService`. The writer drains
the session's subscription. Bad frames get an `error` frame naming the
problem and the connection stays open. Query parameters: `session_id` and
`last_seq` to resume, `token` when `LOOPWIRE_AUTH_TOKEN` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from backend.bounded_json import load_json
from backend.chat.service import RESTARTING, ChatService
from backend.chat.session import CLOSING, OVERFLOW, Session, Subscription
from backend.errors import Busy, InvalidMessage
from backend.notifications import outside_session
from backend.protocol import (
    CLIENT_MESSAGE_TYPES,
    ClientMessage,
    Error,
    ErrorType,
    client_message_adapter,
)
from backend.store.base import StoreError

log = logging.getLogger(__name__)

CLOSE_POLICY_VIOLATION = 1008
CLOSE_INTERNAL_ERROR = 1011
FLOODING = "too many messages; slow down and reconnect"
CLOSE_TIMEOUT_S = 5.0
"""How long the writer may take to flush what is queued before a close."""
CLOSE_SERVICE_RESTART = 1012
CLOSE_TRY_AGAIN_LATER = 1013
CLOSE_UNAUTHORIZED = 4401


async def websocket_endpoint(websocket: WebSocket) -> None:
    service: ChatService = websocket.app.state.chat
    settings = service.settings
    refusal = _refusal(websocket, settings.auth_token)
    await websocket.accept()
    if refusal is not None:
        await _refuse(websocket, *refusal, "unauthorized")
        return
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
        session, resumed = await service.open_session(session_id)
    except Busy as exc:
        await _refuse(websocket, CLOSE_TRY_AGAIN_LATER, str(exc), "busy")
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
        await _serve(websocket, service, session, subscription)
    finally:
        session.outbox.unsubscribe(subscription)
        session.touch()


async def _serve(
    websocket: WebSocket,
    service: ChatService,
    session: Session,
    subscription: Subscription,
) -> None:
    async with asyncio.TaskGroup() as tasks:
        writer = tasks.create_task(_write(websocket, subscription))
        try:
            closing = await _read(websocket, service, session)
            if closing is not None:  # the writer closes after what is queued
                subscription.close(*closing)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(CLOSE_TIMEOUT_S):
                        await asyncio.shield(writer)
        finally:
            writer.cancel()


async def _write(websocket: WebSocket, subscription: Subscription) -> None:
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


async def _read(
    websocket: WebSocket, service: ChatService, session: Session
) -> tuple[int, str] | None:
    """Receive until the client leaves (None) or must be closed: then the
    code and reason, for the writer to close with after the queued frames."""
    settings = service.settings
    limit = settings.max_message_bytes
    bucket = TokenBucket(settings.ws_messages_per_s, settings.ws_message_burst)
    while True:
        try:
            event = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return None
        if event["type"] == "websocket.disconnect":
            return None
        if not bucket.take():
            if bucket.refused > settings.ws_message_burst:
                return CLOSE_POLICY_VIOLATION, FLOODING
            if bucket.refused == 1:  # one error per burst, not one per frame
                session.notify.error(
                    f"too many messages: at most {settings.ws_messages_per_s:g} "
                    "per second; this one and the next ones are dropped until "
                    "the rate falls",
                    "rate_limited",
                )
            continue
        try:
            message = decode(event, limit)
        except InvalidMessage as exc:
            session.notify.error(str(exc), "invalid_message")
            continue
        try:
            service.handle(session, message)
        except Exception:  # never a silent drop: log it, tell the client
            log.exception("session %s: handling %s failed", session.id, message.type)
            return CLOSE_INTERNAL_ERROR, "internal error"
        await asyncio.sleep(0)  # a busy socket lets the others have a turn


class TokenBucket:
    """`rate` messages per second on average, bursts of `burst`."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()
        self.refused = 0
        """Messages refused since the last one let through."""

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            self.refused = 0
            return True
        self.refused += 1
        return False


def decode(event: Mapping[str, Any], limit: int) -> ClientMessage:
    """One received WebSocket event → a validated client message."""
    text = event.get("text")
    if text is None:
        raise InvalidMessage("binary frames are not supported; send JSON text frames")
    size = len(text.encode("utf-8"))
    if size > limit:
        raise InvalidMessage(f"frame is {size} bytes; the limit is {limit} bytes")
    return parse_message(load_json(text))


def preview(value: object, limit: int = 40) -> str:
    """`value` as a short repr, for error messages that quote the client."""
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


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
            f"unknown message type {preview(kind)}; expected one of: {known}"
        )
    try:
        return client_message_adapter.validate_python(data)
    except ValidationError as exc:
        raise InvalidMessage(f"invalid {kind} message: {describe(exc)}") from exc


def describe(exc: ValidationError) -> str:
    """`field: problem; …` for every validation error, tagged-union noise removed."""
    problems = []
    for error in exc.errors(include_url=False):
        loc = [str(p) for p in error["loc"][1:]]  # first item is the union tag
        where = ".".join(loc) or "message"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        problems.append(f"{where}: {message}")
    return "; ".join(problems)


SESSION_ID = re.compile(r"[0-9a-f]{32}")
SEQ = re.compile(r"[0-9]{1,18}")


def _bad_resume(session_id: str | None, last_seq: str | None) -> str | None:
    """What is wrong with the resume parameters, if anything."""
    if session_id is not None and not SESSION_ID.fullmatch(session_id):
        return "session_id must be the 32 hex digits the server gave"
    if last_seq and not SEQ.fullmatch(last_seq):
        return "last_seq must be a whole number (the last seq the client saw)"
    return None


def _refusal(websocket: WebSocket, token: str | None) -> tuple[int, str] | None:
    """Origins and hosts are checked before this (`transport/guard.py`)."""
    if token is None:
        return None
    offered = websocket.query_params.get("token") or _bearer(websocket)
    if offered is None or not hmac.compare_digest(offered.encode(), token.encode()):
        return (
            CLOSE_UNAUTHORIZED,
            "a valid token is required (?token=… or Authorization: Bearer …)",
        )
    return None


def _bearer(websocket: WebSocket) -> str | None:
    header = websocket.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


async def _refuse(
    websocket: WebSocket, code: int, reason: str, error_type: ErrorType
) -> None:
    """Say why (outside any session: seq 0), then close with `code`."""
    frame = outside_session(Error(message=reason, error_type=error_type))
    if websocket.application_state == WebSocketState.CONNECTED:
        await websocket.send_text(frame)
        await websocket.close(code=code, reason=reason[:120])
