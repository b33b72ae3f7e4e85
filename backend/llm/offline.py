"""The embedded offline model: deterministic rules, no network, no weights.

It speaks every strategy's protocol from the structured request alone — the
call's `purpose`, the messages and the offered tools — never from the prompt
text, which operators may edit:

- `plan`: prose + ```json {"steps", "final_answer"}``` (one step per part to do)
- `reason`: prose + ```json {"plan", "tools_to_consider", "finish",
  "final_answer", "ask_user"}```
- `act`: a call for the next needed tool (if offered), else a short note
- `observe`: prose + ```json {"observation", "should_continue", "final_answer"}```
- `final`: the answer from this run's results, or an honest "couldn't"
- `chat`: a direct answer; with tools offered, a tool call when one is needed

It knows no tool itself: each tool's *offline skill* (`offline_skill.py`)
says what a request needs of it and words the answer from its result, and
`offline_plan.py` works a request out part by part from them. What the model
says of itself is in `offline_words.py`. Having no tokenizer, it reports
its calls' tokens as loopwire estimates them for any server that reports
none (`llm/tokens.py`), marked as estimated (`Usage.estimated_calls`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from backend.errors import LLMError
from backend.llm.base import (
    Completion,
    LLMRequest,
    Purpose,
    StreamEvent,
    TextDelta,
    ToolCall,
)
from backend.llm.offline_plan import Plan, Todo, plan
from backend.llm.offline_run import REQUEST_INPUT, read
from backend.llm.offline_skill import Call, NoSkills, Question, SkillBook
from backend.llm.offline_words import (
    Words,
    not_reached,
    not_run,
    still_missing,
    unavailable,
)
from backend.llm.tokens import UNREPORTED, with_estimate

MODEL = "loopwire-offline"
PROVIDER = "offline"

INLINE_CHARS = 512
"""Requests whose user messages are longer are answered in a worker thread."""
THREAD_TIMEOUT_S = 5.0

PhaseOutput = tuple[str, tuple[ToolCall, ...]]


class OfflineLLM:
    """`LLMClient` for the built-in demo model; `skills` are read per request."""

    def __init__(self, skills: SkillBook | None = None) -> None:
        self.skills = skills or NoSkills()

    @property
    def model(self) -> str:
        return MODEL

    @property
    def provider(self) -> str:
        return PROVIDER

    async def complete(self, request: LLMRequest) -> Completion:
        return await self._respond(request)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        completion = await self._respond(request)
        for piece in split_words(completion.content):
            yield TextDelta(text=piece)
        yield completion

    async def aclose(self) -> None:
        return None

    async def _respond(self, request: LLMRequest) -> Completion:
        """A short request is answered at once (microseconds); a long one in
        a worker thread, so the event loop serves other sessions meanwhile,
        within `THREAD_TIMEOUT_S`."""
        if _text_size(request) <= INLINE_CHARS:
            return respond(request, self.skills)
        try:
            async with asyncio.timeout(THREAD_TIMEOUT_S):
                return await asyncio.to_thread(respond, request, self.skills)
        except TimeoutError:
            raise LLMError(
                f"the offline model gave up on this request after {THREAD_TIMEOUT_S:g}s"
            ) from None


def _text_size(request: LLMRequest) -> int:
    return sum(len(m.content or "") for m in request.messages if m.role == "user")


class _Turn:
    """One request as the model sees it."""

    def __init__(self, request: LLMRequest, skills: SkillBook) -> None:
        available = skills.offline_skills()
        self.skills = {s.tool: s.skill for s in available}
        self.words = Words(available)
        self.conversation = read(request.messages)
        self.plan = plan(self.conversation, available, self.words)
        self.listed = frozenset(t.name for t in request.tools)
        """The session's tools (the final answer lists them, offering none)."""
        self.offered: Collection[str] = (
            frozenset() if request.tool_choice == "none" else self.listed
        )

    def call(self, name: str, arguments: dict[str, Any]) -> ToolCall:
        text = json.dumps(arguments, ensure_ascii=False)
        return ToolCall(id=self.conversation.next_call_id, name=name, arguments=text)


