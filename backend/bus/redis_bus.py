"""`RedisBus`: instances coordinated through one Redis server.

Keys and channels (under `PREFIX`):

- `lease:<session>` = the owning instance's id, with a TTL of
  `lease_ttl_s`; taken with `SET NX`, renewed every third of the TTL by one
  script for all the instance's leases (a lease that no longer names the
  instance is reported lost), given up by a script that deletes it only if
  it is still ours;
- `instance:<id>`: the instance is alive (same TTL, renewed with the leases);
- channel `inbox:<id>`: commands to the instance (`C` + JSON) and replies
  to its requests (`R` + JSON);
- channel `frames:<session>`: `<prev seq>:<seq>:<frame JSON>` from the owner.

One connection listens (pub/sub) and one task writes: frames and replies are
queued and sent in pipelines, in order, so a watcher gets an `attach` reply
before the frames published after it. Commands run in the bus's TaskGroup.
If Redis cannot be reached for longer than a lease's TTL, every lease is
reported lost (others may own those conversations by then).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace

import redis.asyncio as aioredis
from redis.exceptions import RedisError

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


async def check_reachable(url: str) -> None:
    """Raise `BusError` (the URL without its password) unless Redis answers."""
    client: aioredis.Redis = aioredis.Redis.from_url(url)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        raise BusError(f"cannot reach Redis at {bare_urls(url)}: {exc}") from exc
    finally:
        await client.aclose()


async def _no_command(_command: Command) -> Reply:
    return NOT_HERE


class RedisBus:
    clustered = True

    def __init__(
        self,
        url: str,
        *,
        lease_ttl_s: float = 10.0,
        timeout_s: float = 5.0,
        instance_id: str | None = None,
    ) -> None:
        self.instance_id = instance_id or uuid.uuid4().hex[:12]
        self.lease_ttl_s = lease_ttl_s
        self.timeout_s = timeout_s
        self.url = url
        self.on_command: CommandHandler = _no_command
        self.on_frame: FrameHandler = lambda _sid, _prev, _seq, _text: None
        self.on_lost: LostHandler = lambda _ids: None
        self._redis: aioredis.Redis = aioredis.Redis.from_url(
            url, decode_responses=True
        )
        self._renew = self._redis.register_script(RENEW)
        self._release = self._redis.register_script(RELEASE)
        self._pubsub = self._redis.pubsub()
        self._held: set[str] = set()
        self._pending: dict[str, asyncio.Future[Reply]] = {}
        self._out: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
        self._tasks: asyncio.TaskGroup | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._answering: set[asyncio.Task[None]] = set()
        self._renewed_at = time.monotonic()

    @property
    def _ttl_ms(self) -> int:
        return max(int(self.lease_ttl_s * 1000), 1)

    def _lease(self, session_id: str) -> str:
        return f"{PREFIX}lease:{session_id}"

    def _inbox(self, instance_id: str) -> str:
        return f"{PREFIX}inbox:{instance_id}"

    def _frames(self, session_id: str) -> str:
        return f"{PREFIX}frames:{session_id}"

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        try:
            await self._redis.ping()
            await self._pubsub.subscribe(self._inbox(self.instance_id))
            await self._alive_now()
        except (RedisError, OSError) as exc:
            await self._redis.aclose()
            raise BusError(
                f"cannot reach Redis at {bare_urls(self.url)}: {exc}"
            ) from exc
        self._renewed_at = time.monotonic()
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
        for task in [*self._loops, *self._answering]:
            task.cancel()
        try:
            if tasks is not None:
                await tasks.__aexit__(None, None, None)
        finally:
            held, self._held = list(self._held), set()
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
            await self._redis.aclose()

    async def _drain_queue(self) -> None:
        """Send what is queued before stopping (the last frames and replies)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.timeout_s):
                await self._out.join()

    # ------------------------------------------------------------ leases

    async def claim(self, session_id: str) -> bool:
        try:
            taken = await self._redis.set(
                self._lease(session_id), self.instance_id, nx=True, px=self._ttl_ms
            )
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot take the lease on {session_id}: {exc}") from exc
        if taken:
            self._held.add(session_id)
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
        if session_id in self._held:
            self._held.discard(session_id)
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
        """Renew every lease a third of the TTL; report those lost.

        A renewal that fails (or takes longer than a third of the TTL) is
        tried again at the next tick, as long as that tick still comes before
        the leases would expire; past that, every lease is let go, so this
        instance stops before another may take its conversations over."""
        every = self.lease_ttl_s / 3
        while True:
            await asyncio.sleep(every)
            held = list(self._held)
            sent = time.monotonic()
            try:
                async with asyncio.timeout(every):
                    lost = await self._renew_all(held)
                    await self._alive_now()
            except (RedisError, OSError, TimeoutError) as exc:
                silent = time.monotonic() - self._renewed_at
                if silent + every < self.lease_ttl_s:
                    log.warning("bus: cannot renew leases (will retry): %s", exc)
                    continue
                log.error(
                    "bus: no lease renewed for %.1f s, and the next try would "
                    "come after they expire; letting %d conversations go: %s",
                    silent,
                    len(self._held),
                    exc or "timed out",
                )
                lost = list(self._held)
            else:
                self._renewed_at = sent  # they expire a TTL after it was sent
            lost = [s for s in lost if s in self._held]
            if lost:
                self._held.difference_update(lost)
                self.on_lost(lost)

    async def _renew_all(self, held: list[str]) -> list[str]:
        lost: list[str] = []
        for start in range(0, len(held), RENEW_CHUNK):
            chunk = held[start : start + RENEW_CHUNK]
            indices = await self._renew(
                keys=[self._lease(s) for s in chunk],
                args=[self.instance_id, self._ttl_ms],
            )
            lost += [chunk[int(i) - 1] for i in indices]
        return lost

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
        payload = encode({"id": request_id, "reply": reply.to_json()})
        self._out.put_nowait(("publish", self._inbox(reply_to), "R" + payload))

    # ------------------------------------------------------------ frames

    def publish(self, session_id: str, prev_seq: int, seq: int, text: str) -> None:
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
        pause = 0.05
        while True:
            try:
                message = await self._pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=None
                )
            except (RedisError, OSError) as exc:
                log.warning("bus: listening failed (reconnecting): %s", exc)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RECONNECT_MAX_S)
                continue
            pause = 0.05
            if message is None or message.get("type") != "message":
                continue
            channel, data = str(message["channel"]), str(message["data"])
            if channel == inbox:
                self._inbox_message(data)
            elif channel.startswith(frames):
                prev, seq, text = data.split(":", 2)
                self.on_frame(channel[len(frames) :], int(prev), int(seq), text)

    def _inbox_message(self, data: str) -> None:
        kind, body = data[:1], json.loads(data[1:])
        if kind == "R":
            future = self._pending.get(body["id"])
            if future is not None and not future.done():
                future.set_result(Reply.from_json(body["reply"]))
        elif kind == "C" and self._tasks is not None:
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
