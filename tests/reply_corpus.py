"""The shapes corpus: replies as real OpenAI-compatible servers shape them,
for `FakeOpenAIServer`.

A `CorpusModel` is a responder that speaks the loop's protocol by phase
(like `tests/protocol_llm.py`): it reads each request — which phase prompt
it ends with, which tools it offers, `tool_choice`, the tool results so far
— and decides what a model that obeys would say (`Turn`: a control block,
tool calls, or an answer). A `Shape` then writes that turn the way one kind
of server does: thinking in `<think>` or in a field of its own, a tool call
as text in some format, a control block without its fence, cut off at the
length limit, and so on. The model asks for the same work in every shape:
`add` on "2+3" (and on "1+4" in the same reply, in the shapes that send
several calls at once), and the answer `ANSWER`. The loop makes its
reason, observe, plan and act calls unstreamed and its tool-mode, plain
and final-answer calls streamed, so the modes meet each shape both ways.

`MODES` are the ways a chat can meet a shape (the four strategies in
agent mode, tool mode, plain chat); each shape names the modes it applies
to, and what a run in it must end with (`Shape.outcome`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from backend.llm.replies.cutoff import BRIEF_NOTE
from tests.fake_openai import FakeUsage, Reply

JSON = dict[str, Any]
QUESTION = "What is 2+3?"
ANSWER = "2 + 3 = 5"
THOUGHT = "PONDERING: two and three, so the add tool."
"""The thinking every reasoning shape sends: never shown as the answer."""
PLAIN_ANSWER = "2 + 3 is 5; no tool is needed for that."
"""What a model that ignores the control format writes instead of a block."""
USAGE = FakeUsage(prompt_tokens=20, completion_tokens=7)
EXPRESSIONS = ("2+3", "1+4")
"""What the model adds: once, or in two calls at once (two different calls,
so the loop's rule against running the same call twice does not apply)."""

Phase = Literal["plan", "reason", "act", "observe", "final", "chat"]
Outcome = Literal["answer", "cut_off", "no_control"]
"""How a run must end: the answer; the error saying the reply was cut off
at its length limit; the model's own final answer after the loop gave up
on replies without a control block (completion reason `error`)."""

MODES: dict[str, JSON] = {
    "react": {"agent_mode": True, "loop_strategy": "react"},
    "plan_execute": {"agent_mode": True, "loop_strategy": "plan_execute"},
    "llm_only": {"agent_mode": True, "loop_strategy": "llm_only"},
    "act": {"agent_mode": True, "loop_strategy": "act"},
    "tools": {"selected_tools": ["add"]},
    "chat": {},
}
"""The `chat` fields of each way to meet a shape."""

CONTROL_MODES = ("react", "plan_execute", "llm_only")
CALL_MODES = ("react", "plan_execute", "act", "tools")
ALL_MODES = tuple(MODES)

_HEADERS: tuple[tuple[str, Phase], ...] = (
    ("# Planning", "plan"),
    (": REASON", "reason"),
    (": ACT", "act"),
    (": OBSERVE", "observe"),
    ("# Final answer", "final"),
)


# ------------------------------------------------------------ what is meant


@dataclass(frozen=True)
class Turn:
    """What the model means to say in one call, before a shape is put on it."""

    phase: Phase
    prose: str = ""
    control: JSON | None = None
    calls: tuple[tuple[str, JSON], ...] = ()
    answer: str = ""
    retry: bool = False
    """The request asks again for a reply that was cut off."""


def phase_of(body: JSON) -> tuple[Phase, str]:
    """The phase a request is for and its prompt, from the last phase
    prompt it carries ("chat" and "" when it carries none)."""
    for message in reversed(body["messages"]):
        if message["role"] != "system":
            continue
        for header, phase in _HEADERS:
            if header in message["content"].split("\n", 1)[0]:
                return phase, message["content"]
    return "chat", ""


def _ran(body: JSON) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "tool")


def _offered(body: JSON) -> set[str]:
    if body.get("tool_choice") == "none":
        return set()
    return {tool["function"]["name"] for tool in body.get("tools", [])}


