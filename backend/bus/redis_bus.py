"""`RedisBus`: instances coordinated through one Redis server.

Keys and channels (under `PREFIX`):

- `lease:<session>` = the owning instance's id, with a TTL of
  `lease_ttl_s`; taken with `SET NX`, renewed every third of the TTL by one
  script per chunk of leases (a lease that no longer names the instance is
  reported lost), given up by a script that deletes it only if it is still
  ours;
- `instance:<id>`: the instance is alive (same TTL, renewed with the leases);
- channel `inbox:<id>`: commands to the instance (`C` + JSON) and replies
  to its requests (`R` + JSON);
- channel `frames:<session>`: `<prev seq>:<seq>:<frame JSON>` from the owner.

One connection listens (pub/sub) and one task writes: frames and replies are
queued and sent in pipelines, in order, so a watcher gets an `attach` reply
before the frames published after it. The queue is bounded for frames (past
`max_queued`, a frame is dropped: its watchers see the gap and attach again);
replies and releases always go. At most `max_commands` commands run at once
in the bus's TaskGroup; one more is refused with `unavailable`.

**Lease deadlines.** Each lease is *safe* until a lease's TTL after the last
renewal (or claim) known to have reached Redis was *sent*, less `SAFETY` of
the TTL for clocks and for the service to let go: Redis counts the TTL from
when it ran the command, later than when it was sent. A renewal waits for
its answer, and is tried again when it fails, for as long as it can still
land before the earliest safe expiry of its chunk; a lease past its safe
expiry is reported lost (`on_lost`) and released with the compare-and-delete
script, best effort (a renewal abandoned in flight may still have run). A
lease the renewal script finds not ours is reported lost, not released.

`trouble` says why the instance cannot coordinate (a renewal or the listener
failing), for `/healthz`; it clears when they succeed again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from backend.aio import cancel_all, stop_if_cancelled
from backend.bus.base import (
    NOT_HERE,
    BusError,
    Command,
    CommandHandler,
    FrameHandler,
    InstanceGone,
    LostHandler,
    Reply,
    encode,
)
from backend.llm.redaction import bare_urls

log = logging.getLogger(__name__)

PREFIX = "loopwire:"
BATCH = 512
"""Most queued messages sent in one pipeline."""
RENEW_CHUNK = 1000
"""Most leases renewed by one script call."""
MAX_QUEUED = 10_000
"""Most messages queued for Redis before frames are dropped."""
MAX_COMMANDS = 256
"""Most commands from other instances handled at once."""
SAFETY = 0.1
"""The part of a lease's TTL not counted on (clock drift, letting go)."""
DEFAULT_REDIS_TIMEOUT_S = 2.0
RETRY_MIN_S = 0.05
"""The first pause before trying Redis again (it doubles); also how close to
its safe expiry a lease is given up rather than renewed once more."""
RECONNECT_MAX_S = 2.0

