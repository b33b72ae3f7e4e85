"""A tool teaches the offline model by itself: its skill travels with it.

The dice tool below, and its skill, are defined here and nowhere else; the
offline model (backend/llm) learns to use it from the registry alone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from backend.llm.offline_skill import BaseSkill, Call, Capability, Need, Reply
from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from backend.tools.builtin import builtin_tools
from tests.conftest import StartServer
from tests.ws_client import labels

LLM_PACKAGE = Path(__file__).resolve().parent.parent / "backend" / "llm"


class DiceArgs(BaseModel):
    sides: int = Field(ge=2, le=1000)


async def roll(args: DiceArgs, ctx: ToolContext) -> dict[str, int]:
    return {"sides": args.sides, "roll": args.sides}  # loaded dice: the top face


class DiceSkill(BaseSkill):
    priority = 25
    capabilities = (Capability("roll dice", ("roll a d20",)),)
    _ROLL = re.compile(r"\broll\b.*?\bd(?P<sides>\d+)\b", re.IGNORECASE)

    def match(self, text: str) -> Need | None:
        found = self._ROLL.search(text)
        if found is None:
            return None
        sides = int(found["sides"])
        return Call({"sides": sides}, f"roll a d{sides}")

    def reply(self, call: Call, result: Any) -> Reply | None:
        if not isinstance(result, dict) or "roll" not in result:
            return None
        return Reply(
            f"You rolled **{result['roll']}** on a d{result['sides']}.",
            f"The dice tool rolled {result['roll']}.",
        )


def with_dice() -> ToolRegistry:
    dice = Tool(
        "dice",
        "Roll a die with the given number of sides.",
        DiceArgs,
        roll,
        ToolEffect(read_only=True),
        offline=DiceSkill(),
    )
    return ToolRegistry([*builtin_tools(), dice])


async def test_a_new_tool_with_a_skill_is_used_end_to_end(
    start_server: StartServer,
) -> None:
    """A tool with an offline skill is called, answered and listed in help."""
    harness = await start_server(registry=with_dice(), llm_provider="offline")
    client, _ = await harness.ready_client()

    frames = await client.chat("roll a d20 for me", agent_mode=True)

    assert labels(frames) == [
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "tool_start:dice",
        "tool_complete:dice",
        "agent_observe",
        "chat_response",
        "agent_completion",
        "response_complete",
    ]
    assert frames[2]["content"] == "I'll use the dice tool to roll a d20."
    assert frames[3]["arguments"] == {"sides": 20}
    assert frames[5]["control"]["observation"] == "The dice tool rolled 20."
    assert frames[-3]["message"] == "You rolled **20** on a d20."

    parts = await client.chat("roll a d6 and 2+2", agent_mode=True)
    assert parts[-3]["message"] == "You rolled **6** on a d6.\n\n2 + 2 = **4**"

    helped = await client.chat("what can you do?")
    assert "- roll dice — “roll a d20”" in helped[-2]["message"]


def test_the_llm_package_imports_no_tools() -> None:
    """backend/llm knows tools only through the skill seam it defines."""
    for module in LLM_PACKAGE.glob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        imported = [
            node.module or ""
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
        ] + [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        ]
        assert not [name for name in imported if name.startswith("backend.tools")], (
            module.name
        )
