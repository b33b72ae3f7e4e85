"""`ProtocolLLM`: a fake model that speaks the loop's protocol by purpose.

Scripted replies (`ScriptedLLM`) fit one strategy's exact call order; this
fake fits any strategy, so a contract test written once runs against every
registered strategy. It works through a script of actions — use a tool, ask
the user — reading its progress from the request's messages, never from
memory (like a real model, it sees only the request):

- `plan`: a numbered plan of the actions left;
- `reason`: the next action as the plan, `ask_user` when it is a question;
  done → `finish` with the final answer;
- `act` / `chat` with tools: a call for the next action (a question is a
  `request_input` call) if it is offered, else "No action needed." (act) or
  the answer (chat);
- `observe`: go on while actions are left, else stop with the answer;
- `final` and plain `chat`: the answer.

`hold` makes the first call of a purpose wait until the test releases it
(or cancels it), so a test can act while a run is inside any phase. Every
request is recorded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from backend.llm.base import (
    Completion,
    LLMRequest,
    Message,
    Purpose,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)

REQUEST_INPUT = "request_input"
ANSWER = "All done: the work is finished."


@dataclass(frozen=True)
class Use:
    """Call `tool` with `arguments`."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return f"Call {self.tool}."


@dataclass(frozen=True)
class Ask:
    """Ask the user `question`."""

    question: str

    def describe(self) -> str:
        return f"Ask the user: {self.question}"


Action = Use | Ask


@dataclass
class Hold:
    """Where a call waits, and the events a test watches and sets."""

    purpose: Purpose
    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    used: bool = False


class ProtocolLLM:
    def __init__(
        self,
        *actions: Action,
        answer: str = ANSWER,
        hold: Purpose | None = None,
    ) -> None:
        self.actions = list(actions)
        self.answer = answer
        self.hold = Hold(hold) if hold else None
        self.requests: list[LLMRequest] = []

    @property
    def model(self) -> str:
        return "protocol-model"

    @property
    def provider(self) -> str:
        return "protocol"

    @property
    def purposes(self) -> list[str]:
        return [r.purpose for r in self.requests]

    async def complete(self, request: LLMRequest) -> Completion:
        self.requests.append(request)
        hold = self.hold
        if hold is not None and not hold.used and request.purpose == hold.purpose:
            hold.used = True
            hold.started.set()
            try:
                await hold.release.wait()
            except asyncio.CancelledError:
                hold.cancelled.set()
                raise
        content, calls = self._reply(request)
        return Completion(
            content=content,
            tool_calls=calls,
            usage=Usage(
                prompt_tokens=10, completion_tokens=5, total_tokens=15, llm_calls=1
            ),
        )

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        completion = await self.complete(request)
        for word in completion.content.split(" "):
            if word:
                yield TextDelta(text=word + " ")
        yield completion

    async def aclose(self) -> None:
        return None

    # ------------------------------------------------------------ replies

    def _reply(self, request: LLMRequest) -> tuple[str, tuple[ToolCall, ...]]:
        left = self.actions[_done(request.messages) :]
        offered = (
            {t.name for t in request.tools} if request.tool_choice != "none" else set()
        )
        match request.purpose:
            case "plan":
                steps = [a.describe() for a in left]
                return _block(
                    "Here is my plan.",
                    steps=steps,
                    final_answer="" if steps else self.answer,
                ), ()
            case "reason":
                return self._reason(left), ()
            case "observe":
                if left:
                    return _block(
                        "More to do.",
                        observation="progress",
                        should_continue=True,
                        final_answer="",
                    ), ()
                return _block(
                    "That is everything.",
                    observation="done",
                    should_continue=False,
                    final_answer=self.answer,
                ), ()
            case "act" | "chat":
                call = _call_for(left[0], offered, request.messages) if left else None
                if call is not None:
                    return "", (call,)
                return (
                    "No action needed." if request.purpose == "act" else self.answer
                ), ()
        return self.answer, ()

    def _reason(self, left: list[Action]) -> str:
        if not left:
            return _block(
                "I can answer now.",
                plan="Answer.",
                tools_to_consider=[],
                finish=True,
                final_answer=self.answer,
            )
        action = left[0]
        ask = action.question if isinstance(action, Ask) else ""
        tools = [action.tool] if isinstance(action, Use) else [REQUEST_INPUT]
        return _block(
            "Next, one action.",
            plan=action.describe(),
            tools_to_consider=tools,
            finish=False,
            final_answer="",
            ask_user=ask,
        )


def _done(messages: tuple[Message, ...]) -> int:
    """Actions done in this run: tool results, and answers given as messages."""
    first_user = next(i for i, m in enumerate(messages) if m.role == "user")
    run = messages[first_user + 1 :]
    return sum(1 for m in run if m.role == "tool" or m.role == "user")


def _call_for(
    action: Action, offered: set[str], messages: tuple[Message, ...]
) -> ToolCall | None:
    number = 1 + sum(len(m.tool_calls) for m in messages)
    if isinstance(action, Use) and action.tool in offered:
        return ToolCall(
            id=f"call_{number}",
            name=action.tool,
            arguments=json.dumps(action.arguments),
        )
    if isinstance(action, Ask) and REQUEST_INPUT in offered:
        arguments = json.dumps({"question": action.question})
        return ToolCall(id=f"call_{number}", name=REQUEST_INPUT, arguments=arguments)
    return None


def _block(prose: str, **control: Any) -> str:
    return f"{prose}\n\n```json\n{json.dumps(control)}\n```"
