"""What an MCP tool may do: the config says, or (when trusted) the server's
hints; a tool nobody vouched for asks the user before each call."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import mcp_types
import pytest

from backend.llm.base import ToolCall
from backend.tools.base import ToolContext, ToolEffect, ToolRegistry
from backend.tools.executor import CallScope, NeedsApproval, Ready, ToolExecutor
from backend.tools.mcp import MCPManager
from backend.tools.mcp_config import MCPServerConfig, parse_mcp_config

SCRIPT = str(Path(__file__).parent / "mcp_servers" / "hinted_server.py")
ASKS = ToolEffect(requires_approval=True)
READS = ToolEffect(requires_approval=False, read_only=True, idempotent=True)
READ_HINTS = mcp_types.ToolAnnotations(read_only_hint=True, idempotent_hint=True)


def config(**keys: Any) -> MCPServerConfig:
    entry = {"command": sys.executable, "args": [SCRIPT], **keys}
    return parse_mcp_config({"mcpServers": {"hinted": entry}})[0]


def test_an_unconfigured_tool_asks_first() -> None:
    """A tool with no configured effects needs approval, whatever its hints claim."""
    plain = config()
    assert plain.effect_for("anything") == ASKS
    assert plain.asks_by_default("anything")
    assert plain.effect_for("anything", READ_HINTS) == ASKS  # hints: not trusted


def test_the_config_decides_key_by_key() -> None:
    """Per-tool effects merge over `default`; read-only tools need no approval."""
    effects = {
        "default": {"idempotent": True},
        "tools": {
            "read": {"read_only": True},  # read-only: no need to ask
            "send": {"requires_approval": False},  # the operator vouches
            "wipe": {"read_only": False, "requires_approval": True},
        },
    }
    server = config(effects=effects)
    assert server.effect_for("read") == ToolEffect(
        requires_approval=False, read_only=True, idempotent=True
    )
    assert server.effect_for("send") == ToolEffect(
        requires_approval=False, idempotent=True
    )
    assert server.effect_for("wipe") == ToolEffect(
        idempotent=True, requires_approval=True
    )
    assert server.effect_for("other") == ToolEffect(
        idempotent=True, requires_approval=True
    )
    assert [server.asks_by_default(n) for n in ("read", "send", "wipe", "other")] == [
        False,
        False,
        False,
        True,
    ]


def test_trusted_hints_fill_only_what_the_config_leaves_unset() -> None:
    """With `trust_annotations`, hints fill only the effects the config leaves unset."""
    trusting = config(trust_annotations=True)
    assert trusting.effect_for("lookup", READ_HINTS) == READS
    assert not trusting.asks_by_default("lookup", READ_HINTS)
    assert trusting.effect_for("lookup", None) == ASKS  # no hints: the safe default
    overruled = config(
        trust_annotations=True, effects={"tools": {"lookup": {"read_only": False}}}
    )
    assert overruled.effect_for("lookup", READ_HINTS) == ToolEffect(
        idempotent=True, requires_approval=True
    )


async def test_live_servers_tools_ask_unless_configured_or_trusted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Live tools ask unless configured or trusted read-only; the askers are logged."""
    entry = {"command": sys.executable, "args": [SCRIPT]}
    configs = parse_mcp_config(
        {
            "mcpServers": {
                "doubted": entry,
                "trusted": {**entry, "trust_annotations": True},
                "vouched": {
                    **entry,
                    "effects": {
                        "default": {"requires_approval": False},
                        "tools": {"lookup": {"read_only": True}},
                    },
                },
            }
        }
    )
    with caplog.at_level(logging.INFO, logger="backend.tools.mcp"):
        async with MCPManager(configs) as manager:
            tools = manager.tools()
    assert {tool.name: tool.effect for tool in tools} == {
        "doubted__lookup": ASKS,  # hints are not trusted unless configured
        "doubted__erase": ASKS,
        "doubted__plain": ASKS,
        "trusted__lookup": READS,  # a trusted read-only hint: no approval
        "trusted__erase": ASKS,
        "trusted__plain": ASKS,
        "vouched__lookup": ToolEffect(requires_approval=False, read_only=True),
        "vouched__erase": ToolEffect(requires_approval=False),
        "vouched__plain": ToolEffect(requires_approval=False),
    }
    notes = [r.getMessage() for r in caplog.records if "approval" in r.getMessage()]
    assert notes == [
        "MCP server 'doubted': calls of lookup, erase, plain wait for the user's "
        "approval (its effects in the MCP config say nothing about them; see "
        "docs/tools.md)",
        "MCP server 'trusted': calls of erase, plain wait for the user's approval "
        "(its effects in the MCP config say nothing about them; see docs/tools.md)",
    ]

    registry = ToolRegistry(tools)
    executor = ToolExecutor(registry)
    scope = CallScope(ctx=ToolContext("s1"), allowed=registry.names)
    try:
        for name, expected in [
            ("doubted__plain", NeedsApproval),
            ("trusted__lookup", Ready),
            ("vouched__erase", Ready),
        ]:
            check = executor.check(ToolCall(id="c", name=name), scope)
            assert isinstance(check, expected), (name, check)
    finally:
        await executor.aclose()
