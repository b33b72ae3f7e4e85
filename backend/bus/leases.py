"""`Leases`: the conversations this instance owns, kept in Redis.

`lease:<session>` = the owning instance's id, with a TTL of `lease_ttl_s`;
taken with `SET NX`, renewed every third of the TTL by one script per chunk
of leases (a lease that no longer names the instance is reported lost),
given up by a script that deletes it only if it is still ours.
`instance:<id>`: the instance is alive (same TTL, renewed with the leases).

**Lease deadlines.** Each lease is *safe* until a lease's TTL after the last
renewal (or claim) known to have reached Redis was *sent*, less `SAFETY` of
the TTL for clocks and for the service to let go: Redis counts the TTL from
when it ran the command, later than when it was sent. A renewal waits for
its answer, and is tried again when it fails, for as long as it can still
land before the earliest safe expiry of its chunk; a lease past its safe
expiry is reported lost (`on_lost`) and released with the compare-and-delete
script, best effort (a renewal abandoned in flight may still have run). A
lease the renewal script finds not ours is reported lost, not released.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from backend.aio import stop_if_cancelled
from backend.bus.base import BusError, LostHandler
from backend.bus.connection import (
    PREFIX,
    RECONNECT_MAX_S,
    RETRY_MIN_S,
    instance_key,
    lease_key,
    unreachable,
)
from backend.bus.outgoing import Outgoing

log = logging.getLogger(__name__)

RENEW_CHUNK = 1000
"""Most leases renewed by one script call."""
SAFETY = 0.1
"""The part of a lease's TTL not counted on (clock drift, letting go)."""

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


@dataclass(slots=True)
class _Lease:
    safe_until: float
    """Loop time until which the lease surely still names this instance."""


Chunk = list[tuple[str, _Lease]]


