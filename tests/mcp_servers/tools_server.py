"""An MCP server for loopwire's tests: stdio by default, `--http` for HTTP.

Tools: `echo` (text), `add` (structured), `stats` (JSON as text), `picture`
(an image block), `fail` (an error result), `pid`, `wait` (runs until
cancelled, reporting "started" / "cancelled" as lines appended to the file
or FIFO named by `channel`), `post` (a change that never finishes: reports
"started <the call's idempotency key from _meta>" to `channel`, then waits)
and `crash` (the process dies mid-call).

`--http`: serve streamable HTTP on a free 127.0.0.1 port, printing the port
as the first stdout line.
"""

from __future__ import annotations

import argparse
import os
import socket

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ImageContent

PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _signal(channel: str, line: str) -> None:
    with open(channel, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def build_server() -> MCPServer:
    server = MCPServer("demo", log_level="WARNING")

    @server.tool(description="Echo the text back.", structured_output=False)
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two numbers.")
    def add(a: float, b: float) -> dict[str, float]:
        return {"sum": a + b}

    @server.tool(description="Statistics, as JSON text.", structured_output=False)
    def stats() -> str:
        return '{"files": 3, "names": ["a", "b", "c"]}'

    @server.tool(description="A one-pixel picture.", structured_output=False)
    def picture() -> list[ImageContent]:
        return [ImageContent(data=PIXEL, mime_type="image/png")]

    @server.tool(description="Always fails.")
    def fail(reason: str) -> str:
        raise ToolError(f"cannot do that: {reason}")

    @server.tool(description="The server's process id.")
    def pid() -> dict[str, int]:
        return {"pid": os.getpid()}

    @server.tool(description="Wait until cancelled.")
    async def wait(channel: str) -> str:
        _signal(channel, "started")
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            _signal(channel, "cancelled")
            raise
        return "unreachable"

    @server.tool(description="Post an entry (it never finishes).")
    async def post(channel: str, text: str, ctx: Context) -> str:
        meta = ctx.request_context.meta or {}
        _signal(channel, f"started {meta.get('loopwire/idempotency_key')}")
        await anyio.sleep_forever()
        return "unreachable"

    @server.tool(description="Kill the server process mid-call.")
    def crash() -> str:
        os._exit(1)

    return server


def serve_http(server: MCPServer) -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # connections queue from now on, before uvicorn is up
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    options = parser.parse_args()
    server = build_server()
    if options.http:
        serve_http(server)
    else:
        server.run()


if __name__ == "__main__":
    main()
