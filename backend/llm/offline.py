"""The embedded offline model: deterministic rules, no network, no weights.

It speaks the agent loop's protocol from the structured request alone — the
call's `purpose`, the messages and the offered tools — never from the prompt
text, which operators may edit:

- `reason`: prose + ```json {"plan", "tools_to_consider", "finish", "final_answer"}
- `act`: a tool call for the next needed tool (if offered), else a short note
- `observe`: prose + ```json {"observation", "should_continue", "final_answer"}
- `final`: the answer from this run's tool results, or an honest "couldn't"
- `chat`: a direct answer; with tools offered, a tool call when one is needed

What the user wants comes from `offline_intents.py`; what this run has and
what is next, from `offline_decisions.py`. Note requests ("remember that …",
"list my notes", "forget note 2") come first, from `offline_notes.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from backend.llm.base import (
    Completion,
    LLMRequest,
    Purpose,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)
from backend.llm.offline_decisions import (
    CAPABILITIES,
    REAL_MODEL_HINT,
    REQUEST_INPUT,
    Answer,
    Decision,
    Declined,
    Failure,
    NeedInput,
    NeedTool,
    Reply,
    RunState,
    calculate_locally,
    decide,
    read_run,
)
from backend.llm.offline_notes import decide_notes

MODEL = "loopwire-offline"
PROVIDER = "offline"

PhaseOutput = tuple[str, tuple[ToolCall, ...]]


class OfflineLLM:
    """`LLMClient` for the built-in demo model."""

    @property
    def model(self) -> str:
        return MODEL

    @property
    def provider(self) -> str:
        return PROVIDER

    async def complete(self, request: LLMRequest) -> Completion:
        return respond(request)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        completion = respond(request)
        for piece in split_words(completion.content):
            yield TextDelta(text=piece)
        yield completion

    async def aclose(self) -> None:
        return None


def respond(request: LLMRequest) -> Completion:
    """The offline model's whole reply to one request."""
    state = read_run(request.messages)
    decision = decide_notes(state) or decide(state)
    offered = _offered(request)
    content, calls = _PHASES[request.purpose](decision, state, offered)
    return Completion(
        content=content,
        tool_calls=calls,
        usage=_usage(request, content, calls),
        finish_reason="tool_calls" if calls else "stop",
    )


def split_words(text: str) -> list[str]:
    """`text` in word-sized pieces that join back to exactly `text`."""
    return [piece for piece in re.split(r"(?<=\s)(?=\S)", text) if piece]


# --- phases --------------------------------------------------------------------


def _reason(
    decision: Decision, state: RunState, offered: Collection[str]
) -> PhaseOutput:
    match decision:
        case NeedTool(name=name, goal=goal):
            prose = f"I'll use the {name} tool to {goal}."
            control = _plan(f"Call {name} to {goal}.", [name])
        case NeedInput(missing=missing, then=then):
            prose = f"The request doesn't say {missing}, so I'll ask the user."
            plan = f"Ask the user {missing} with {REQUEST_INPUT}, then use {then}."
            control = _plan(plan, [REQUEST_INPUT])
        case Answer(text=text):
            prose = "This run's tool results already answer the request."
            control = _finish("Answer from the tool results.", text)
        case Failure(text=text):
            prose = "A tool failed, so I'll explain what went wrong."
            control = _finish("Explain the error to the user.", text)
        case Declined(text=text):
            prose = "The user declined the tool call, so I won't try it again."
            control = _finish("Tell the user what was not done.", text)
        case Reply(text=text):
            prose = "I can answer this directly, without tools."
            control = _finish("Answer directly.", text)
    return with_control(prose, control), ()


def _act(decision: Decision, state: RunState, offered: Collection[str]) -> PhaseOutput:
    match decision:
        case NeedTool(name=name, arguments=arguments) if name in offered:
            return "", (_call(state, name, arguments),)
        case NeedTool(name=name):
            return f"The {name} tool is not available.", ()
        case NeedInput(question=question) if REQUEST_INPUT in offered:
            return "", (_call(state, REQUEST_INPUT, {"question": question}),)
        case NeedInput(question=question):
            return f"I need more information: {question}", ()
    return "No action needed.", ()


