"""Versions of a conversation: `branches()` lists where it forks (over
HTTP, `GET /api/conversations/{id}/branches`); `AgentClient.switch_branch`
shows another version (over the WebSocket, `switch_branch`).

```python
from loopwire import branches

for fork in await branches("ws://127.0.0.1:8000/ws", client.session_id):
    print(fork["fork_at"], [v["request"] for v in fork["versions"]])
```

An edit (`chat(..., replace_from=run_id)`) keeps what it replaced as a
branch. Each fork lists its versions oldest first: `branch_id` (null for
the version shown now), `request` (what its first message asked) and
`created_at`; `current` is the index of the version shown now.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Any

from loopwire.http_api import api_root, get


async def branches(
    url: str, conversation_id: str, *, token: str | None = None
) -> list[dict[str, Any]]:
    """Where conversation `conversation_id` forks, as the server stores it.
    A refusal (not the caller's conversation) raises `ClientError`; no
    answer, `ConnectionFailed`."""
    quoted = urllib.parse.quote(conversation_id, safe="")
    address = f"{api_root(url)}/api/conversations/{quoted}/branches"
    answer = await asyncio.to_thread(get, address, token)
    forks: list[dict[str, Any]] = answer["forks"]
    return forks