class Leases:
    def __init__(
        self,
        redis: aioredis.Redis,
        url: str,
        instance_id: str,
        *,
        lease_ttl_s: float,
        outgoing: Outgoing,
        release: AsyncScript,
        on_lost: LostHandler,
    ) -> None:
        self._redis = redis
        self._renew = redis.register_script(RENEW)
        self._release = release
        self.url = url
        self.instance_id = instance_id
        self.lease_ttl_s = lease_ttl_s
        self._outgoing = outgoing
        self._on_lost = on_lost
        self.held: dict[str, _Lease] = {}
        self.trouble: str | None = None
        """Why a renewal failed (None once a round succeeds)."""

    @property
    def _ttl_ms(self) -> int:
        return max(int(self.lease_ttl_s * 1000), 1)

    @property
    def _safe_s(self) -> float:
        """How long after a renewal is sent the lease is surely still ours."""
        return self.lease_ttl_s * (1 - SAFETY)

    async def claim(self, session_id: str) -> bool:
        sent = asyncio.get_running_loop().time()
        try:
            taken = await self._redis.set(
                lease_key(session_id), self.instance_id, nx=True, px=self._ttl_ms
            )
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot take the lease on {session_id}: {exc}") from exc
        if taken:
            self.held[session_id] = _Lease(sent + self._safe_s)
        return bool(taken)

    async def owners(self, session_ids: Sequence[str]) -> list[str | None]:
        if not session_ids:
            return []
        try:
            values = await self._redis.mget([lease_key(s) for s in session_ids])
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot read leases: {exc}") from exc
        return [value if isinstance(value, str) else None for value in values]

    async def lease_left(self, session_id: str) -> float:
        try:
            left_ms = await self._redis.pttl(lease_key(session_id))
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot read the lease on {session_id}: {exc}") from exc
        if left_ms == -1:  # no expiry: not one of ours; treat as a fresh lease
            return self.lease_ttl_s
        return max(int(left_ms), 0) / 1000

    def release(self, session_id: str) -> None:
        if self.held.pop(session_id, None) is not None:
            self._outgoing.release(lease_key(session_id))

    async def give_up(self) -> None:
        """Release every lease and this instance's key, best effort (when
        stopping; what is not released expires with its TTL)."""
        held, self.held = list(self.held), {}
        with contextlib.suppress(RedisError, OSError):
            async with self._redis.pipeline(transaction=False) as pipe:
                for session_id in held:
                    await self._release(
                        keys=[lease_key(session_id)],
                        args=[self.instance_id],
                        client=pipe,
                    )
                pipe.delete(instance_key(self.instance_id))
                await pipe.execute()

    async def alive(self) -> set[str]:
        pattern = instance_key("*")
        found = set()
        async for key in self._redis.scan_iter(match=pattern, count=100):
            found.add(str(key).removeprefix(f"{PREFIX}instance:"))
        return found

    async def alive_now(self) -> None:
        await self._redis.set(
            instance_key(self.instance_id), str(time.time()), px=self._ttl_ms
        )

    async def keep(self) -> None:
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
        held = list(self.held.items())
        chunks = [held[i : i + RENEW_CHUNK] for i in range(0, len(held), RENEW_CHUNK)]
        renewed = await asyncio.gather(
            self._keep_alive(every), *(self._renew_chunk(chunk) for chunk in chunks)
        )
        if all(renewed):
            self.trouble = None

    async def _keep_alive(self, every: float) -> bool:
        try:
            async with asyncio.timeout(every):
                await self.alive_now()
        except (RedisError, OSError) as exc:  # TimeoutError is an OSError
            stop_if_cancelled()
            self.trouble = unreachable(self.url, exc, every)
            log.warning(
                "bus: cannot renew this instance's key: %s",
                str(exc) or "no answer in time",
            )
            return False
        return True

    async def _renew_chunk(self, chunk: Chunk) -> bool:
        """Renew `chunk`, trying again while its leases last; True once done."""
        loop = asyncio.get_running_loop()
        pause = RETRY_MIN_S
        while chunk := self._let_expired_go(chunk):
            deadline = min(lease.safe_until for _, lease in chunk)
            sent = loop.time()
            try:
                async with asyncio.timeout_at(deadline):
                    lost = await self._renew(
                        keys=[lease_key(s) for s, _ in chunk],
                        args=[self.instance_id, self._ttl_ms],
                    )
            except (RedisError, OSError) as exc:  # TimeoutError is an OSError
                stop_if_cancelled()
                self.trouble = unreachable(self.url, exc, loop.time() - sent)
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

    def _let_expired_go(self, chunk: Chunk) -> Chunk:
        """Report lost and release the leases of `chunk` past their safe
        expiry (or too close to it for another try); return the others that
        are still held."""
        horizon = asyncio.get_running_loop().time() + RETRY_MIN_S
        kept: Chunk = []
        expired: list[str] = []
        for session_id, lease in chunk:
            if self.held.get(session_id) is not lease:
                continue  # released (or released and claimed again) meanwhile
            if lease.safe_until > horizon:
                kept.append((session_id, lease))
                continue
            expired.append(session_id)
            del self.held[session_id]
            # a renewal abandoned in flight may have run: give the lease up
            self._outgoing.release(lease_key(session_id))
        if expired:
            log.error(
                "bus: %d leases could not be renewed before they expire (Redis "
                "did not answer in time); letting their conversations go",
                len(expired),
            )
            self._on_lost(expired)
        return kept

    def _renewed(self, chunk: Chunk, lost: list[int], sent: float) -> None:
        """The renewal sent at `sent` ran: the leases it found ours are safe
        for longer, the others are lost (taken by another instance)."""
        gone = set(lost)
        taken: list[str] = []
        for index, (session_id, lease) in enumerate(chunk):
            if self.held.get(session_id) is not lease:
                continue
            if index in gone:
                del self.held[session_id]
                taken.append(session_id)
            else:
                lease.safe_until = sent + self._safe_s
        if taken:
            log.warning("bus: %d leases were taken by other instances", len(taken))
            self._on_lost(taken)
