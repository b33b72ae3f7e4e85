"""`Connection`: one session's frames over as many sockets as it takes.

It dials with `Authorization: Bearer <token>` (never a token in the URL),
reads the `session_ready` handshake, and hands out the session's frames in
order, each once: when a socket drops it dials again with `session_id` and
`last_seq`, the server replays what was missed, and any frame with a `seq`
already seen is dropped. Reconnecting backs off (`Backoff`) and gives up
with `ConnectionFailed` after its last attempt. Whoever notices the drop
first, the reader or a sender, reconnects; the other waits for it.

A decision (an answer, an approval, a stop) is kept until a frame shows the
server acted on it. When the socket drops first, or the server says the
decision reached an instance that no longer holds the conversation
(`moved`), it is sent again on the new socket, once the replay there shows
it is still awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from backend.protocol import (
    Envelope,
    Error,
    ServerPayload,
    SessionReady,
    server_message_adapter,
)
from loopwire.errors import (
    AgentError,
    ClientError,
    ConnectionFailed,
    HandshakeRefused,
    ProtocolMismatch,
    SessionNotFound,
)

log = logging.getLogger("loopwire.client")

Event = ServerPayload
"""A server frame: an instance of one payload class of `backend.protocol`
(`ChatResponse`, `AgentCompletion`, …; `isinstance` tells which) that is also
an `Envelope` (`seq`, `session_id`, `run_id`, `ts`): see `envelope()`."""

MAX_FRAME_BYTES = 1 << 24
CLOSE_POLICY_VIOLATION = 1008
STALE_CONTROL = frozenset({"no_active_run", "no_pending_input", "no_pending_approval"})
"""Errors that only say a control came too late (the run had ended, the
question had timed out, the call was already decided)."""
RETRY_ERROR_TYPES = frozenset(
    {"server_restarting", "busy", "store_error", "unavailable"}
)
"""`error` frames instead of `session_ready` that say "try again later"."""
INVALID_ANSWER = "invalid_answer"
"""The `error_type` of a decision that does not fit what was asked (edited
arguments, an answer outside its schema): not taken; the wait goes on."""
MOVED = "moved"
"""The `error_type` of a decision that reached an instance which no longer
holds the conversation: not taken; the socket closes (1012) next."""
REPLAY_QUIET_S = 0.25
"""After a reconnect, how long without a frame ends the replay when no frame
carries `session_ready.last_seq` (a take-over after a crash skips seqs)."""

Acted = Callable[[Event], bool]
"""Whether a frame shows that the server acted on a kept decision."""


@dataclass(frozen=True)
class _Kept:
    """A decision sent, to be sent again after a reconnect until `acted_on`."""

    text: str
    acted_on: Acted
    refusable: bool = False
    """The server may refuse it as not fitting (`invalid_answer`)."""


@dataclass(frozen=True)
class Backoff:
    """How a lost connection is retried: `attempts` dials, waiting
    `first_delay_s` before the first and twice as long before each next one,
    never more than `max_delay_s`."""

    attempts: int = 5
    first_delay_s: float = 0.25
    max_delay_s: float = 5.0

    def delays(self) -> Iterator[float]:
        delay = self.first_delay_s
        for _ in range(self.attempts):
            yield min(delay, self.max_delay_s)
            delay *= 2


def envelope(event: Event) -> Envelope:
    """The envelope of `event` (every frame's model derives from both)."""
    frame: object = event
    assert isinstance(frame, Envelope)
    return frame


def parse_frame(text: str | bytes) -> Event:
    """One server frame, checked against the protocol's `ServerMessage` union."""
    try:
        frame: Event = server_message_adapter.validate_json(text)
    except ValidationError as exc:
        raise ProtocolMismatch(f"not a protocol v1 frame: {exc}") from exc
    return frame


def with_query(url: str, **params: str) -> str:
    """`url` with `params` added to (or replacing those in) its query."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))


def _refusal(exc: InvalidStatus) -> HandshakeRefused:
    """The server's JSON reason for refusing the handshake, when it gave one."""
    response = exc.response
    body = response.body or b""
    error_type, message = "refused", body.decode(errors="replace").strip()
    with contextlib.suppress(ValueError, TypeError, KeyError):
        data = json.loads(body)
        error_type, message = str(data["error_type"]), str(data["message"])
    return HandshakeRefused(
        response.status_code, error_type, message or response.reason_phrase
    )


def _retryable(exc: ClientError) -> bool:
    if isinstance(exc, ConnectionFailed):
        return True
    if isinstance(exc, HandshakeRefused):
        return exc.status == 429 or exc.status >= 500
    if isinstance(exc, AgentError):
        return exc.error_type in RETRY_ERROR_TYPES
    return False


class Connection:
    """A session on a server, kept connected. `open()` first, `close()` last."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        session_id: str | None = None,
        backoff: Backoff | None = None,
        open_timeout_s: float = 10.0,
        client: str = "python",
    ) -> None:
        self.url = url
        self.client = client
        """Who connects (`/ws?client=`, on the first connection): what a
        new conversation is tagged with."""
        self.session_id = session_id
        self.backoff = backoff or Backoff()
        self.last_seq = 0
        """The newest `seq` handed out (or, on attaching to a session, the
        newest it had: its earlier frames are not replayed to the caller)."""
        self.reconnects = 0
        self._token = token
        self._open_timeout_s = open_timeout_s
        self._socket: ClientConnection | None = None
        self._ready: SessionReady | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._kept: list[_Kept] = []
        self._backlog: deque[str | bytes] = deque()
        """The replay read while reconnecting, not handed out yet."""
        self._stale_expected = 0

    @property
    def ready(self) -> SessionReady:
        """The latest `session_ready` (a new one after each reconnect)."""
        if self._ready is None:
            raise ClientError("not connected: use `async with` or open() first")
        return self._ready

    @property
    def socket(self) -> ClientConnection:
        """The socket in use now (a reconnect replaces it)."""
        return self._live()

    async def open(self) -> SessionReady:
        """Connect (once; a first connection is not retried)."""
        resuming = self.session_id is not None
        self._socket, ready = await self._dial(self._first_url())
        if resuming and not ready.resumed:
            await self._socket.close()
            raise SessionNotFound(self.session_id or "")
        self.session_id = envelope(ready).session_id
        self.last_seq = ready.last_seq
        self._ready = ready
        return ready

    async def close(self) -> None:
        self._closed = True
        if self._socket is not None:
            await self._socket.close()

    async def receive(self) -> Event:
        """The next frame of the session not handed out before."""
        while True:
            text: str | bytes
            if self._backlog:
                text = self._backlog.popleft()
            else:
                socket = self._live()
                try:
                    text = await socket.recv()
                except ConnectionClosed as exc:
                    await self._recover(socket, exc)
                    continue
            frame = parse_frame(text)
            seq = envelope(frame).seq
            if 0 < seq <= self.last_seq:
                continue  # replayed, and already handed out
            self.last_seq = max(self.last_seq, seq)
            self._note(frame)
            if isinstance(frame, Error) and self._absorbs(frame):
                continue
            return frame

    def _note(self, frame: Event) -> None:
        """Forget the decisions `frame` shows were acted on."""
        if self._kept:
            self._kept = [kept for kept in self._kept if not kept.acted_on(frame)]

    def _absorbs(self, error: Error) -> bool:
        """Errors about the connection, not the run: a restart (the socket
        closes next, the session goes on), a decision that reached an
        instance which let the conversation go (the socket closes next; the
        decision is sent again after the reconnect) and refusals of resent
        frames."""
        if error.error_type == INVALID_ANSWER:
            self._forget_refused()
            return False
        if error.error_type in ("server_restarting", MOVED):
            log.info("loopwire: %s; reconnecting", error.message)
            return True
        if error.error_type in STALE_CONTROL and self._stale_expected > 0:
            self._stale_expected -= 1
            return True
        return False

    def _forget_refused(self) -> None:
        """Not sending again the oldest decision that could be refused as
        not fitting: the server answers frames in order, so it was that one."""
        for index, kept in enumerate(self._kept):
            if kept.refusable:
                del self._kept[index]
                return

    async def send(
        self,
        message: BaseModel,
        *,
        until: Acted | None = None,
        refusable: bool = False,
    ) -> None:
        """Send a client frame, reconnecting first if the socket is gone.

        `until`: keep the frame until a frame handed out (or replayed) makes
        `until` true, and after each reconnect that happens before, send it
        again once the replay has been read, if the replay did not make it
        true either. A frame sent while the server closes the socket may be
        lost, or refused (`moved`); one that was acted on after all is
        refused the second time as stale, and that refusal is dropped here.
        Only for frames that are safe twice (answers, approvals, stops): the
        server acts on one copy at most. `refusable`: the server may refuse
        it as not fitting (`invalid_answer`); then it is not kept."""
        text = message.model_dump_json(exclude_none=True)
        while True:
            socket = self._live()
            try:
                await socket.send(text)
            except ConnectionClosed as exc:
                await self._recover(socket, exc)
                continue
            if until is not None:
                self._kept.append(_Kept(text, until, refusable))
            return

    def settle(self) -> None:
        """Forget the frames kept for resending: what they were about is over."""
        self._kept.clear()
        self._stale_expected = 0

    # ------------------------------------------------------------ dialing

    def _live(self) -> ClientConnection:
        if self._closed:
            raise ClientError("the client is closed")
        if self._socket is None:
            raise ClientError("not connected: use `async with` or open() first")
        return self._socket

    def _first_url(self) -> str:
        if self.session_id is None:
            return with_query(self.url, client=self.client)
        return with_query(self.url, session_id=self.session_id, client=self.client)

    def _resume_url(self) -> str:
        assert self.session_id is not None
        return with_query(
            self.url, session_id=self.session_id, last_seq=str(self.last_seq)
        )

    async def _dial(self, url: str) -> tuple[ClientConnection, SessionReady]:
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else None
        try:
            socket = await connect(
                url,
                additional_headers=headers,
                open_timeout=self._open_timeout_s,
                max_size=MAX_FRAME_BYTES,
            )
        except InvalidStatus as exc:
            raise _refusal(exc) from exc
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise ConnectionFailed(f"cannot connect to {self.url}: {exc}") from exc
        try:
            ready = await self._handshake(socket)
        except BaseException:
            await socket.close()
            raise
        return socket, ready

    async def _handshake(self, socket: ClientConnection) -> SessionReady:
        try:
            async with asyncio.timeout(self._open_timeout_s):
                frame = parse_frame(await socket.recv())
        except (ConnectionClosed, TimeoutError) as exc:
            raise ConnectionFailed(f"no session_ready from {self.url}") from exc
        if isinstance(frame, Error):
            raise AgentError(frame.error_type, frame.message, frame)
        if not isinstance(frame, SessionReady):
            raise ProtocolMismatch(f"expected session_ready, got {frame!r}")
        return frame

    # ------------------------------------------------------------ reconnecting

    async def _recover(self, dead: ClientConnection, exc: ConnectionClosed) -> None:
        if self._closed:
            raise ClientError("the client is closed") from exc
        close = exc.rcvd
        if close is not None and close.code == CLOSE_POLICY_VIOLATION:
            raise ConnectionFailed(
                f"the server closed the connection: {close.reason or 'policy'}"
            ) from exc
        async with self._lock:
            if self._socket is not dead:
                return  # another caller has reconnected already
            log.info("loopwire: connection lost (%s); reconnecting", exc)
            socket = await self._redial()
            if self._closed:  # closed while reconnecting
                await socket.close()
                raise ClientError("the client is closed") from exc
            self._backlog.clear()  # not handed out: the new replay has it
            replayed = await self._read_replay(socket) if self._kept else True
            self._socket = socket
            self.reconnects += 1
            if replayed:  # else the next recover sends them
                await self._send_kept(socket)
        await dead.close()

    async def _read_replay(self, socket: ClientConnection) -> bool:
        """Read the frames replayed after `last_seq` into the backlog, noting
        the decisions they show acted on; False if the socket closed first.
        The replay ends with the frame numbered `session_ready.last_seq`, or,
        when no frame has that number (seqs skipped by a take-over after a
        crash), once nothing has come for `REPLAY_QUIET_S`."""
        end = self.ready.last_seq
        if end <= self.last_seq:
            return True  # nothing to replay
        while True:
            try:
                async with asyncio.timeout(REPLAY_QUIET_S):
                    text = await socket.recv()
            except TimeoutError:
                return True
            except ConnectionClosed:
                return False
            self._backlog.append(text)
            with contextlib.suppress(ProtocolMismatch):  # raised when handed out
                frame = parse_frame(text)
                seq = envelope(frame).seq
                if seq > self.last_seq:
                    self._note(frame)
                if seq >= end:
                    return True

    async def _send_kept(self, socket: ClientConnection) -> None:
        """The decisions not yet acted on, again (a copy the server had
        taken after all is refused as stale, and that refusal dropped)."""
        with contextlib.suppress(ConnectionClosed):  # then the next recover
            for kept in self._kept:
                await socket.send(kept.text)
                self._stale_expected += 1

    async def _redial(self) -> ClientConnection:
        last: ClientError | None = None
        for delay in self.backoff.delays():
            await asyncio.sleep(delay)
            try:
                socket, ready = await self._dial(self._resume_url())
            except ClientError as exc:
                if not _retryable(exc):
                    raise
                last = exc
                continue
            await self._check_resumed(socket, ready)
            self._ready = ready
            return socket
        attempts = self.backoff.attempts
        raise ConnectionFailed(
            f"lost the connection to {self.url} and could not reconnect "
            f"after {attempts} attempt(s): {last}",
            attempts=attempts,
        )

    async def _check_resumed(
        self, socket: ClientConnection, ready: SessionReady
    ) -> None:
        """The same session, with every frame since `last_seq` still held."""
        if not ready.resumed or envelope(ready).session_id != self.session_id:
            await socket.close()
            raise SessionNotFound(self.session_id or "")
        if ready.oldest_seq > 0 and self.last_seq < ready.oldest_seq - 1:
            await socket.close()
            raise ConnectionFailed(
                f"frames {self.last_seq + 1} to {ready.oldest_seq - 1} of session "
                f"{self.session_id} are no longer held by the server"
            )
