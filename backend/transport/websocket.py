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
import json
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

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
CLOSE_SERVICE_RESTART = 1012
CLOSE_TRY_AGAIN_LATER = 1013
CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN_ORIGIN = 4403


async def websocket_endpoint(websocket: WebSocket) -> None:
    service: ChatService = websocket.app.state.chat
    settings = service.settings
    refusal = _refusal(websocket, settings.auth_token, settings.origins)
    await websocket.accept()
    if refusal is not None:
        await _refuse(websocket, *refusal, "unauthorized")
        return
    if service.draining:
        await _refuse(websocket, CLOSE_SERVICE_RESTART, RESTARTING, "server_restarting")
        return
    session_id = websocket.query_params.get("session_id") or None
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
    after = _last_seq(websocket) if resumed else None
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
            await _read(websocket, service, session)
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
                await websocket.close(code=CLOSE_SERVICE_RESTART, reason=RESTARTING)
                return
            await websocket.send_text(text)


async def _read(websocket: WebSocket, service: ChatService, session: Session) -> None:
    limit = service.settings.max_message_bytes
    while True:
        try:
            event = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return
        if event["type"] == "websocket.disconnect":
            return
        try:
            message = decode(event, limit)
        except InvalidMessage as exc:
            session.notify.error(str(exc), "invalid_message")
            continue
        service.handle(session, message)


def decode(event: Mapping[str, Any], limit: int) -> ClientMessage:
    """One received WebSocket event → a validated client message."""
    text = event.get("text")
    if text is None:
        raise InvalidMessage("binary frames are not supported; send JSON text frames")
    size = len(text.encode("utf-8"))
    if size > limit:
        raise InvalidMessage(f"frame is {size} bytes; the limit is {limit} bytes")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidMessage(f"invalid JSON: {exc}") from exc
    return parse_message(data)


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
        raise InvalidMessage(f"unknown message type {kind!r}; expected one of: {known}")
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


def _last_seq(websocket: WebSocket) -> int | None:
    raw = websocket.query_params.get("last_seq")
    if raw is None or not raw.isdigit():
        return 0 if raw is None else None
    return int(raw)


def _refusal(
    websocket: WebSocket, token: str | None, origins: tuple[str, ...]
) -> tuple[int, str] | None:
    origin = websocket.headers.get("origin")
    if origin and not _origin_allowed(
        origin, websocket.headers.get("host", ""), origins
    ):
        return CLOSE_FORBIDDEN_ORIGIN, f"origin {origin} is not allowed"
    if token is None:
        return None
    offered = websocket.query_params.get("token") or _bearer(websocket)
    if offered is None or not hmac.compare_digest(offered.encode(), token.encode()):
        return (
            CLOSE_UNAUTHORIZED,
            "a valid token is required (?token=… or Authorization: Bearer …)",
        )
    return None


def _origin_allowed(origin: str, host: str, allowed: tuple[str, ...]) -> bool:
    if "*" in allowed or origin in allowed:
        return True
    return origin.split("://", 1)[-1] == host


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
