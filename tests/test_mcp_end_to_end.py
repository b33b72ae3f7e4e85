"""MCP tools through the whole app: listed in session_ready, called by the loop."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx

from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason, test_registry
from tests.ws_client import labels

SERVERS = Path(__file__).resolve().parent / "mcp_servers"


def _config(tmp_path: Path, **servers: dict[str, object]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


async def test_mcp_tools_are_listed_and_called(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A working MCP server's tools are listed and called; a broken one is left out."""
    config = _config(
        tmp_path,
        demo={
            "command": sys.executable,
            "args": [str(SERVERS / "tools_server.py")],
            "effects": {"tools": {"add": {"read_only": True, "idempotent": True}}},
        },
        broken={"command": str(tmp_path / "no-such-binary")},
    )
    llm = ScriptedLLM(
        reason("add with the MCP tool"),
        calls(("demo__add", {"a": 2, "b": 40})),
        observe(should_continue=False, final="2 + 40 = 42"),
    )
    harness = await start_server(llm, test_registry(), mcp_config=str(config))
    client, ready = await harness.ready_client()

    tools = {t["name"]: t for t in ready["tools"]}
    assert "demo__add" in tools and "demo__crash" in tools
    assert not any(name.startswith("broken__") for name in tools)
    assert tools["demo__add"]["effect"]["read_only"] is True
    assert tools["demo__echo"]["effect"] == {
        "read_only": False,
        "idempotent": False,
        "requires_approval": True,  # nothing configured: it asks first
        "asks_after_untrusted": True,
        "untrusted_result": True,  # another system's reply
        "finalize": False,
    }
    async with httpx.AsyncClient() as http:
        health = (await http.get(harness.server.url("/healthz"))).json()
        info = (await http.get(harness.server.url("/api/info"))).json()
    assert health == {"status": "ok"}  # liveness only: nothing about the setup
    assert info["mcp"] == {"demo": "up", "broken": "failed"}  # reasons: the log
    frames = await client.chat("add 2 and 40", agent_mode=True)

    assert labels(frames)[3:5] == ["tool_start:demo__add", "tool_complete:demo__add"]
    assert frames[4]["result"] == {"sum": 42.0}
    act = llm.requests[1]
    spec = next(t for t in act.tools if t.name == "demo__add")
    assert spec.parameters["required"] == ["a", "b"]
    assert frames[-3]["message"] == "2 + 40 = 42"


async def test_mcp_server_crash_mid_call_is_reported(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A server crash mid-call fails the tool step, and later chats still work."""
    config = _config(
        tmp_path,
        demo={
            "command": sys.executable,
            "args": [str(SERVERS / "tools_server.py")],
            "effects": {"default": {"requires_approval": False}},
        },
    )
    llm = ScriptedLLM(
        reason("crash it"),
        calls(("demo__crash", {})),
        observe(should_continue=False, final="The MCP server died."),
        "Hello again.",
    )
    harness = await start_server(llm, test_registry(), mcp_config=str(config))
    client, _ = await harness.ready_client()

    frames = await client.chat("crash", agent_mode=True)

    assert labels(frames)[3:5] == [
        "tool_start:demo__crash",
        "tool_error:demo__crash:failed",
    ]
    assert frames[4]["error"].startswith("MCP server 'demo' is not available")
    assert labels(await client.chat("hi"))[-2:] == [
        "chat_response",
        "response_complete",
    ]
