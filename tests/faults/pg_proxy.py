"""`PgProxy`: a TCP proxy in front of PostgreSQL that injects faults.

It listens on 127.0.0.1 (a free port) and forwards bytes both ways for any
number of connections, reading the PostgreSQL wire protocol as it goes (one
message at a time) so that it can:

- `cut_all()`: drop every connection now (both sockets, at once);
- `arm_drop_after_commit(n)`: the next `n` times a client sends COMMIT, let
  it through, read the server's reply up to its ReadyForQuery, and close both
  sockets without passing that reply on: the server committed, the client
  saw its connection drop (an *ambiguous commit*);
- `stall()` / `flow()`: stop moving bytes without closing anything (a
  network partition: the sockets stay open, nothing arrives), and go on;
- `reject_new`: close new connections at once (the database unreachable).

It runs in the event loop that started it (the test's): a test that blocks
its loop stalls the proxy too, so blocking calls (a server's restart) go
through `asyncio.to_thread`. Each client connection gets its own connection
to the server; `queries` keeps the SQL the clients sent, newest last.

The wire protocol, as far as needed: a client opens with a message without a
type byte (int32 length, int32 code): an SSLRequest or GSSENCRequest (the
server answers one byte, `N` here: no TLS; `S`/`G` would make the rest
opaque, and it is passed through unparsed), a CancelRequest (opaque), or the
StartupMessage. After that, every message either way is a type byte and an
int32 length that counts itself. A COMMIT is a simple Query (`Q`, the SQL
text NUL-terminated) — what asyncpg sends for `Transaction.commit()`, which
SQLAlchemy's asyncpg dialect uses: the text `COMMIT;` — or, from other
drivers, a Parse (`P`) of it, answered at the next Sync (`S`). Each `Q` and
each `S` is answered by exactly one ReadyForQuery (`Z`), in order, so the
commit's reply is the `Z` after those still owed when it was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections import deque

from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
MAX_STARTUP = 10_000
"""A longer first message is not PostgreSQL's: the link goes opaque."""
CHUNK = 1 << 16
KEPT_QUERIES = 1000
CLOSE_LIMIT_S = 5.0


def is_commit(sql: str) -> bool:
    return sql.lstrip().upper().startswith("COMMIT")


def _sql_of(kind: bytes, body: bytes) -> str | None:
    """The SQL text of a Query or a Parse message (None: another message)."""
    if kind == b"Q":
        return body.split(b"\0", 1)[0].decode(errors="replace")
    if kind == b"P":  # statement name \0 query \0 parameter types
        parts = body.split(b"\0", 2)
        return parts[1].decode(errors="replace") if len(parts) > 1 else ""
    return None