_PLAN = (
    "One step will do.",
    {"steps": ["Add 2 and 3 with the add tool."], "final_answer": ""},
)
CONTROLS: dict[tuple[Phase, bool], tuple[str, JSON]] = {
    ("plan", False): _PLAN,
    ("plan", True): _PLAN,
    ("reason", False): (
        "I will add them.",
        {
            "plan": "Add 2 and 3.",
            "tools_to_consider": ["add"],
            "finish": False,
            "final_answer": "",
        },
    ),
    ("reason", True): (
        "I can answer now.",
        {
            "plan": "Answer.",
            "tools_to_consider": [],
            "finish": True,
            "final_answer": ANSWER,
        },
    ),
    ("observe", False): (
        "More to do.",
        {"observation": "Nothing yet.", "should_continue": True, "final_answer": ""},
    ),
    ("observe", True): (
        "That answers it.",
        {"observation": "It is 5.", "should_continue": False, "final_answer": ANSWER},
    ),
}
"""The prose and control block of a phase, by whether the work is done."""


def intended(body: JSON, wanted: int) -> Turn:
    """What an obedient model says to `body`: call `add` `wanted` times in
    one reply (when it may and has not yet), then answer. Without tools
    (`llm_only`) the work is done from the start."""
    phase, prompt = phase_of(body)
    retry = any(
        m["content"] == BRIEF_NOTE for m in body["messages"] if m["role"] == "system"
    )
    done = _ran(body) > 0 or "have no tools" in prompt or "has no tools" in prompt
    turn = Turn(phase, retry=retry)
    if (phase, done) in CONTROLS:
        prose, control = CONTROLS[phase, done]
        return replace(turn, prose=prose, control=control)
    if phase in ("act", "chat") and "add" in _offered(body) and not done:
        calls = tuple(("add", {"expression": e}) for e in EXPRESSIONS[:wanted])
        return replace(turn, calls=calls)
    return replace(turn, answer="No action needed." if phase == "act" else ANSWER)


# ------------------------------------------------------------ shapes


def block(control: JSON) -> str:
    return "```json\n" + json.dumps(control) + "\n```"


def plain(turn: Turn, **options: Any) -> Reply:
    """The turn as a well-behaved server sends it: a fenced control block
    after the prose, native tool calls, usage."""
    if turn.control is not None:
        return Reply(
            content=f"{turn.prose}\n\n{block(turn.control)}", usage=USAGE, **options
        )
    if turn.calls:
        return Reply(tool_calls=list(turn.calls), usage=USAGE, **options)
    return Reply(content=turn.answer, usage=USAGE, **options)


Render = Callable[[Turn], Reply]


@dataclass(frozen=True)
class Shape:
    """A way servers shape replies: its `name`, the `modes` it applies to,
    how it writes a turn (`render`), how a run must end (`outcome`), and how
    many calls the model asks for at once (`calls`)."""

    name: str
    modes: tuple[str, ...]
    render: Render
    outcome: Outcome = "answer"
    calls: int = 1
    thinks: bool = False
    """Its replies carry `THOUGHT`, which must come as `thinking` frames."""
    cut: bool = False
    """Its first reply where it matters is cut off at the length limit."""


def _thinking_in_content(turn: Turn) -> Reply:
    reply = plain(turn)
    return replace(reply, content=f"<think>{THOUGHT}</think>\n" + (reply.content or ""))


def _thinking_in(name: str) -> Render:
    def render(turn: Turn) -> Reply:
        return plain(turn, reasoning=THOUGHT, reasoning_field=name)

    return render


def _calls_as_text(write: Callable[[tuple[tuple[str, JSON], ...]], str]) -> Render:
    def render(turn: Turn) -> Reply:
        if not turn.calls:
            return plain(turn)
        return Reply(content=write(turn.calls), usage=USAGE)

    return render


def _hermes(calls: tuple[tuple[str, JSON], ...]) -> str:
    return "\n".join(
        f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>"
        for n, a in calls
    )


def _mistral(calls: tuple[tuple[str, JSON], ...]) -> str:
    return "[TOOL_CALLS]" + json.dumps([{"name": n, "arguments": a} for n, a in calls])


