"""Imitations of the servers people point loopwire at, for `loopwire doctor`.

Each is a `FakeOpenAIServer` with a model list (`GET /v1/models`, which the
fake lacks) and a `respond(...)` responder standing for its model: it reads
a request as a model would — the reason phase's prompt asks for a control
block, a request that offers or lists `get_time` and asks for it gets a
call, a request to count gets the numbers, anything else gets "pong" — and
answers in the shapes that server and model family use. What each copies of
a real server, and where that is documented, is in docs/models.md.

- `openai_like`: native tool calls, usage in streams, control blocks kept;
- `ollama_like`: a reasoning model that writes `<think>` in its content and
  its tool calls as Hermes `<tool_call>` text;
- `vllm_like`: thinking in `reasoning_content`; `tool_choice: "auto"` (or
  none at all, with tools) refused with vLLM's 400 when started without a
  tool parser, so calls come as Hermes text once tools are left out;
- `small_model`: llama.cpp's server with a small model: native calls, but
  prose where a control block was asked for;
- `lmstudio_native`: LM Studio with a model it has native tool use for
  (Qwen2.5-Instruct): the model's calls parsed into `tool_calls`;
- `lmstudio_default`: LM Studio with a model it has no tool template for
  (Gemma 2), which writes its call in a shape LM Studio's default tool-use
  format does not parse, so it comes back as text in `content`;
- `deepseek_like`: DeepSeek's API, answering as the model asked for does:
  `deepseek-chat` plainly, `deepseek-reasoner` (thinking mode) with
  `reasoning_content` beside every answer and call; native calls from both;
- `broken`: lists its model, answers every completion with a 500.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fake_openai import (
    JSON,
    ErrorReply,
    FakeOpenAIServer,
    FakeUsage,
    Reply,
    Responder,
    ScriptedReply,
)

USAGE = FakeUsage(prompt_tokens=21, completion_tokens=7)
COUNTED = " ".join(str(n) for n in range(1, 21))
CONTROL = {
    "plan": "Call get_time for UTC.",
    "tools_to_consider": ["get_time"],
    "finish": False,
    "final_answer": "",
}
REASON = "I need the current time, so I will call get_time.\n\n```json\n{}\n```"
HERMES_CALL = (
    '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>'
)
VLLM_NO_PARSER = (
    '"auto" tool choice requires --enable-auto-tool-choice and '
    "--tool-call-parser to be set"
)
"""vLLM's refusal when started without a tool parser (vllm#9986)."""


@dataclass(frozen=True)
class Ask:
    """What a request asks of the model."""

    kind: str
    """`control`, `tool`, `count` or `plain`."""
    tools_offered: bool


def ask(body: JSON) -> Ask:
    """Read a chat completions request as a model would."""
    text = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
    offered = bool(body.get("tools"))
    if "JSON control block" in text:
        kind = "control"
    elif "get_time" in text and "Call the get_time tool" in text:
        kind = "tool"
    elif "Count from 1 to 20" in text:
        kind = "count"
    else:
        kind = "plain"
    return Ask(kind, offered)


def reason_reply() -> str:
    return REASON.format(json.dumps(CONTROL))


def openai_like(body: JSON) -> ScriptedReply:
    """Native calls, usage in every reply, the control format kept."""
    asked = ask(body)
    if asked.kind == "tool" and asked.tools_offered:
        return Reply(tool_calls=[("get_time", {"zone": "UTC"})], usage=USAGE)
    return Reply(content=_plain(asked, reason_reply()), usage=USAGE)


def ollama_like(body: JSON) -> ScriptedReply:
    """A Qwen3-style reasoning model: `<think>` in the content, Hermes calls."""
    asked = ask(body)
    thinking = "<think>\nThe user wants something short. Keep it brief.\n</think>\n\n"
    if asked.kind == "tool":
        return Reply(content=thinking + HERMES_CALL, usage=USAGE)
    return Reply(content=thinking + _plain(asked, reason_reply()), usage=USAGE)


def vllm_like(body: JSON) -> ScriptedReply:
    """vLLM without a tool parser, a reasoning parser on: `reasoning_content`."""
    asked = ask(body)
    if body.get("tools") and body.get("tool_choice", "auto") != "none":
        return ErrorReply(400, VLLM_NO_PARSER, error_type="BadRequestError")
    content = HERMES_CALL if asked.kind == "tool" else _plain(asked, reason_reply())
    return Reply(
        content=content,
        reasoning="The user asks for something simple.",
        reasoning_field="reasoning_content",
        usage=USAGE,
    )


def small_model(body: JSON) -> ScriptedReply:
    """A small instruct model: native calls, never a control block."""
    asked = ask(body)
    if asked.kind == "tool" and asked.tools_offered:
        return Reply(tool_calls=[("get_time", {"zone": "UTC"})], usage=USAGE)
    prose = "I would look up the current time in UTC for you."
    return Reply(content=_plain(asked, prose), usage=USAGE)