def respond(request: LLMRequest, skills: SkillBook) -> Completion:
    """The offline model's whole reply to one request."""
    turn = _Turn(request, skills)
    content, calls = _PHASES[request.purpose](turn)
    reply = Completion(
        content=content,
        tool_calls=calls,
        usage=UNREPORTED,
        finish_reason="tool_calls" if calls else "stop",
    )
    return with_estimate(request, reply)


def split_words(text: str) -> list[str]:
    """`text` in word-sized pieces that join back to exactly `text`."""
    return [piece for piece in re.split(r"(?<=\s)(?=\S)", text) if piece]


# --- phases --------------------------------------------------------------------


def _plan(turn: _Turn) -> PhaseOutput:
    steps = [step for todo in turn.plan.todo for step in _plan_steps(todo)]
    if steps:
        prose = "One step per thing to do." if len(steps) > 1 else "One step to do."
        return with_control(prose, {"steps": steps, "final_answer": ""}), ()
    text = _closing(turn)
    return with_control(
        "Nothing needs doing first.", {"steps": [], "final_answer": text}
    ), ()


def _reason(turn: _Turn) -> PhaseOutput:
    todo = turn.plan.next
    if todo is None:
        prose, plan_text = _finishing(turn.plan)
        return with_control(prose, _finish(plan_text, _closing(turn))), ()
    match todo.need:
        case Call(goal=goal):
            prose = f"I'll use the {todo.tool} tool to {goal}."
            control = _next(_step_plan(todo), [todo.tool])
        case Question(question=question, missing=missing):
            prose = f"The request doesn't say {missing}, so I'll ask the user."
            control = _next(_step_plan(todo), [REQUEST_INPUT], ask_user=question)
    return with_control(prose, control), ()


def _act(turn: _Turn) -> PhaseOutput:
    todo = turn.plan.next
    if todo is None:
        return "No action needed.", ()
    match todo.need:
        case Call(arguments=arguments) if todo.tool in turn.offered:
            return "", (turn.call(todo.tool, arguments),)
        case Call():
            return f"The {todo.tool} tool is not available.", ()
        case Question() as question if REQUEST_INPUT in turn.offered:
            return "", (turn.call(REQUEST_INPUT, question.arguments()),)
        case Question(question=question):
            return f"I need more information: {question}", ()


def _observe(turn: _Turn) -> PhaseOutput:
    current, todo = turn.plan, turn.plan.next
    if todo is None:
        done = current.answer()
        if done is None:
            prose = "No tools were needed."
            return with_control(prose, _verdict(prose, _closing(turn))), ()
        prose = f"{done.observation} {_VERDICT_PROSE[done.kind]}"
        return with_control(prose, _verdict(done.observation, done.text)), ()
    conversation = turn.conversation
    if conversation.latest_is_result or current.answered is not None:
        answer = conversation.answered or current.answered
        learned = (
            f"The user answered: “{answer}”."
            if answer is not None
            else _latest(current)
        )
        prose = f"{learned} Next: {_next_step(todo)}.".strip()
        control = {"observation": prose, "should_continue": True, "final_answer": ""}
        return with_control(prose, control), ()
    prose = "Nothing was done in this step that answers the request."
    return with_control(prose, _verdict(prose, _closing(turn))), ()


def _final(turn: _Turn) -> PhaseOutput:
    return _closing(turn), ()


def _chat(turn: _Turn) -> PhaseOutput:
    """Plain chat and tool mode: call the next tool if offered, else answer."""
    texts = [d.text for d in turn.plan.done]
    for todo in turn.plan.todo:
        match todo.need:
            case Call(arguments=arguments) if todo.tool in turn.offered:
                return "", (turn.call(todo.tool, arguments),)
            case Question() as question if REQUEST_INPUT in turn.offered:
                return "", (turn.call(REQUEST_INPUT, question.arguments()),)
            case Question(question=question) if todo.tool in turn.offered:
                return "\n\n".join([*texts, question]), ()  # asked in words
            case Call() as call if (answer := todo.skill.local(call)) is not None:
                texts.append(answer)
            case _:
                texts.append(_missing_tool(turn, todo))
                break
    small_talk = turn.words.small_talk(turn.conversation.request)
    if not texts and small_talk is not None:
        return small_talk, ()  # "hi there" is no question for the documents
    if not texts:
        texts = _unplanned_results(turn)
    if not texts:
        return turn.plan.reply or turn.words.introduction(), ()
    return "\n\n".join(texts), ()


