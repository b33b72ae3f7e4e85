"""What an OpenAI client sends to `POST /v1/chat/completions`, and what it
asks of loopwire (`transport/openai_api.py`).

The body is read as OpenAI's chat completion request: the fields loopwire
uses are checked strictly (`model`, `messages`, `stream`, `stream_options`,
`temperature`, `metadata`, `n`, `tools`); the many others clients send
(`max_tokens`, `top_p`, `seed`, …) are ignored. `tools` must be empty:
loopwire runs its own tools. Messages are text: a string, or text parts.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from backend.protocol import SYSTEM_PROMPT_LIMIT, AnswerAction

MODEL_PREFIX = "loopwire-"
CONVERSATION_ID = re.compile(r"[0-9a-f]{32}")
NEW = "new"
"""The conversation id that starts a conversation the client will continue."""
YES = frozenset({"yes", "y", "approve", "approved", "ok", "okay", "run it"})
"""The answers to an approval that approve it; any other declines it."""
DECLINE, DISMISS = "/decline", "/dismiss"
"""A last user message that is exactly one of these refuses the question
that waits: declines it, or dismisses it (`agent_user_input.action`)."""
REFUSALS: dict[str, AnswerAction] = {DECLINE: "decline", DISMISS: "cancel"}
HISTORY_HEAD = "The conversation so far, as the client sent it:"
HISTORY_TAIL = "The user's new message:"
SYSTEMS = ("system", "developer")


class _Body(BaseModel):
    """Strict about the fields it names, silent about the others."""

    model_config = ConfigDict(extra="ignore", strict=True)


class StreamOptions(_Body):
    include_usage: bool = False


class ChatCompletionMessage(_Body):
    role: Literal["system", "developer", "user", "assistant"]
    content: (
        Annotated[str, Field(max_length=1_000_000)]
        | Annotated[list[dict[str, Any]], Field(max_length=256)]
        | None
    ) = None

    @field_validator("content")
    @classmethod
    def _text_only(
        cls, value: str | list[dict[str, Any]] | None
    ) -> str | list[dict[str, Any]] | None:
        for part in value if isinstance(value, list) else ():
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ValueError("only text parts ({type: text, text}) are taken")
        return value

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(str(part["text"]) for part in self.content)
        return self.content or ""


class ChatCompletionRequest(_Body):
    """OpenAI's chat completion request, as loopwire reads it."""

    model: Annotated[str, Field(min_length=1, max_length=300)]
    messages: Annotated[
        list[ChatCompletionMessage], Field(min_length=1, max_length=2000)
    ]
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    metadata: (
        Annotated[
            dict[str, Annotated[str, Field(max_length=512)]], Field(max_length=16)
        ]
        | None
    ) = None
    """`metadata.conversation_id`: the conversation to continue."""
    user: Annotated[str, Field(max_length=256)] | None = None
    """Accepted and ignored (the caller is who signed in)."""
    n: int | None = None
    tools: list[Any] | None = None
    """Refused unless empty: loopwire runs its own tools."""

    @field_validator("n")
    @classmethod
    def _one_choice(cls, value: int | None) -> int | None:
        if value not in (None, 1):
            raise ValueError("loopwire makes one choice per request: leave n out or 1")
        return value

    @field_validator("tools")
    @classmethod
    def _no_tools(cls, value: list[Any] | None) -> list[Any] | None:
        if value:
            raise ValueError(
                "loopwire runs its own tools: send the request without tools"
            )
        return value

    @field_validator("messages")
    @classmethod
    def _ends_with_the_user(
        cls, value: list[ChatCompletionMessage]
    ) -> list[ChatCompletionMessage]:
        if value[-1].role != "user" or not value[-1].text.strip():
            raise ValueError("the last message must be the user's, with text")
        return value

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    @property
    def system_prompt(self) -> str | None:
        """The system (and developer) messages, joined; None without any."""
        texts = [m.text.strip() for m in self.messages if m.role in SYSTEMS]
        joined = "\n\n".join(t for t in texts if t)
        return joined or None

    @property
    def last(self) -> str:
        """The user's new message."""
        return self.messages[-1].text

    def with_history(self, room: int, limit: int) -> str | None:
        """The run's message: the user's new message, after as many of the
        earlier user and assistant messages as fit in `room` bytes (the
        newest kept), all within `limit` bytes; None when the new one alone
        is over `limit`."""
        if _size(self.last) > limit:
            return None
        earlier = [
            f"{m.role}: {m.text}" for m in self.messages[:-1] if m.role not in SYSTEMS
        ]
        while earlier:
            turns = "\n\n".join(earlier)
            content = f"{HISTORY_HEAD}\n\n{turns}\n\n{HISTORY_TAIL}\n\n{self.last}"
            if _size(content) <= min(room, limit):
                return content
            earlier.pop(0)
        return self.last


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def system_prompt_problem(prompt: str | None, allowed: bool) -> str | None:
    """Why the system messages cannot be the run's `system_prompt`, if they cannot."""
    if prompt is None:
        return None
    if not allowed:
        return (
            "this server does not take system messages from clients "
            "(LOOPWIRE_CLIENT_SYSTEM_PROMPTS=false); send the messages without them"
        )
    if len(prompt) > SYSTEM_PROMPT_LIMIT:
        return f"the system messages are over {SYSTEM_PROMPT_LIMIT} characters"
    return None


