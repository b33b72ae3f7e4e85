"""`Jwks`: an identity provider's signing keys (its JWKS document), fetched
when first needed and kept.

A token naming a key (`kid`) the set does not hold makes it fetch the set
again: that is how a provider's key rotation arrives. A token that names
no key is checked with the set's key if it has only one. Such refetches happen
at most once per `refetch_s` (so tokens with made-up key ids cannot make
the server hammer the provider), and a set older than `MAX_AGE_S` is
fetched again when next used, so a key the provider withdrew stops being
accepted within that time even if no new key appears. Fetches run on the
event loop with an async HTTP client; one at a time. A failed fetch keeps
the keys held before (and is logged).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx2
import jwt

log = logging.getLogger(__name__)

ALGORITHMS = frozenset({"RS256", "ES256"})
"""The only signatures accepted: public-key ones (never `none`, never a
shared secret)."""
MAX_AGE_S = 3600.0
MAX_BYTES = 1 << 20
TIMEOUT_S = 5.0


class Jwks:
    def __init__(
        self,
        url: str,
        *,
        refetch_s: float = 60.0,
        max_age_s: float = MAX_AGE_S,
        timeout_s: float = TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.refetch_s = refetch_s
        self.max_age_s = max_age_s
        self.timeout_s = timeout_s
        self.clock = clock
        self.fetches = 0
        """How many times the set was asked for (for tests and logs)."""
        self._keys: dict[str, jwt.PyJWK] = {}
        self._sole: jwt.PyJWK | None = None
        """The set's key when it has just one (tokens need not name it)."""
        self._fetched_at: float | None = None
        self._tried_at: float | None = None
        self._lock = asyncio.Lock()

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key `kid` names (None: the set's only key, if it has one
        key), fetching the set again when allowed."""
        known = self._find(kid)
        if known is not None and self._fresh():
            return known
        tried = self._tried_at
        async with self._lock:
            if self._tried_at == tried and self._may_fetch():
                await self._fetch()
        return self._find(kid)

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is not None:
            return self._keys.get(kid)
        return self._sole

    def _fresh(self) -> bool:
        at = self._fetched_at
        return at is not None and self.clock() - at < self.max_age_s

    def _may_fetch(self) -> bool:
        at = self._tried_at
        return at is None or self.clock() - at >= self.refetch_s

    async def _fetch(self) -> None:
        self._tried_at = self.clock()
        self.fetches += 1
        try:
            document = await self._download()
            keys = parse(document)
        except (httpx2.HTTPError, ValueError) as exc:
            log.warning("cannot fetch the signing keys at %s: %s", self.url, exc)
            return
        self._keys = {key.key_id: key for key in keys if key.key_id}
        self._sole = keys[0] if len(keys) == 1 else None
        self._fetched_at = self.clock()

    async def _download(self) -> Any:
        async with (
            httpx2.AsyncClient(timeout=self.timeout_s) as client,
            client.stream(
                "GET", self.url, headers={"Accept": "application/json"}
            ) as response,
        ):
            response.raise_for_status()
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    raise ValueError(f"the key set is over {MAX_BYTES} bytes")
        return json.loads(body)


def parse(document: Any) -> list[jwt.PyJWK]:
    """A JWKS document's signing keys of the accepted kinds (others are
    skipped); ValueError if it is not a key set at all."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWKS document (no `keys` list)")
    keys: list[jwt.PyJWK] = []
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        kid = entry.get("kid")
        if kid is not None and (not isinstance(kid, str) or not kid):
            continue
        try:
            key = jwt.PyJWK(entry)
        except jwt.PyJWTError:
            continue
        if key.algorithm_name in ALGORITHMS:
            keys.append(key)
    return keys