def _unplanned_results(turn: _Turn) -> list[str]:
    """What tools ran for this request without the model asking (the
    `retrieve` strategy searches before the model speaks), said by their
    skills: the answer is built from them."""
    texts = []
    for result in turn.conversation.results:
        skill = turn.skills.get(result.name)
        if skill is None or result.failed:
            continue
        reply = skill.reply(Call(result.arguments, f"use {result.name}"), result.data())
        if reply is not None:
            texts.append(reply.text)
    return texts


_PHASES: dict[Purpose, Callable[[_Turn], PhaseOutput]] = {
    "plan": _plan,
    "reason": _reason,
    "act": _act,
    "observe": _observe,
    "final": _final,
    "chat": _chat,
}

_VERDICT_PROSE = {
    "answer": "That answers the request.",
    "failure": "I'll tell the user what went wrong.",
    "declined": "I won't try it again.",
}
_FINISH = {
    "answer": (
        "This run's tool results already answer the request.",
        "Answer from the tool results.",
    ),
    "failure": (
        "A tool failed, so I'll explain what went wrong.",
        "Explain the error to the user.",
    ),
    "declined": (
        "The user declined the tool call, so I won't try it again.",
        "Tell the user what was not done.",
    ),
}


# --- pieces --------------------------------------------------------------------


def with_control(prose: str, control: dict[str, Any]) -> str:
    block = json.dumps(control, indent=2, ensure_ascii=False)
    return f"{prose}\n\n```json\n{block}\n```"


def _next(plan_text: str, tools: list[str], *, ask_user: str = "") -> dict[str, Any]:
    control: dict[str, Any] = {
        "plan": plan_text,
        "tools_to_consider": tools,
        "finish": False,
        "final_answer": "",
    }
    if ask_user:
        control["ask_user"] = ask_user
    return control


def _finish(plan_text: str, answer: str) -> dict[str, Any]:
    return {
        "plan": plan_text,
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


def _finishing(current: Plan) -> tuple[str, str]:
    """Prose and plan of a reason phase that can answer at once."""
    done = current.answer()
    if done is None:
        return "I can answer this directly, without tools.", "Answer directly."
    return _FINISH[done.kind]


def _step_plan(todo: Todo) -> str:
    match todo.need:
        case Call(goal=goal):
            return f"Call {todo.tool} to {goal}."
        case Question(missing=missing):
            return f"Ask the user {missing} with {REQUEST_INPUT}, then use {todo.tool}."


def _plan_steps(todo: Todo) -> list[str]:
    """A part's steps for plan_execute: one action each (ask, then call)."""
    match todo.need:
        case Call():
            return [_step_plan(todo)]
        case Question(missing=missing, goal=goal):
            return [
                f"Ask the user {missing} with {REQUEST_INPUT}.",
                f"Call {todo.tool} to {goal}.",
            ]


def _next_step(todo: Todo) -> str:
    match todo.need:
        case Call(goal=goal):
            return f"use the {todo.tool} tool to {goal}"
        case Question(missing=missing):
            return f"ask {missing}"


def _latest(current: Plan) -> str:
    return current.done[-1].observation if current.done else ""


def _closing(turn: _Turn) -> str:
    """Every part's answer, and an honest account of what is still missing."""
    current = turn.plan
    if current.reply is not None:
        return current.reply
    texts = [d.text for d in current.done]
    todo = current.next
    if todo is not None:
        match todo.need:
            case Call(goal=goal) if todo.tool in turn.listed:
                texts.append(not_reached(todo.tool, goal))
            case Call(goal=goal):
                texts.append(not_run(todo.tool, goal))
            case Question(missing=missing):
                texts.append(still_missing(missing))
    return "\n\n".join(texts)


def _missing_tool(turn: _Turn, todo: Todo) -> str:
    goal = todo.need.goal
    if turn.offered:
        return unavailable(todo.tool, goal)
    return turn.words.needs_tools(todo.tool, goal)
