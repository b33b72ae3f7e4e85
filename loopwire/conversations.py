"""`conversations()`: the conversations a server keeps for the caller,
newest first, over HTTP (`GET /api/conversations`).

```python
from loopwire import conversations

mine = await conversations("ws://127.0.0.1:8000/ws", origin=["page", "unknown"])
```

The URL may be the WebSocket one a client connects to (`ws://…/ws`) or the
server's HTTP root. Each item is the server's JSON: `id`, `title`,
`created_at`, `updated_at` and `origin` (the kind of client that started it:
`page`, `python`, `cli`, `api`, `openai`, `ag-ui`, `ai-sdk`, `ws`, `import`
or `unknown`).
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from typing import Any

from loopwire.http_api import api_root, get

MAX_PAGE = 100
"""The most the server lists in one page."""


def listing_url(
    url: str, *, origin: str | Iterable[str] | None = None, limit: int = 20
) -> str:
    """Where the first page of the caller's conversations is read."""
    query: dict[str, str] = {"limit": str(limit)}
    if origin is not None:
        query["origin"] = origin if isinstance(origin, str) else ",".join(origin)
    return f"{api_root(url)}/api/conversations?{urllib.parse.urlencode(query)}"


async def conversations(
    url: str,
    *,
    token: str | None = None,
    origin: str | Iterable[str] | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """The caller's newest `limit` conversations (at most 100); with
    `origin` (a name, a comma-separated list or several names) only those
    started by these kinds of client. A refusal (an unknown origin, a bad
    token) raises `ClientError` with the server's message; no answer,
    `ConnectionFailed`."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be from 1 to {MAX_PAGE}")
    address = listing_url(url, origin=origin, limit=limit)
    page = await asyncio.to_thread(get, address, token)
    items: list[dict[str, Any]] = page["items"]
    return items
