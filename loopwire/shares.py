"""Read-only share links over HTTP: `share()` makes a link to a
conversation as it is now (`POST /api/conversations/{id}/shares`),
`shares()` lists a conversation's links, newest first, and `unshare()`
stops one (`DELETE /api/shares/{share_id}`): it answers 404 from then on.

```python
from loopwire import share, shares, unshare

link = await share("ws://127.0.0.1:8000/ws", client.session_id)
print(link["url"])  # anyone with it can read the conversation, signed in or not
await unshare(url, link["id"])
```

Each link is the server's JSON: `id` (the link's secret), `url`, `title`,
`created_at` and `messages` (how many it shows). A conversation not the
caller's, a server with sharing off, or one past its links per
conversation raise `ClientError` with the server's message; no answer,
`ConnectionFailed`.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from loopwire.errors import ClientError
from loopwire.http_api import api_root, call, get


def _shares_of(url: str, conversation_id: str) -> str:
    quoted = urllib.parse.quote(conversation_id, safe="")
    return f"{api_root(url)}/api/conversations/{quoted}/shares"


async def share(
    url: str, conversation_id: str, *, token: str | None = None
) -> dict[str, Any]:
    """A new link to the conversation as it is now."""
    address = _shares_of(url, conversation_id)
    body = await asyncio.to_thread(call, "POST", address, token)
    if body is None:
        raise ClientError("the server answered without the link")
    return body


async def shares(
    url: str, conversation_id: str, *, token: str | None = None
) -> list[dict[str, Any]]:
    """The conversation's links, newest first."""
    answer = await asyncio.to_thread(get, _shares_of(url, conversation_id), token)
    links: list[dict[str, Any]] = answer["shares"]
    return links


async def unshare(url: str, share_id: str, *, token: str | None = None) -> None:
    """Stop sharing link `share_id` (the caller's)."""
    quoted = urllib.parse.quote(share_id, safe="")
    address = f"{api_root(url)}/api/shares/{quoted}"
    await asyncio.to_thread(call, "DELETE", address, token)