RENEW = """
local lost = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
  else
    table.insert(lost, i)
  end
end
return lost
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def _client(url: str, timeout_s: float, **options: Any) -> aioredis.Redis:
    """A client whose commands give up after `timeout_s` (connecting, reading,
    writing), tried once more on a new connection, no more: the callers have
    their own deadlines and retries."""
    return aioredis.Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=timeout_s,
        socket_timeout=timeout_s,
        retry=Retry(NoBackoff(), 1),
        **options,
    )


async def check_reachable(
    url: str, *, timeout_s: float = DEFAULT_REDIS_TIMEOUT_S
) -> None:
    """Raise `BusError` (the URL without its password) unless Redis answers."""
    client = _client(url, timeout_s)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        raise BusError(f"cannot reach Redis at {bare_urls(url)}: {exc}") from exc
    finally:
        await client.aclose()


async def _no_command(_command: Command) -> Reply:
    return NOT_HERE


@dataclass(slots=True)
class _Lease:
    safe_until: float
    """Loop time until which the lease surely still names this instance."""


class RedisBus:
    clustered = True

    def __init__(
        self,
        url: str,
        *,
        lease_ttl_s: float = 10.0,
        timeout_s: float = 5.0,
        redis_timeout_s: float = DEFAULT_REDIS_TIMEOUT_S,
        instance_id: str | None = None,
        max_queued: int = MAX_QUEUED,
        max_commands: int = MAX_COMMANDS,
    ) -> None:
        self.instance_id = instance_id or uuid.uuid4().hex[:12]
        self.lease_ttl_s = lease_ttl_s
        self.timeout_s = timeout_s
        self.redis_timeout_s = redis_timeout_s
        self.url = url
        self.max_queued = max_queued
        self.max_commands = max_commands
        self.on_command: CommandHandler = _no_command
        self.on_frame: FrameHandler = lambda _sid, _prev, _seq, _text: None
        self.on_lost: LostHandler = lambda _ids: None
        self.frames_dropped = 0
        """Frames not sent because the queue was full (since the start)."""
        self._redis = _client(url, redis_timeout_s)
        self._renew = self._redis.register_script(RENEW)
        self._release = self._redis.register_script(RELEASE)
        # the listener has its own pool, with redis-py's health checks: its
        # waits for a message are bounded by itself (a quiet connection is
        # no error), and one that stops answering is found by PINGs (see
        # `_next_message`)
        self._heartbeat_s = lease_ttl_s / 3
        self._listener = _client(
            url, redis_timeout_s, health_check_interval=self._heartbeat_s
        )
        self._pubsub = self._listener.pubsub()
        self._heard_at = 0.0
        self._pinged_at: float | None = None
        self._held: dict[str, _Lease] = {}
        self._pending: dict[str, asyncio.Future[Reply]] = {}
        self._out: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
        self._tasks: asyncio.TaskGroup | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._answering: set[asyncio.Task[None]] = set()
        self._renew_trouble: str | None = None
        self._listen_trouble: str | None = None
        self._warned_at: dict[str, float] = {}
        self._unwarned: dict[str, int] = {}

    @property
    def trouble(self) -> str | None:
        """Why this instance cannot coordinate through Redis now (None: it can)."""
        return self._renew_trouble or self._listen_trouble

    @property
    def _ttl_ms(self) -> int:
        return max(int(self.lease_ttl_s * 1000), 1)

    @property
    def _safe_s(self) -> float:
        """How long after a renewal is sent the lease is surely still ours."""
        return self.lease_ttl_s * (1 - SAFETY)

    def _lease(self, session_id: str) -> str:
        return f"{PREFIX}lease:{session_id}"

    def _inbox(self, instance_id: str) -> str:
        return f"{PREFIX}inbox:{instance_id}"

    def _frames(self, session_id: str) -> str:
        return f"{PREFIX}frames:{session_id}"

    def _unreachable(self, exc: BaseException, waited_s: float = 0.0) -> str:
        detail = str(exc) or f"no answer within {waited_s:.1f} s"
        return f"cannot reach Redis at {bare_urls(self.url)}: {detail}"

    def _warn(self, what: str, message: str, *args: object) -> None:
        """Log `message` at most once a second per `what`, with how many
        times it happened since (the last argument)."""
        self._unwarned[what] = self._unwarned.get(what, 0) + 1
        now = time.monotonic()
        if now - self._warned_at.get(what, -math.inf) >= 1.0:
            log.warning(message, *args, self._unwarned.pop(what))
            self._warned_at[what] = now

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        try:
            await self._redis.ping()
            await self._pubsub.subscribe(self._inbox(self.instance_id))
            await self._alive_now()
        except (RedisError, OSError) as exc:
            await self._redis.aclose()
            await self._listener.aclose()
            raise BusError(self._unreachable(exc)) from exc
        self._heard_at = asyncio.get_running_loop().time()
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        self._loops = [
            self._tasks.create_task(self._listen()),
            self._tasks.create_task(self._write()),
            self._tasks.create_task(self._keep_leases()),
        ]
        log.info("bus: instance %s on Redis %s", self.instance_id, bare_urls(self.url))

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, None
        if tasks is not None:
            await self._drain_queue()
        try:
            await cancel_all([*self._loops, *self._answering])
            if tasks is not None:
                await tasks.__aexit__(None, None, None)
        finally:
            held, self._held = list(self._held), {}
            with contextlib.suppress(RedisError, OSError):
                async with self._redis.pipeline(transaction=False) as pipe:
                    for session_id in held:
                        await self._release(
                            keys=[self._lease(session_id)],
                            args=[self.instance_id],
                            client=pipe,
                        )
                    pipe.delete(f"{PREFIX}instance:{self.instance_id}")
                    await pipe.execute()
            with contextlib.suppress(RedisError, OSError):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]
            await self._listener.aclose()
            await self._redis.aclose()

    async def _drain_queue(self) -> None:
        """Send what is queued before stopping (the last frames and replies)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.timeout_s):
                await self._out.join()

    # ------------------------------------------------------------ leases

    async def claim(self, session_id: str) -> bool:
        sent = asyncio.get_running_loop().time()
        try:
            taken = await self._redis.set(
                self._lease(session_id), self.instance_id, nx=True, px=self._ttl_ms
            )
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot take the lease on {session_id}: {exc}") from exc
        if taken:
            self._held[session_id] = _Lease(sent + self._safe_s)
        return bool(taken)

    async def owner_of(self, session_id: str) -> str | None:
        return (await self.owners([session_id]))[0]

    async def owners(self, session_ids: Sequence[str]) -> list[str | None]:
        if not session_ids:
            return []
        try:
            values = await self._redis.mget([self._lease(s) for s in session_ids])
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot read leases: {exc}") from exc
        return [value if isinstance(value, str) else None for value in values]

    async def lease_left(self, session_id: str) -> float:
        try:
            left_ms = await self._redis.pttl(self._lease(session_id))
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot read the lease on {session_id}: {exc}") from exc
        if left_ms == -1:  # no expiry: not one of ours; treat as a fresh lease
            return self.lease_ttl_s
        return max(int(left_ms), 0) / 1000

    def holds(self, session_id: str) -> bool:
        return session_id in self._held

    def release(self, session_id: str) -> None:
        if self._held.pop(session_id, None) is not None:
            self._out.put_nowait(("release", self._lease(session_id), ""))

    async def alive(self) -> set[str]:
        pattern = f"{PREFIX}instance:*"
        found = set()
        async for key in self._redis.scan_iter(match=pattern, count=100):
            found.add(str(key).removeprefix(f"{PREFIX}instance:"))
        return found

    async def _alive_now(self) -> None:
        await self._redis.set(
            f"{PREFIX}instance:{self.instance_id}", str(time.time()), px=self._ttl_ms
        )

    async def _keep_leases(self) -> None:
        """Renew every lease each third of the TTL (a round that overruns is
        followed by the next at once)."""
        loop = asyncio.get_running_loop()
        every = self.lease_ttl_s / 3
        next_at = loop.time() + every
        while True:
            await asyncio.sleep(max(next_at - loop.time(), 0))
            next_at = loop.time() + every
            await self._renew_round(every)

    async def _renew_round(self, every: float) -> None:
        held = list(self._held.items())
        chunks = [held[i : i + RENEW_CHUNK] for i in range(0, len(held), RENEW_CHUNK)]
        renewed = await asyncio.gather(
            self._keep_alive(every), *(self._renew_chunk(chunk) for chunk in chunks)
        )
        if all(renewed):
            self._renew_trouble = None

    async def _keep_alive(self, every: float) -> bool:
        try:
            async with asyncio.timeout(every):
                await self._alive_now()
        except (RedisError, OSError) as exc:  # TimeoutError is an OSError
            stop_if_cancelled()
            self._renew_trouble = self._unreachable(exc, every)
            log.warning(
                "bus: cannot renew this instance's key: %s",
                str(exc) or "no answer in time",
            )
            return False
        return True

    async def _renew_chunk(self, chunk: list[tuple[str, _Lease]]) -> bool:
        """Renew `chunk`, trying again while its leases last; True once done."""
        loop = asyncio.get_running_loop()
        pause = RETRY_MIN_S
        while chunk := self._let_expired_go(chunk):
            deadline = min(lease.safe_until for _, lease in chunk)
            sent = loop.time()
            try:
                async with asyncio.timeout_at(deadline):
                    lost = await self._renew(
                        keys=[self._lease(s) for s, _ in chunk],
                        args=[self.instance_id, self._ttl_ms],
                    )
            except (RedisError, OSError) as exc:  # TimeoutError is an OSError
                stop_if_cancelled()
                self._renew_trouble = self._unreachable(exc, loop.time() - sent)
                log.warning(
                    "bus: cannot renew %d leases (trying again while they last): %s",
                    len(chunk),
                    str(exc) or "no answer in time",
                )
                await asyncio.sleep(max(min(pause, deadline - loop.time()), 0))
                pause = min(pause * 2, RECONNECT_MAX_S)
                continue
            self._renewed(chunk, [int(i) - 1 for i in lost], sent)
            return True
        return False

    def _let_expired_go(
        self, chunk: list[tuple[str, _Lease]]
    ) -> list[tuple[str, _Lease]]:
        """Report lost and release the leases of `chunk` past their safe
        expiry (or too close to it for another try); return the others that
        are still held."""
        horizon = asyncio.get_running_loop().time() + RETRY_MIN_S
        kept: list[tuple[str, _Lease]] = []
        expired: list[str] = []
        for session_id, lease in chunk:
            if self._held.get(session_id) is not lease:
                continue  # released (or released and claimed again) meanwhile
            if lease.safe_until > horizon:
                kept.append((session_id, lease))
                continue
            expired.append(session_id)
            del self._held[session_id]
            # a renewal abandoned in flight may have run: give the lease up
            self._out.put_nowait(("release", self._lease(session_id), ""))
        if expired:
            log.error(
                "bus: %d leases could not be renewed before they expire (Redis "
                "did not answer in time); letting their conversations go",
                len(expired),
            )
            self.on_lost(expired)
        return kept

    def _renewed(
        self, chunk: list[tuple[str, _Lease]], lost: list[int], sent: float
    ) -> None:
        """The renewal sent at `sent` ran: the leases it found ours are safe
        for longer, the others are lost (taken by another instance)."""
        gone = set(lost)
        taken: list[str] = []
        for index, (session_id, lease) in enumerate(chunk):
            if self._held.get(session_id) is not lease:
                continue
            if index in gone:
                del self._held[session_id]
                taken.append(session_id)
            else:
                lease.safe_until = sent + self._safe_s
        if taken:
            log.warning("bus: %d leases were taken by other instances", len(taken))
            self.on_lost(taken)

    # ------------------------------------------------------------ commands

    async def request(
        self, instance_id: str, command: Command, *, timeout_s: float | None = None
    ) -> Reply:
        command = replace(command, sender=self.instance_id)
        if instance_id == self.instance_id:
            return await self.on_command(command)
        request_id = uuid.uuid4().hex
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        payload = encode(
            {"id": request_id, "reply_to": self.instance_id, **command.to_json()}
        )
        try:
            receivers = await self._redis.publish(
                self._inbox(instance_id), "C" + payload
            )
            if not receivers:
                raise InstanceGone(f"instance {instance_id} is not running")
            async with asyncio.timeout(timeout_s or self.timeout_s):
                return await future
        except TimeoutError as exc:
            raise BusError(
                f"instance {instance_id} did not answer within "
                f"{timeout_s or self.timeout_s:g} s"
            ) from exc
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot reach instance {instance_id}: {exc}") from exc
        finally:
            self._pending.pop(request_id, None)

    async def _answer(self, request_id: str, reply_to: str, command: Command) -> None:
        try:
            reply = await self.on_command(command)
        except Exception:  # the asker hears of it; the log has the traceback
            log.exception("bus: command %s failed", command.kind)
            reply = Reply(
                "error",
                error_type="internal_error",
                message=f"internal error on instance {self.instance_id}",
            )
        self._reply(request_id, reply_to, reply)

    def _reply(self, request_id: str, reply_to: str, reply: Reply) -> None:
        """Queue `reply` (never dropped: there is one per command)."""
        payload = encode({"id": request_id, "reply": reply.to_json()})
        self._out.put_nowait(("publish", self._inbox(reply_to), "R" + payload))

    def _refuse(self, request_id: str, reply_to: str) -> None:
        self._warn(
            "busy",
            "bus: %d commands in progress; commands refused: %d",
            self.max_commands,
        )
        busy = Reply(
            "error",
            error_type="unavailable",
            message=f"instance {self.instance_id} is too busy; try again",
        )
        self._reply(request_id, reply_to, busy)

    # ------------------------------------------------------------ frames

    def publish(self, session_id: str, prev_seq: int, seq: int, text: str) -> None:
        if self._out.qsize() >= self.max_queued:
            # the watchers see the gap at the next frame and attach again
            self.frames_dropped += 1
            self._warn(
                "full",
                "bus: %d messages wait for Redis; frames dropped: %d",
                self._out.qsize(),
            )
            return
        self._out.put_nowait(
            ("publish", self._frames(session_id), f"{prev_seq}:{seq}:{text}")
        )

    async def watch(self, session_id: str) -> None:
        try:
            await self._pubsub.subscribe(self._frames(session_id))
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot watch {session_id}: {exc}") from exc

    async def unwatch(self, session_id: str) -> None:
        with contextlib.suppress(RedisError, OSError):
            await self._pubsub.unsubscribe(self._frames(session_id))

    # ------------------------------------------------------------ the loops

    async def _listen(self) -> None:
        inbox = self._inbox(self.instance_id)
        frames = f"{PREFIX}frames:"
        pause = RETRY_MIN_S
        while True:
            try:
                message = await self._next_message()
            except (RedisError, OSError) as exc:
                stop_if_cancelled()
                self._listen_trouble = self._unreachable(exc)
                log.warning("bus: listening failed (reconnecting): %s", exc)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RECONNECT_MAX_S)
                continue
            stop_if_cancelled()  # redis-py may return None for a cancellation
            pause = RETRY_MIN_S
            self._listen_trouble = None
            if message is None or message.get("type") != "message":
                continue
            channel, data = str(message["channel"]), str(message["data"])
            if channel == inbox:
                self._inbox_message(data)
            elif channel.startswith(frames):
                prev, seq, text = data.split(":", 2)
                self.on_frame(channel[len(frames) :], int(prev), int(seq), text)

    async def _next_message(self) -> dict[str, Any] | None:
        """The next message (or None after a while). A quiet connection is
        fine; after a third of a lease of quiet it is PINGed, and one that
        does not answer within the Redis timeout is dropped (the next read
        connects again and subscribes to the same channels)."""
        loop = asyncio.get_running_loop()
        if self._pinged_at is None:
            wait = self._heard_at + self._heartbeat_s - loop.time()
        else:
            wait = self._pinged_at + self.redis_timeout_s - loop.time()
        # whatever is read shows the connection lives: a message, a
        # subscription's confirmation, a PING's answer (whose shape differs
        # between RESP2 and RESP3, hence not asked to be left out)
        message: dict[str, Any] | None = await self._pubsub.get_message(
            ignore_subscribe_messages=False, timeout=max(wait, 0)
        )
        now = loop.time()
        if message is not None:
            self._heard_at, self._pinged_at = now, None
        elif self._pinged_at is not None and now >= (
            self._pinged_at + self.redis_timeout_s
        ):
            self._heard_at, self._pinged_at = now, None
            if self._pubsub.connection is not None:
                await self._pubsub.connection.disconnect()
            raise RedisConnectionError(
                f"no answer to a PING within {self.redis_timeout_s:g} s"
            )
        elif self._pinged_at is None and now >= self._heard_at + self._heartbeat_s:
            await self._pubsub.ping()
            self._pinged_at = now
        return message

    def _inbox_message(self, data: str) -> None:
        kind, body = data[:1], json.loads(data[1:])
        if kind == "R":
            future = self._pending.get(body["id"])
            if future is not None and not future.done():
                future.set_result(Reply.from_json(body["reply"]))
        elif kind == "C" and self._tasks is not None:
            if len(self._answering) >= self.max_commands:
                self._refuse(body["id"], body["reply_to"])
                return
            command = Command.from_json(body)
            task = self._tasks.create_task(
                self._answer(body["id"], body["reply_to"], command)
            )
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)

    async def _write(self) -> None:
        while True:
            batch = [await self._out.get()]
            while not self._out.empty() and len(batch) < BATCH:
                batch.append(self._out.get_nowait())
            try:
                await self._send(batch)
            except (RedisError, OSError) as exc:
                stop_if_cancelled()
                # watchers see the gap (each frame names the one before) and
                # ask the owner again; a lost release expires with its TTL
                log.warning("bus: %d messages not sent: %s", len(batch), exc)
            finally:
                for _ in batch:
                    self._out.task_done()

    async def _send(self, batch: list[tuple[str, str, str]]) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            for op, key, payload in batch:
                if op == "publish":
                    pipe.publish(key, payload)
                else:
                    await self._release(
                        keys=[key], args=[self.instance_id], client=pipe
                    )
            await pipe.execute()