def _llama(calls: tuple[tuple[str, JSON], ...]) -> str:
    objects = "; ".join(json.dumps({"name": n, "parameters": a}) for n, a in calls)
    return f"<|python_tag|>{objects}<|eom_id|>"


def _fenced(calls: tuple[tuple[str, JSON], ...]) -> str:
    (name, arguments), *_ = calls
    return (
        "I will call the tool.\n```json\n"
        + json.dumps({"name": name, "arguments": arguments})
        + "\n```"
    )


def _bare(key: str) -> Callable[[tuple[tuple[str, JSON], ...]], str]:
    def write(calls: tuple[tuple[str, JSON], ...]) -> str:
        (name, arguments), *_ = calls
        return json.dumps({"name": name, key: arguments})

    return write


def _function(calls: tuple[tuple[str, JSON], ...]) -> str:
    return "".join(f"<function={n}>{json.dumps(a)}</function>" for n, a in calls)


def _calls_with(**options: Any) -> Render:
    def render(turn: Turn) -> Reply:
        return plain(turn, **options) if turn.calls else plain(turn)

    return render


def _content_and_calls(turn: Turn) -> Reply:
    if not turn.calls:
        return plain(turn)
    return Reply(content="Let me add them.", tool_calls=list(turn.calls), usage=USAGE)


def _no_usage(turn: Turn) -> Reply:
    return replace(plain(turn), usage=None)


def _control_as(write: Callable[[Turn, JSON], str]) -> Render:
    def render(turn: Turn) -> Reply:
        if turn.control is None:
            return plain(turn)
        return Reply(content=write(turn, turn.control), usage=USAGE)

    return render


def _trailing_commas(turn: Turn, control: JSON) -> str:
    body = re.sub(r"\n(\s*)([}\]])", r",\n\1\2", json.dumps(control, indent=1))
    return f"{turn.prose}\n{body}"


DRAFT: dict[Phase, JSON] = {
    "plan": {"steps": [], "final_answer": "DRAFT"},
    "reason": {"plan": "draft", "finish": True, "final_answer": "DRAFT"},
    "observe": {
        "observation": "draft",
        "should_continue": False,
        "final_answer": "DRAFT",
    },
}
"""A control block a model writes and then thinks better of: never used."""


def _twice(turn: Turn, control: JSON) -> str:
    return f"First draft:\n{block(DRAFT[turn.phase])}\n{turn.prose}\n{block(control)}"


def _in_thinking(turn: Turn, control: JSON) -> str:
    draft = block(DRAFT[turn.phase])
    return f"<think>{THOUGHT} Perhaps:\n{draft}</think>\n{turn.prose}\n{block(control)}"


def _cut_control(always: bool) -> Render:
    def render(turn: Turn) -> Reply:
        reply = plain(turn)
        if turn.control is None or (turn.retry and not always):
            return reply
        text = reply.content or ""
        return Reply(
            content=text[: text.index("{") + 12], finish_reason="length", usage=USAGE
        )

    return render


def _absent(turn: Turn) -> Reply:
    if turn.control is None:
        return plain(turn)
    return Reply(content=PLAIN_ANSWER, usage=USAGE)


def _cut_call(always: bool, *, text: bool = False) -> Render:
    def render(turn: Turn) -> Reply:
        if not turn.calls or (turn.retry and not always):
            return plain(turn)
        if text:
            content = _hermes(turn.calls)[:40]
            return Reply(content=content, finish_reason="length", usage=USAGE)
        name, arguments = turn.calls[0]
        cut = json.dumps(arguments)[:14]
        return Reply(tool_calls=[(name, cut)], finish_reason="length", usage=USAGE)

    return render


