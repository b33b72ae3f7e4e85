"""An MCP server (stdio) whose tools carry annotations (hints): what a
loopwire config may choose to trust (`trust_annotations`)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("hinted", log_level="WARNING")


@server.tool(
    description="Look a word up.",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
)
def lookup(word: str) -> str:
    return f"{word}: a word"


@server.tool(
    description="Erase everything.",
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
)
def erase() -> str:
    return "erased"


@server.tool(description="No hints at all.")
def plain() -> str:
    return "plain"


if __name__ == "__main__":
    server.run()
