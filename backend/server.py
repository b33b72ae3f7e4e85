"""`Server`: uvicorn with loopwire's shutdown.

On the first SIGTERM or SIGINT the chat service drains before uvicorn stops
(`ChatService.drain`): new connections and runs are refused, every run is
parked at its next phase boundary or wait and checkpointed, everything is
saved, each client gets an `error` frame (`server_restarting`) and a close
with code 1012, and only then does uvicorn shut down. A second signal is
uvicorn's own: stop now.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.protocols.websockets.websockets_sansio_impl import (
    WebSocketsSansIOProtocol,
)

from backend.chat.service import ChatService
from backend.settings import Settings
from backend.users import Users

log = logging.getLogger("loopwire")


class Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, service: ChatService) -> None:
        super().__init__(config)
        self.service = service
        self._drain_asked: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        asked = self._drain_asked
        if asked is None or asked.is_set() or self._loop is None:
            super().handle_exit(sig, frame)
            return
        self._loop.call_soon_threadsafe(asked.set)

    async def main_loop(self) -> None:
        tune_collector()
        self._loop = asyncio.get_running_loop()
        self._drain_asked = asyncio.Event()
        async with asyncio.TaskGroup() as tasks:
            drainer = tasks.create_task(self._drain_when_asked())
            try:
                await super().main_loop()
            finally:
                drainer.cancel()

    async def _drain_when_asked(self) -> None:
        assert self._drain_asked is not None
        await self._drain_asked.wait()
        log.info("loopwire: shutting down: parking runs and saving conversations")
        try:
            await self.service.drain()
        except Exception:  # still stop: a failed drain must not keep it up
            log.exception("loopwire: the shutdown drain failed")
        self.should_exit = True


YOUNG_COLLECTION = 10_000
"""Allocations between two collections of the youngest generation
(CPython's default: 700). Each step of each run makes and drops some
thousands of container objects (models, dicts, frames), nearly all freed
by their reference counts; at 700 the youngest generation was collected
many times a step and, every tenth time, the middle one too: about a
quarter of the server's CPU per LLM call at 1,000 sessions
(docs/benchmarks.md). A collection of 10,000 young survivors takes
0.2-0.5 ms here."""


def tune_collector() -> None:
    """Once the server is ready: what start-up left behind collected, and
    every object still alive (modules, classes, schemas, the app: some
    120,000) moved out of the collector's sight. They live as long as the
    process, and each full collection would otherwise walk them all again
    (~150 ms on this machine, a pause every run on the loop would feel).
    Then the youngest generation collected less often (`YOUNG_COLLECTION`)."""
    gc.collect()
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION, middle, old)


def exposure_problem(host: str, settings: Settings, users: Users) -> str | None:
    """Why serving `host` as configured is refused, if it is: an address
    other machines can reach, with no authentication."""
    if users.enabled or settings.allow_insecure or _loopback(host):
        return None
    return (
        f"refusing to serve {host} without authentication: anyone who can "
        "reach it could use the agent and its tools. Set LOOPWIRE_AUTH_TOKEN "
        "or LOOPWIRE_AUTH_TOKENS_FILE, bind 127.0.0.1, or set "
        "LOOPWIRE_ALLOW_INSECURE=1 to serve it open anyway."
    )


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class RedactQuery(logging.Filter):
    """Query strings out of uvicorn's request lines: they can carry session
    ids (and, from old clients, tokens), which logs must not keep."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(arg) for arg in record.args)
        return True


class ConnectionLines(logging.Filter):
    """Drops uvicorn's line per WebSocket handshake (`"WebSocket /ws"
    [accepted]`), which it logs whatever its access log setting says."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith('%s - "WebSocket %s"')


def _redacted(arg: object) -> object:
    if isinstance(arg, str) and arg.startswith("/") and "?" in arg:
        return arg.partition("?")[0] + "?[redacted]"
    return arg


def uvicorn_config(
    app: Any, settings: Settings, *, host: str, port: int, **options: Any
) -> uvicorn.Config:
    """How loopwire runs on uvicorn: its WebSocket protocol, the frame size
    its limits allow, compression and per-request logs as configured."""
    config: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": settings.log_level,
        "access_log": settings.access_log,
        "ws": WebSocketProtocol,
        "ws_max_size": max(4 * settings.max_message_bytes, 1 << 20),
        "ws_per_message_deflate": settings.ws_compression,
        # forwarded headers are believed only from the configured proxies
        # (uvicorn's own default trusts any local process to name a client)
        "proxy_headers": bool(settings.proxies),
        "forwarded_allow_ips": list(settings.proxies) or None,
    }
    config.update(options)
    return uvicorn.Config(app, **config)


def quiet_client_logs(settings: Settings) -> None:
    """The HTTP client under the LLM SDK logs every request at INFO: only
    at DEBUG does that reach the log."""
    if settings.log_level.lower() != "debug":
        for name in ("httpx2", "httpx"):
            logging.getLogger(name).setLevel(logging.WARNING)


def redact_request_logs(settings: Settings) -> None:
    """Install `RedactQuery` on uvicorn's loggers (after uvicorn set them up),
    and `ConnectionLines` too unless the access log is on."""
    for name in ("uvicorn.access", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactQuery) for f in logger.filters):
            logger.addFilter(RedactQuery())
    errors = logging.getLogger("uvicorn.error")
    quiet = [f for f in errors.filters if isinstance(f, ConnectionLines)]
    if not settings.access_log and not quiet:
        errors.addFilter(ConnectionLines())
    elif settings.access_log:
        for installed in quiet:
            errors.removeFilter(installed)


LINGER_S = 2.0
"""After refusing a frame, the most time spent reading (and dropping) what
the client still sends before the socket closes."""
LINGER_IDLE_S = 0.1
"""...and the socket closes sooner once the client has sent nothing for this
long (it has read the close and replied, or finished its frame)."""


class WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol (websockets, sans-I/O), with two changes.

    The handshake is marked complete once a denial response is sent; without
    it every refused handshake (401, 403, 429) also logs "ASGI callable
    returned without completing handshake" at ERROR (upstream:
    Kludex/uvicorn#3138).

    A frame the parser refuses (over the size limit: 1009; bad UTF-8: 1007)
    gets its close frame, then a lingering close: what the client still
    sends is read and dropped until it has been quiet for `LINGER_IDLE_S`
    (at most `LINGER_S`), and only then does the socket close. uvicorn
    closes it as soon as the app returns, and closing a socket with unread
    data resets the connection: a client still sending its large frame
    would lose the close frame and never learn why.
    """

    _linger_until: float | None = None

    def data_received(self, data: bytes) -> None:
        if self._linger_until is None:
            super().data_received(data)
        else:  # the rest of a refused frame, or the client's close: dropped
            self._linger()

    def eof_received(self) -> None:
        if self._linger_until is not None:
            self._close_now()

    def handle_parser_exception(self) -> None:
        assert self.conn.close_sent is not None
        code = self.conn.close_sent.code
        reason = self.conn.close_sent.reason
        self.queue.put_nowait(
            {"type": "websocket.disconnect", "code": code, "reason": reason}
        )
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = True
        self._linger_until = self.loop.time() + LINGER_S
        if self.read_paused:  # a message waits for the app: read on anyway
            self.read_paused = False
            self.transport.resume_reading()
        self._linger()

    def _linger(self) -> None:
        """(Re)arm uvicorn's own close timer, which also keeps the socket
        open after the app returns (it does at once, on the disconnect)."""
        assert self._linger_until is not None
        if self.close_timer is not None:
            self.close_timer.cancel()
        left = self._linger_until - self.loop.time()
        self.close_timer = self.loop.call_later(
            max(0.0, min(LINGER_IDLE_S, left)), self._close_now
        )

    def _close_now(self) -> None:
        if self.close_timer is not None:
            self.close_timer.cancel()
            self.close_timer = None
        self.transport.close()

    async def send(self, message: Any) -> None:
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get(
            "more_body", False
        ):
            self.handshake_complete = True