async def _read_message(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One typed message: (its type byte, the whole message as sent)."""
    head = await reader.readexactly(5)
    (length,) = struct.unpack("!i", head[1:])
    return head[:1], head + await reader.readexactly(length - 4)


class _Link:
    """One client connection and its connection to the server."""

    def __init__(
        self,
        proxy: PgProxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.client_reader, self.client_writer = client
        self.server_reader: asyncio.StreamReader | None = None
        self.server_writer: asyncio.StreamWriter | None = None
        self.owed = 0
        """ReadyForQuery messages the server still owes (a Q or S each)."""
        self.withhold_after: int | None = None
        """Set by an armed COMMIT: pass this many more ReadyForQuery on,
        then withhold everything and close at the next one (its reply)."""
        self.commit_in_batch = False
        """A Parse of COMMIT went by: the next Sync is the commit point."""

    def writers(self) -> list[asyncio.StreamWriter]:
        return [w for w in (self.client_writer, self.server_writer) if w is not None]

    def abort(self) -> None:
        for writer in self.writers():
            writer.transport.abort()

    def close(self) -> None:
        """Close both sockets, sending what was already forwarded first."""
        for writer in self.writers():
            writer.close()

    async def serve(self) -> None:
        proxy = self.proxy
        try:
            self.server_reader, self.server_writer = await asyncio.open_connection(
                proxy.upstream_host, proxy.upstream_port
            )
        except OSError as exc:
            log.info("pg proxy: upstream unreachable: %s", exc)
            self.abort()
            return
        try:
            typed = await self._startup()
            if typed:
                pumps = [self._from_client(), self._from_server()]
            else:
                pumps = [
                    self._copy(self.client_reader, self.server_writer),
                    self._copy(self.server_reader, self.client_writer),
                ]
            tasks = [asyncio.ensure_future(p) for p in pumps]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.close()
            for writer in self.writers():
                with contextlib.suppress(OSError, TimeoutError):
                    async with asyncio.timeout(CLOSE_LIMIT_S):
                        await writer.wait_closed()

    async def _startup(self) -> bool:
        """Pass the untyped opening messages on; True: typed messages follow."""
        assert self.server_reader is not None and self.server_writer is not None
        while True:
            head = await self.client_reader.readexactly(8)
            length, code = struct.unpack("!ii", head)
            if not 8 <= length <= MAX_STARTUP:
                self.server_writer.write(head)
                return False
            message = head + await self.client_reader.readexactly(length - 8)
            await self.proxy._flowing.wait()
            log.debug("pg proxy: opening message, code %d", code)
            self.server_writer.write(message)
            if code not in (SSL_REQUEST, GSSENC_REQUEST):
                return code != CANCEL_REQUEST
            answer = await self.server_reader.readexactly(1)
            log.debug("pg proxy: the server answers %r", answer)
            self.client_writer.write(answer)
            if answer != b"N":  # TLS or GSS from here on: bytes we cannot read
                return False

    async def _copy(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        while data := await reader.read(CHUNK):
            await self.proxy._flowing.wait()
            writer.write(data)
            await writer.drain()

    async def _from_client(self) -> None:
        assert self.server_writer is not None
        proxy = self.proxy
        while True:
            kind, message = await _read_message(self.client_reader)
            await proxy._flowing.wait()
            sql = _sql_of(kind, message[5:])
            if sql is not None:
                proxy.queries.append(sql)
                log.debug("pg proxy: %s %r", kind.decode(), sql)
                if proxy.hold_text and proxy.hold_text in sql.lower():
                    proxy.hold_text = ""
                    proxy.stall()  # this message, and everything after it, waits
                    proxy._holding.set()
                    await proxy._flowing.wait()
            commit_point = False
            if kind == b"Q":
                commit_point = is_commit(sql or "")
            elif kind == b"P" and is_commit(sql or ""):
                self.commit_in_batch = True
            elif kind == b"S":
                commit_point, self.commit_in_batch = self.commit_in_batch, False
            if commit_point:
                proxy.commits_seen += 1
                if proxy.armed > 0 and self.withhold_after is None:
                    proxy.armed -= 1
                    self.withhold_after = self.owed
            if kind in (b"Q", b"S"):
                self.owed += 1
            self.server_writer.write(message)
            await self.server_writer.drain()

    async def _from_server(self) -> None:
        assert self.server_reader is not None
        proxy = self.proxy
        while True:
            kind, message = await _read_message(self.server_reader)
            await proxy._flowing.wait()
            if self.withhold_after == 0:  # the reply to the armed COMMIT
                if kind == b"Z":
                    log.info("pg proxy: dropped a connection after its COMMIT")
                    self.close()
                    proxy._dropped()
                    return
                continue
            self.client_writer.write(message)
            await self.client_writer.drain()
            if kind == b"Z":
                self.owed = max(self.owed - 1, 0)
                if self.withhold_after is not None:
                    self.withhold_after -= 1


class PgProxy:
    """A fault-injecting proxy to PostgreSQL at `upstream_host:upstream_port`
    (see the module docstring). `async with PgProxy(host, port) as proxy:`
    or `await proxy.start()` / `await proxy.close()`."""

    host = "127.0.0.1"

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.port = 0
        self.accepted = 0
        """Connections accepted so far (rejected ones included)."""
        self.commits_seen = 0
        self.commits_dropped = 0
        self.armed = 0
        """COMMITs still to drop (`arm_drop_after_commit`)."""
        self.cuts = 0
        """Connections `cut_all()` dropped, in all."""
        self.reject_new = False
        """True: a new connection is closed at once, never forwarded."""
        self.queries: deque[str] = deque(maxlen=KEPT_QUERIES)
        """The SQL of the clients' Query and Parse messages, newest last."""
        self._armed_total = 0
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._drop = asyncio.Event()
        self.hold_text = ""
        """`hold_when`'s text (lower case); empty: none."""
        self._holding = asyncio.Event()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> PgProxy:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.flow()
        self.cut_all()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> PgProxy:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def url_for(self, database_url: str) -> str:
        """`database_url` (the upstream server's) through this proxy."""
        url = make_url(database_url).set(host=self.host, port=self.port)
        return url.render_as_string(hide_password=False)

    @property
    def connections(self) -> int:
        """Connections open through the proxy now."""
        return len(self._links)

    # ------------------------------------------------------------ faults

    def cut_all(self) -> int:
        """Drop every connection now (both sockets); how many there were."""
        links = list(self._links)
        for link in links:
            link.abort()
        self.cuts += len(links)
        return len(links)

    def arm_drop_after_commit(self, n: int = 1) -> None:
        """Make the next `n` COMMITs (over all connections) ambiguous: the
        server commits, the client's connection drops before the reply."""
        self.armed += n
        self._armed_total += n

    async def wait_dropped(
        self, count: int | None = None, within_s: float = 10.0
    ) -> None:
        """Wait until `count` COMMITs were dropped (default: as many as were
        armed so far); TimeoutError after `within_s` seconds."""
        target = self._armed_total if count is None else count
        async with asyncio.timeout(within_s):
            while self.commits_dropped < target:
                self._drop.clear()
                await self._drop.wait()

    def hold_when(self, text: str) -> None:
        """Stall (`stall()`) as soon as a client sends SQL containing `text`
        (case-insensitive), before that statement reaches the server: a
        transaction caught at a chosen point. `held()` waits for it;
        `flow()` lets it go on."""
        self.hold_text = text.lower()
        self._holding.clear()

    async def held(self, within_s: float = 20.0) -> None:
        """Wait until `hold_when`'s statement arrived and is held."""
        async with asyncio.timeout(within_s):
            await self._holding.wait()

    def stall(self) -> None:
        """Stop forwarding (each side's next message waits); nothing closes."""
        self._flowing.clear()

    def flow(self) -> None:
        """Forward again after `stall()`."""
        self._flowing.set()

    # ------------------------------------------------------------ internals

    def _dropped(self) -> None:
        self.commits_dropped += 1
        self._drop.set()

    async def _accept(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.accepted += 1
        if self.reject_new:
            writer.transport.abort()
            return
        link = _Link(self, (reader, writer))
        self._links.add(link)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await link.serve()
        finally:
            self._links.discard(link)
            self._tasks.discard(task)
