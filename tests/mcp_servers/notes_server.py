"""A tiny notes MCP server (stdio): the one `docs/mcp.example.json` runs."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes", log_level="WARNING")
NOTES: list[str] = []


@server.tool(description="Save a short note for later.")
def add_note(text: str) -> dict[str, int]:
    NOTES.append(text)
    return {"count": len(NOTES)}


@server.tool(description="List the saved notes, oldest first.")
def list_notes() -> dict[str, list[str]]:
    return {"notes": list(NOTES)}


if __name__ == "__main__":
    server.run()