def parse_model(model: str) -> tuple[str, str | None] | None:
    """`loopwire-<strategy>[:<upstream model>]` → (strategy, upstream); None
    for a name that is not of that form."""
    if not model.startswith(MODEL_PREFIX):
        return None
    strategy, colon, upstream = model.removeprefix(MODEL_PREFIX).partition(":")
    if not strategy or (colon and not upstream):
        return None
    return strategy, upstream or None


def conversation_of(header: str | None, body: ChatCompletionRequest) -> str | None:
    """The conversation to continue: the `X-Loopwire-Conversation` header,
    else `metadata.conversation_id`; `NEW` to start one the client will
    continue; None for a stateless client. Raises ValueError for an id that
    is neither 32 hex digits nor `new`, or for two that differ."""
    named = body.metadata.get("conversation_id") if body.metadata else None
    if header is not None and named is not None and header != named:
        raise ValueError(
            "the X-Loopwire-Conversation header and metadata.conversation_id differ"
        )
    chosen = header if header is not None else named
    if chosen is not None and chosen != NEW and not CONVERSATION_ID.fullmatch(chosen):
        raise ValueError(
            "a conversation id is 32 lowercase hex digits (or new, to start one)"
        )
    return chosen


def approves(answer: str) -> bool:
    """Whether a user's message approves the call waiting for approval."""
    return answer.strip().strip(".!").strip().lower() in YES


def _openai_errors(*codes: int) -> dict[str, Any]:
    error = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type", "code"],
                "properties": {
                    name: {"type": ["string", "null"]}
                    for name in ("message", "type", "code", "param")
                },
            }
        },
    }
    return {
        str(code): {
            "description": "OpenAI's error shape (`code`: loopwire's error_type)",
            "content": {"application/json": {"schema": error}},
        }
        for code in codes
    }


def openapi_paths() -> dict[str, Any]:
    """The OpenAI-compatible routes in the OpenAPI document (`transport/openapi.py`)."""
    body = {"$ref": "#/components/schemas/ChatCompletionRequest"}
    json_object = {"schema": {"type": "object"}}
    conversation = {
        "name": "X-Loopwire-Conversation",
        "in": "header",
        "required": False,
        "description": "The conversation to continue (32 hex digits), or `new`.",
        "schema": {"type": "string", "pattern": "^([0-9a-f]{32}|new)$"},
    }
    return {
        "/v1/chat/completions": {
            "post": {
                "summary": "OpenAI-compatible: a run as a chat completion",
                "parameters": [conversation],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                },
                "responses": {
                    "200": {
                        "description": "`chat.completion`, or with `stream` the "
                        "`chat.completion.chunk` stream ending `data: [DONE]`",
                        "content": {
                            "application/json": json_object,
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    **_openai_errors(400, 401, 404, 409, 413, 415, 429, 503),
                },
            }
        },
        "/v1/models": {
            "get": {
                "summary": "OpenAI-compatible: each loop strategy as a model",
                "responses": {
                    "200": {
                        "description": "a list of models",
                        "content": {"application/json": json_object},
                    },
                    **_openai_errors(401, 429),
                },
            }
        },
    }
