"""Drive the offline model the way the agent loop does, for its unit tests.

Requests are a system prompt, the history, then a system message with the
phase instruction (whose wording the model must not depend on).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from backend.llm.base import (
    Completion,
    LLMRequest,
    Message,
    Purpose,
    ToolCall,
    ToolChoice,
    ToolSpec,
    ToolStatus,
)
from backend.llm.offline import OfflineLLM
from backend.llm.offline_words import Words
from backend.tools.base import ToolRegistry
from backend.tools.builtin import builtin_tools
from backend.tools.notes import MemoryNotebook, note_tools

REQUEST_INPUT = ToolSpec(
    name="request_input",
    description="Ask the user a clarifying question and wait for the answer.",
    parameters={
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
)
SYSTEM = Message.system("You are loopwire, a helpful assistant. {{ not parsed }}")
PHASES = {
    "plan": "PLAN: make a numbered plan, then end with a JSON control block.",
    "reason": "REASON: think, then end with a JSON control block.",
    "act": "ACT: call the tools your plan needs.",
    "observe": "OBSERVE: judge the results, then end with a JSON control block.",
    "final": "Write the final answer now.",
    "chat": "",
}

REGISTRY = ToolRegistry([*builtin_tools(), *note_tools(MemoryNotebook())])
"""The default app's tools: the offline model learns them from their skills."""
llm = OfflineLLM(REGISTRY)
WORDS = Words(REGISTRY.offline_skills())


def request(
    purpose: Purpose,
    history: list[Message],
    tools: tuple[ToolSpec, ...] = (),
    tool_choice: ToolChoice | None = None,
) -> LLMRequest:
    instruction = [Message.system(PHASES[purpose])] if PHASES[purpose] else []
    return LLMRequest(
        messages=(SYSTEM, *history, *instruction),
        tools=tools,
        tool_choice=tool_choice,
        purpose=purpose,
    )


def split(completion: Completion) -> tuple[str, dict[str, Any]]:
    """Prose and control block of a reason/observe reply."""
    assert completion.tool_calls == ()
    match = re.fullmatch(r"(?s)(.+)\n\n```json\n(.+)\n```", completion.content)
    assert match is not None, completion.content
    control: dict[str, Any] = json.loads(match[2])
    return match[1], control


def failed(id_: str, name: str, status: ToolStatus, error: str) -> Message:
    """A failed call's result message, worded and marked as the executor does."""
    return Message.tool(id_, name, f"Error ({status}): {error}", status, error)


def call(id_: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(
        id=id_, name=name, arguments=json.dumps(arguments, ensure_ascii=False)
    )


@dataclass(frozen=True)
class Phases:
    """One call per phase, with the tools an agent run / a final answer sees."""

    agent_tools: tuple[ToolSpec, ...]
    final_tools: tuple[ToolSpec, ...]

    async def reason(self, history: list[Message]) -> tuple[str, dict[str, Any]]:
        return split(await llm.complete(request("reason", history)))

    async def act(
        self, history: list[Message], tools: tuple[ToolSpec, ...] | None = None
    ) -> Completion:
        offered = self.agent_tools if tools is None else tools
        return await llm.complete(request("act", history, offered, "auto"))

    async def observe(self, history: list[Message]) -> tuple[str, dict[str, Any]]:
        return split(await llm.complete(request("observe", history)))

    async def final(self, history: list[Message]) -> str:
        completion = await llm.complete(
            request("final", history, self.final_tools, "none")
        )
        assert completion.tool_calls == ()
        return completion.content

    async def chat(
        self,
        history: list[Message],
        tools: tuple[ToolSpec, ...] = (),
        tool_choice: ToolChoice | None = None,
    ) -> Completion:
        choice = tool_choice or ("auto" if tools else None)
        return await llm.complete(request("chat", history, tools, choice))
