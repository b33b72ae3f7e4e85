"""Custom instructions over HTTP: the caller's own, for every run they
start (`GET/PUT /api/me/instructions`), or one conversation's, added to
them (`GET/PATCH /api/conversations/{id}`).

```python
from loopwire import instructions, set_instructions

await set_instructions("ws://127.0.0.1:8000/ws", "Answer in French.")
await set_instructions(url, "Call me Ada.", conversation_id=client.session_id)
print(await instructions(url))
```

Empty text clears them. Text over the server's limit (`max_chars`, from
`LOOPWIRE_INSTRUCTIONS_MAX_CHARS`) is refused with `ClientError` naming
it; a conversation not the caller's is a `ClientError` too (404); no
answer, `ConnectionFailed`.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.parse
import urllib.request

from loopwire.errors import ClientError
from loopwire.http_api import api_root, call, get


def _address(url: str, conversation_id: str | None) -> str:
    if conversation_id is None:
        return f"{api_root(url)}/api/me/instructions"
    quoted = urllib.parse.quote(conversation_id, safe="")
    return f"{api_root(url)}/api/conversations/{quoted}"


async def instructions(
    url: str, *, conversation_id: str | None = None, token: str | None = None
) -> str:
    """The caller's own instructions, or with `conversation_id` that
    conversation's ("" when there are none)."""
    answer = await asyncio.to_thread(get, _address(url, conversation_id), token)
    return str(answer["instructions"])


async def set_instructions(
    url: str,
    text: str,
    *,
    conversation_id: str | None = None,
    token: str | None = None,
) -> str:
    """Keep `text` as the caller's own instructions, or with
    `conversation_id` as that conversation's; the text as kept."""
    method = "PUT" if conversation_id is None else "PATCH"
    address = _address(url, conversation_id)
    body = {"instructions": text}
    answer = await asyncio.to_thread(call, method, address, token, body)
    if answer is None:
        raise ClientError("the server answered without the instructions")
    return str(answer["instructions"])
