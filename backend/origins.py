"""Where a conversation came from: the kind of client that started it.

Stored with the conversation when it is made (`ConversationRecord.origin`),
so the page can list its own conversations apart from those of scripts
(`GET /api/conversations?origin=page,unknown`). The set is closed: a
WebSocket client that names itself with anything else counts as `ws`.
"""

from __future__ import annotations

from typing import Literal, get_args

Origin = Literal[
    "page",
    "python",
    "cli",
    "api",
    "openai",
    "ag-ui",
    "ai-sdk",
    "ws",
    "import",
    "unknown",
]
"""`page`: the chat page; `python`: the Python client; `cli`: the command
line; `api`: the HTTP agent API; `openai`: the OpenAI-compatible API;
`ag-ui`: AG-UI; `ai-sdk`: the AI SDK's UI message stream; `ws`: any other
WebSocket client; `import`: an imported export; `unknown`: made before
conversations were tagged."""

ORIGINS: tuple[str, ...] = get_args(Origin)
WS_CLIENTS = frozenset({"page", "python", "cli"})
"""What a WebSocket client may call itself (`/ws?client=…`)."""


def ws_origin(client: str | None) -> str:
    """The origin of a conversation a WebSocket client starts, from the
    name it gave (`client`); `ws` for none or one not known."""
    return client if client in WS_CLIENTS else "ws"


def parse_origins(text: str) -> frozenset[str]:
    """A comma-separated list of origins (`page,unknown`); `ValueError`
    naming the allowed ones for an empty or unknown one."""
    wanted = frozenset(part.strip() for part in text.split(","))
    unknown = sorted(wanted - set(ORIGINS))
    if unknown:
        named = ", ".join(repr(o) for o in unknown)
        raise ValueError(f"origin {named} is not one of: {', '.join(ORIGINS)}")
    return wanted
