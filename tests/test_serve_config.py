"""How `loopwire serve` runs uvicorn: compression and request logs, as
configured, checked on a real server process."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

from websockets.asyncio.client import connect

from tests.server_process import server_process


def sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'serve.db'}"


async def extensions(url: str) -> str | None:
    async with connect(url) as ws:  # offers permessage-deflate, as browsers do
        assert ws.response is not None
        return ws.response.headers.get("Sec-WebSocket-Extensions")


async def test_by_default_no_compression_and_no_line_per_request(
    tmp_path: Path,
) -> None:
    """By default `serve` negotiates no compression and logs no line per request."""
    async with server_process(sqlite(tmp_path), llm_provider="offline") as server:
        assert await extensions(server.ws_url) is None
        await server.terminate()
    assert not [line for line in server.lines if '"WebSocket /ws' in line]
    assert not [line for line in server.lines if "HTTP Request:" in line]


async def test_compression_and_access_log_when_asked(tmp_path: Path) -> None:
    """When asked, `serve` negotiates permessage-deflate and logs WebSocket requests."""
    async with (
        server_process(
            sqlite(tmp_path),
            llm_provider="offline",
            ws_compression="true",
            access_log="true",
        ) as server,
        AsyncExitStack(),
    ):
        offered = await extensions(server.ws_url)
        assert offered is not None and offered.startswith("permessage-deflate")
        await server.terminate()
    assert [line for line in server.lines if '"WebSocket /ws" [accepted]' in line]