def lmstudio_native(body: JSON) -> ScriptedReply:
    """LM Studio, a model with native tool use: calls parsed into `tool_calls`."""
    asked = ask(body)
    if asked.kind == "tool" and asked.tools_offered:
        return Reply(tool_calls=[("get_time", {"zone": "UTC"})], usage=USAGE)
    return Reply(content=_plain(asked, reason_reply()), usage=USAGE)


LMSTUDIO_UNPARSED = '[TOOL_REQUEST]get_time(zone="UTC")[END_TOOL_REQUEST]'
"""A call in LM Studio's default tool-use markers, but not the JSON object
between them that LM Studio parses: left as the answer's text."""


def lmstudio_default(body: JSON) -> ScriptedReply:
    """LM Studio, a model without a tool template: its call left as text."""
    asked = ask(body)
    if asked.kind == "tool" and asked.tools_offered:
        return Reply(content=LMSTUDIO_UNPARSED, usage=USAGE)
    return Reply(content=_plain(asked, reason_reply()), usage=USAGE)


DEEPSEEK_THINKING = "The user asks for something simple; answer directly."


def deepseek_like(body: JSON) -> ScriptedReply:
    """DeepSeek's API: `deepseek-reasoner` thinks in `reasoning_content`
    before every answer and call, `deepseek-chat` does not; calls native."""
    asked = ask(body)
    thinking = DEEPSEEK_THINKING if body.get("model") == "deepseek-reasoner" else None
    if asked.kind == "tool" and asked.tools_offered:
        return Reply(
            reasoning=thinking, tool_calls=[("get_time", {"zone": "UTC"})], usage=USAGE
        )
    content = _plain(asked, reason_reply())
    return Reply(content=content, reasoning=thinking, usage=USAGE)


OLLAMA_RUNNER_STOPPED = (
    "model runner has unexpectedly stopped, this may be due to resource "
    "limitations or an internal error, check ollama server logs for details"
)


def broken(body: JSON) -> ScriptedReply:
    """Every completion fails as Ollama's does when its runner dies."""
    return ErrorReply(500, OLLAMA_RUNNER_STOPPED, error_type="api_error")


def _plain(asked: Ask, control: str) -> str:
    return {"control": control, "count": COUNTED}.get(asked.kind, "pong")


@dataclass(frozen=True)
class Imitation:
    """One kind of server: its models (id, owned_by) and its model."""

    name: str
    models: Sequence[tuple[str, str]]
    answer: Responder
    created: bool = True
    """Whether each listed model carries `created` (LM Studio's and
    DeepSeek's lists give only `id`, `object` and `owned_by`)."""

    @property
    def model(self) -> str:
        return self.models[0][0]


IMITATIONS = {
    "openai": Imitation(
        "openai", [("gpt-4o-mini", "system"), ("gpt-4o", "system")], openai_like
    ),
    "ollama": Imitation(
        "ollama", [("qwen3:8b", "library"), ("llama3.2:3b", "library")], ollama_like
    ),
    "vllm": Imitation("vllm", [("Qwen/Qwen3-8B", "vllm")], vllm_like),
    "small": Imitation(
        "small", [("qwen2.5-0.5b-instruct-q4_k_m", "llamacpp")], small_model
    ),
    "lmstudio": Imitation(
        "lmstudio",
        [
            ("qwen2.5-7b-instruct", "organization_owner"),
            ("text-embedding-nomic-embed-text-v1.5", "organization_owner"),
        ],
        lmstudio_native,
        created=False,
    ),
    "lmstudio-default": Imitation(
        "lmstudio-default",
        [("gemma-2-2b-it", "organization_owner")],
        lmstudio_default,
        created=False,
    ),
    "deepseek": Imitation(
        "deepseek",
        [("deepseek-chat", "deepseek"), ("deepseek-reasoner", "deepseek")],
        deepseek_like,
        created=False,
    ),
    "broken": Imitation("broken", [("llama3.1:8b", "library")], broken),
}


class ImitationServer(FakeOpenAIServer):
    """The fake server with a `/v1/models` list as well."""

    def __init__(self, imitation: Imitation) -> None:
        super().__init__()
        self.imitation = imitation
        self.authorizations: list[str] = []
        """The `Authorization` header of each `/v1/models` request."""
        self.app.router.routes.append(Route("/v1/models", self._models))
        self.respond(imitation.answer)

    async def _models(self, request: Request) -> Response:
        self.authorizations.append(request.headers.get("authorization", ""))
        data: list[dict[str, Any]] = [
            {"id": model, "object": "model", "owned_by": owner}
            for model, owner in self.imitation.models
        ]
        if self.imitation.created:
            data = [{**entry, "created": 1} for entry in data]
        return JSONResponse({"object": "list", "data": data})


@contextlib.asynccontextmanager
async def running_imitation(name: str) -> AsyncIterator[ImitationServer]:
    """A started imitation of the server called `name` in `IMITATIONS`."""
    server = ImitationServer(IMITATIONS[name])
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