def _observe(
    decision: Decision, state: RunState, offered: Collection[str]
) -> PhaseOutput:
    match decision:
        case Answer(text=text, observation=observation):
            prose = f"{observation} That answers the request."
            control = _verdict(observation, text)
        case Failure(text=text, observation=observation):
            prose = f"{observation} I'll tell the user what went wrong."
            control = _verdict(observation, text)
        case Declined(text=text, observation=observation):
            prose = f"{observation} I won't try it again."
            control = _verdict(observation, text)
        case Reply(text=text):
            prose = "No tools were needed."
            control = _verdict(prose, text)
        case NeedTool() | NeedInput() if state.answer is not None:
            prose = (
                f"The user answered: “{state.answer}”. Next: {_next_step(decision)}."
            )
            control = {
                "observation": prose,
                "should_continue": True,
                "final_answer": "",
            }
        case _:
            prose = "Nothing was done in this step that answers the request."
            control = _verdict(prose, _closing_text(decision))
    return with_control(prose, control), ()


def _final(
    decision: Decision, state: RunState, offered: Collection[str]
) -> PhaseOutput:
    return _closing_text(decision), ()


def _chat(decision: Decision, state: RunState, offered: Collection[str]) -> PhaseOutput:
    match decision:
        case NeedTool(name=name, arguments=arguments) if name in offered:
            return "", (_call(state, name, arguments),)
        case NeedTool(name="calculator", arguments=arguments):
            return calculate_locally(str(arguments["expression"])), ()
        case NeedTool(name=name, goal=goal) | NeedInput(then=name, goal=goal) if (
            name not in offered
        ):
            return _unavailable(name, goal, offered), ()
        case NeedInput(question=question):
            return question, ()
        case _:
            return _closing_text(decision), ()


_PHASES: dict[Purpose, Callable[[Decision, RunState, Collection[str]], PhaseOutput]] = {
    "reason": _reason,
    "act": _act,
    "observe": _observe,
    "final": _final,
    "chat": _chat,
}


# --- pieces --------------------------------------------------------------------


def with_control(prose: str, control: dict[str, Any]) -> str:
    block = json.dumps(control, indent=2, ensure_ascii=False)
    return f"{prose}\n\n```json\n{block}\n```"


def _plan(plan: str, tools: list[str]) -> dict[str, Any]:
    return {
        "plan": plan,
        "tools_to_consider": tools,
        "finish": False,
        "final_answer": "",
    }


def _finish(plan: str, answer: str) -> dict[str, Any]:
    return {
        "plan": plan,
        "tools_to_consider": [],
        "finish": True,
        "final_answer": answer,
    }


def _verdict(observation: str, answer: str) -> dict[str, Any]:
    return {
        "observation": observation,
        "should_continue": False,
        "final_answer": answer,
    }


def _next_step(decision: Decision) -> str:
    if isinstance(decision, NeedTool):
        return f"use the {decision.name} tool to {decision.goal}"
    return f"ask again {decision.missing}" if isinstance(decision, NeedInput) else ""


def _closing_text(decision: Decision) -> str:
    """The answer if there is one, else an honest account of what is missing."""
    match decision:
        case NeedTool(name=name, goal=goal):
            return (
                f"I couldn't finish: I needed the {name} tool to {goal}, "
                "but it wasn't run (it may not be enabled for this session)."
            )
        case NeedInput(missing=missing):
            return (
                f"I couldn't finish: I still need to know {missing}. "
                "Reply with it and I'll carry on."
            )
        case (
            Answer(text=text)
            | Failure(text=text)
            | Declined(text=text)
            | Reply(text=text)
        ):
            return text


def _unavailable(tool: str, goal: str, offered: Collection[str]) -> str:
    if offered:
        return f"The {tool} tool is not available, so I can't {goal}."
    return (
        f"I'm loopwire's built-in offline demo model, and to {goal} I need the "
        f"{tool} tool — turn on tools or agent mode and ask again.\n\n"
        f"{CAPABILITIES}\n\n{REAL_MODEL_HINT}"
    )


def _call(state: RunState, name: str, arguments: dict[str, Any]) -> ToolCall:
    text = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(id=state.next_call_id, name=name, arguments=text)


def _offered(request: LLMRequest) -> frozenset[str]:
    if request.tool_choice == "none":
        return frozenset()
    return frozenset(tool.name for tool in request.tools)


def _usage(request: LLMRequest, content: str, calls: tuple[ToolCall, ...]) -> Usage:
    prompt = sum(
        _words(m.content) + _call_words(m.tool_calls) for m in request.messages
    )
    prompt += sum(_words(f"{t.name} {t.description}") for t in request.tools)
    completion = _words(content) + _call_words(calls)
    prompt, completion = max(prompt, 1), max(completion, 1)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        llm_calls=1,
    )


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _call_words(calls: tuple[ToolCall, ...]) -> int:
    return sum(1 + _words(call.arguments) for call in calls)
