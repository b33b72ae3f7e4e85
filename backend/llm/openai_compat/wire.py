"""The chat completions wire format: our requests out, the server's replies in.

`payload` turns a provider-neutral `LLMRequest` into the request body (with
the optional parameters its server's profile sends: `profiles`); `body` is
that body as the bytes sent, `encode(payload(...))` byte for byte, with
each tool's JSON encoded once (`fragments`). `completion` reads a
non-streamed reply into a `Completion`. Replies are read as plain JSON
objects, not the SDK's models: a field that is missing or of the wrong type
reads as empty, and a reply without a choice or a message is a `BadReply`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from backend.llm.base import Completion, LLMRequest, Message, ToolCall, ToolSpec, Usage
from backend.llm.openai_compat.faults import BadReply
from backend.llm.openai_compat.fragments import Fragments
from backend.llm.openai_compat.profiles import PROFILES, Profile
from backend.llm.replies.normaliser import arguments_text
from backend.llm.tokens import UNREPORTED

__all__ = [
    "body",
    "completion",
    "encode",
    "json_object",
    "payload",
    "reasoning",
    "text",
    "usage",
]


# -- requests ----------------------------------------------------------------


def payload(
    request: LLMRequest,
    *,
    default_model: str,
    profile: Profile = PROFILES["auto"],
    stream: bool = False,
) -> dict[str, Any]:
    """The chat completions request body, carrying the optional parameters
    `profile` sends (a stream asks for its usage when the profile does)."""
    body = _head(request, default_model, profile)
    if _offers_tools(request, profile):
        body["tools"] = [_tool_param(spec) for spec in request.tools]
    body.update(_options(request, profile, stream))
    return body


def body(
    request: LLMRequest,
    *,
    default_model: str,
    profile: Profile = PROFILES["auto"],
    stream: bool = False,
) -> tuple[bytes, list[str]]:
    """`encode(payload(...))` byte for byte, and the body's field names.

    The tools' JSON is each tool's, encoded once (`_TOOLS`): every call of
    a run offers the same tools, whose schemas were most of the encoding."""
    head = _head(request, default_model, profile)
    parts = [encode(head)[:-1]]
    names = list(head)
    if _offers_tools(request, profile):
        tools = b",".join([_TOOLS(spec) for spec in request.tools])
        parts += (b',"tools":[', tools, b"]")
        names.append("tools")
    options = _options(request, profile, stream)
    if options:
        parts += (b",", encode(options)[1:-1])
        names += options
    parts.append(b"}")
    return b"".join(parts), names


def _head(request: LLMRequest, default_model: str, profile: Profile) -> dict[str, Any]:
    """The body's model and messages."""
    messages = [_message_param(message) for message in request.messages]
    if profile.reasoning_back:
        for i in _thought_calls(request.messages):
            messages[i]["reasoning_content"] = request.messages[i].reasoning or ""
    return {"model": request.model or default_model, "messages": messages}


def _thought_calls(messages: Sequence[Message]) -> list[int]:
    """Where this turn's tool calls are (assistant messages with calls,
    after the last user message): the thinking behind them goes back."""
    turn = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return [
        i
        for i in range(turn + 1, len(messages))
        if messages[i].role == "assistant" and messages[i].tool_calls
    ]


def _offers_tools(request: LLMRequest, profile: Profile) -> bool:
    """Whether the body carries the tools: none without tools, and none for
    `tool_choice: "none"` when the server is not told so (it would call
    them all the same)."""
    if not request.tools or not profile.tools:
        return False
    return request.tool_choice != "none" or profile.tool_choice


