"""An MCP server that asks the user (elicitation), for loopwire's tests.

- `order`: asks for the order in a form (a titled choice of size, a number
  of cups, a yes/no) the way the SDK asks at every protocol (a resolver:
  `InputRequiredResult` at 2026-07-28, a request of its own before);
  answers what the person did: `accept {...}`, `decline` or `cancel`.
- `order_old_style`: asks with `ctx.elicit`, a request sent during the
  call (protocol 2025-06-18 and 2025-11-25 only).
- `sign_in`: asks the person to open a page (URL mode, 2025-11-25).
- `survey`: a form with a multi-select, which loopwire cannot show.

Each call appends a line to the file named by `CAFE_LOG` (if set): the
tool's name, so a test can count the calls the server got.
"""

from __future__ import annotations

import os
from typing import Annotated, Literal

from mcp.server.mcpserver import (
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from pydantic import BaseModel, Field

server = MCPServer("cafe", log_level="WARNING")


class Order(BaseModel):
    size: Literal["small", "large"] = Field(description="How big a cup")
    cups: int = Field(ge=1, le=4, description="How many cups")
    oat_milk: bool = Field(default=False, description="With oat milk")


class Survey(BaseModel):
    flavours: list[Literal["vanilla", "caramel"]]


def _log(name: str) -> None:
    path = os.environ.get("CAFE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(name + "\n")


def _said(outcome: ElicitationResult[BaseModel]) -> str:
    if outcome.action == "accept":
        return f"accept {outcome.data.model_dump_json()}"
    return outcome.action


def ask_order() -> Elicit[Order]:
    return Elicit("What would you like?", Order)


@server.tool(
    description="Order coffee; asks the user what they would like.",
    structured_output=False,
)
async def order(
    chosen: Annotated[ElicitationResult[Order], Resolve(ask_order)],
) -> str:
    _log("order")
    return _said(chosen)


@server.tool(description="Order coffee, asking the old way.", structured_output=False)
async def order_old_style(ctx: Context) -> str:
    _log("order_old_style")
    return _said(await ctx.elicit("What would you like?", Order))


@server.tool(description="Sign in to the cafe's account.", structured_output=False)
async def sign_in(ctx: Context) -> str:
    _log("sign_in")
    outcome = await ctx.elicit_url(
        "Sign in to the cafe to see your loyalty points.",
        "https://cafe.example/sign-in",
        "sign-in-1",
    )
    return outcome.action


@server.tool(description="Ask which flavours the user likes.", structured_output=False)
async def survey(ctx: Context) -> str:
    _log("survey")
    return _said(await ctx.elicit("Which flavours?", Survey))


if __name__ == "__main__":
    server.run()