SHAPES: tuple[Shape, ...] = (
    Shape("plain", ALL_MODES, plain),
    # reasoning
    Shape("think-in-content", ALL_MODES, _thinking_in_content, thinks=True),
    Shape(
        "reasoning_content", ALL_MODES, _thinking_in("reasoning_content"), thinks=True
    ),
    Shape("reasoning-field", ALL_MODES, _thinking_in("reasoning"), thinks=True),
    # tool calls written as text
    Shape("call-bare-json", CALL_MODES, _calls_as_text(_bare("arguments"))),
    Shape("call-hermes", CALL_MODES, _calls_as_text(_hermes), calls=2),
    Shape("call-mistral", CALL_MODES, _calls_as_text(_mistral), calls=2),
    Shape("call-llama-python-tag", CALL_MODES, _calls_as_text(_llama)),
    Shape("call-fenced-json", CALL_MODES, _calls_as_text(_fenced)),
    Shape("call-parameters-key", CALL_MODES, _calls_as_text(_bare("parameters"))),
    Shape("call-function-tag", CALL_MODES, _calls_as_text(_function)),
    # native tool calls, as servers stream and send them
    Shape(
        "args-many-chunks",
        CALL_MODES,
        _calls_with(argument_fragments=24, chunk_chars=1),
    ),
    Shape("calls-interleaved", CALL_MODES, _calls_with(interleave_calls=True), calls=2),
    Shape(
        "call-ids-missing", CALL_MODES, _calls_with(omit_tool_call_ids=True), calls=2
    ),
    Shape(
        "call-ids-repeated", CALL_MODES, _calls_with(repeat_tool_call_ids=True), calls=2
    ),
    Shape(
        "call-ids-and-index-missing",
        CALL_MODES,
        _calls_with(omit_tool_call_ids=True, omit_stream_index=True),
        calls=2,
    ),
    Shape("args-as-object", CALL_MODES, _calls_with(arguments_as_object=True)),
    Shape("content-with-calls", CALL_MODES, _content_and_calls),
    Shape("call-cut-once", CALL_MODES, _cut_call(False), cut=True),
    Shape("text-call-cut-once", CALL_MODES, _cut_call(False, text=True), cut=True),
    Shape("call-cut-always", CALL_MODES, _cut_call(True), "cut_off", cut=True),
    # control blocks
    Shape(
        "control-unfenced",
        CONTROL_MODES,
        _control_as(lambda t, c: f"{t.prose} {json.dumps(c)}"),
    ),
    Shape(
        "control-language-tag",
        CONTROL_MODES,
        _control_as(lambda t, c: f"{t.prose}\n```javascript\n{json.dumps(c)}\n```"),
    ),
    Shape("control-trailing-commas", CONTROL_MODES, _control_as(_trailing_commas)),
    Shape(
        "control-single-quotes",
        CONTROL_MODES,
        _control_as(lambda t, c: f"{t.prose}\n{c!r}"),
    ),
    Shape("control-twice", CONTROL_MODES, _control_as(_twice)),
    Shape("control-in-thinking", CONTROL_MODES, _control_as(_in_thinking), thinks=True),
    Shape("control-cut-once", CONTROL_MODES, _cut_control(False), cut=True),
    Shape("control-cut-always", CONTROL_MODES, _cut_control(True), "cut_off", cut=True),
    Shape("control-absent", CONTROL_MODES, _absent, "no_control"),
    # usage
    Shape("usage-missing", ALL_MODES, _no_usage),
)


# ------------------------------------------------------------ the responder


@dataclass
class CorpusModel:
    """The responder: each request answered as `intended`, in `shape`.

    `asked` counts the tool calls it sent whole (a call cut off at the
    length limit is no call); `cut` the replies it cut off."""

    shape: Shape
    asked: int = 0
    cut: int = 0
    phases: list[Phase] = field(default_factory=list)

    def __call__(self, body: JSON) -> Reply:
        turn = intended(body, self.shape.calls)
        self.phases.append(turn.phase)
        reply = self.shape.render(turn)
        if reply.finish_reason == "length":
            self.cut += 1
        else:
            self.asked += len(reply.tool_calls) or _text_calls(reply, turn)
        return reply


def _text_calls(reply: Reply, turn: Turn) -> int:
    """The calls a reply wrote as text (the turn's, when its text holds them)."""
    if turn.calls and reply.content and not reply.tool_calls:
        return len(turn.calls) if any(n in reply.content for n, _ in turn.calls) else 0
    return 0