def _options(request: LLMRequest, profile: Profile, stream: bool) -> dict[str, Any]:
    """The body's fields after the tools, in their order: how to choose
    among the tools (when it carries them), and the optional parameters."""
    options: dict[str, Any] = {}
    if _offers_tools(request, profile):
        if request.tool_choice is not None and profile.tool_choice:
            options["tool_choice"] = request.tool_choice
        if profile.parallel_tool_calls is not None:
            options["parallel_tool_calls"] = profile.parallel_tool_calls
    if request.temperature is not None and profile.temperature:
        options["temperature"] = request.temperature
    if request.max_tokens is not None and profile.max_tokens:
        options[profile.max_tokens_as] = request.max_tokens
    if stream:
        options["stream"] = True
        if profile.stream_options:
            options["stream_options"] = {"include_usage": True}
    return options


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""`json.dumps` with these options, made once rather than at every call."""


def encode(body: object) -> bytes:
    """`body` as compact JSON (UTF-8, no spaces)."""
    return _JSON.encode(body).encode()


def _message_param(message: Message) -> dict[str, Any]:
    """One `Message` as an OpenAI message, without null fields."""
    role = message.role
    if role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content or "",
        }
    param: dict[str, Any] = {"role": role}
    if role != "assistant" or message.content is not None or not message.tool_calls:
        param["content"] = message.content or ""
    if role == "assistant" and message.tool_calls:
        param["tool_calls"] = [_tool_call_param(call) for call in message.tool_calls]
    if message.name is not None and role != "user":  # a user's: ours only
        param["name"] = message.name
    return param


def _tool_call_param(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _tool_param(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


_TOOLS = Fragments[ToolSpec](lambda spec: encode(_tool_param(spec)), 1 << 20)
"""Each tool's JSON (a process offers a few hundred tools at most)."""


# -- replies -----------------------------------------------------------------


def completion(data: dict[str, Any], *, new_call_id: Callable[[], str]) -> Completion:
    """A non-streamed reply as a `Completion`; `new_call_id` names the tool
    calls the server sent without an id."""
    choices = data.get("choices")
    if not choices or not isinstance(choices, list):
        raise BadReply("the LLM server answered without any choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise BadReply("the LLM server answered without a message")
    calls = message.get("tool_calls")
    tool_calls = tuple(
        ToolCall(
            id=text(call.get("id")) or new_call_id(),
            name=name,
            arguments=arguments_text(function.get("arguments")) or "{}",
        )
        for call in (calls if isinstance(calls, list) else ())
        # Only function calls with a name can be executed.
        if isinstance(call, dict)
        and isinstance(function := call.get("function"), dict)
        and (name := text(function.get("name")))
    )
    return Completion(
        content=text(message.get("content")),
        reasoning=reasoning(message).strip(),
        tool_calls=tool_calls,
        usage=usage(data.get("usage")) or UNREPORTED,
        finish_reason=text(choice.get("finish_reason")) or None,
    )


def reasoning(message: dict[str, Any]) -> str:
    """The thinking a server sends beside the content: `reasoning_content`
    (DeepSeek, vLLM, llama.cpp) or `reasoning` (Ollama, OpenRouter)."""
    return text(message.get("reasoning_content")) or text(message.get("reasoning"))


def json_object(raw: bytes) -> dict[str, Any]:
    """`raw` parsed as a JSON object (`json.JSONDecodeError` if it is not JSON)."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise BadReply("the LLM server sent a reply of an unexpected shape")
    return data


def text(value: object) -> str:
    """`value` if it is a string, else ""."""
    return value if isinstance(value, str) else ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def usage(value: object) -> Usage | None:
    """Provider usage as `Usage` (one LLM call), with the prompt tokens read
    from the server's cache and the reasoning tokens when it says them
    (`prompt_tokens_details`, `completion_tokens_details`); missing numbers
    count as 0. None: the server reported no usage."""
    if not isinstance(value, dict):
        return None
    prompt = _count(value.get("prompt_tokens"))
    completed = _count(value.get("completion_tokens"))
    total = _count(value.get("total_tokens")) or prompt + completed
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completed,
        total_tokens=total,
        llm_calls=1,
        cached_tokens=_detail(value, "prompt_tokens_details", "cached_tokens"),
        reasoning_tokens=_detail(
            value, "completion_tokens_details", "reasoning_tokens"
        ),
    )


def _detail(value: dict[str, Any], part: str, name: str) -> int:
    details = value.get(part)
    return _count(details.get(name)) if isinstance(details, dict) else 0
