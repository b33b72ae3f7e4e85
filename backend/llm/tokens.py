"""A rough, dependency-free estimate of how many tokens a request costs.

Not a tokenizer: loopwire talks to many models and ships none of their
vocabularies. BPE tokenizers average about four bytes of English or code per
token, so a text is estimated at `ceil(utf8 bytes / 4)`; each message adds a
fixed overhead for its role and framing, and an assistant message adds its
tool calls' names and JSON arguments. A tool offered costs its JSON spec
(name, description, parameter schema) plus framing, and a request that
offers any adds the words a chat template puts around them.

The estimate errs either way by a fifth or so (more for JSON, code and
scripts the tokenizer splits finely), so a model's context window is never
filled to the estimate: `prompt_budget` keeps `SAFETY_MARGIN` in hand.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from backend.llm.base import Completion, LLMRequest, Message, ToolSpec, Usage

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
"""Role, separators and the like, per message."""
TOOL_CALL_OVERHEAD_TOKENS = 4
"""A tool call's id and framing, besides its name and arguments."""
TOOL_SPEC_OVERHEAD_TOKENS = 8
"""A tool spec's framing in the prompt, besides its JSON."""
TOOLS_PREAMBLE_TOKENS = 120
"""What a chat template says around the tools when any are offered (Hermes-
and Llama-style templates explain the call format in a paragraph or two)."""
REQUEST_OVERHEAD_TOKENS = 8
"""Per request: the start of the reply, a beginning-of-text token."""
SAFETY_MARGIN = 1.3
"""A window is filled to its size / this, in estimated tokens: a real
tokenizer may count up to 30% more than the estimate (bytes / 3 for dense
JSON or code) and the request must still fit."""


def estimate_text_tokens(text: str) -> int:
    """About how many tokens `text` is: its UTF-8 bytes / 4, rounded up."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def estimate_message_tokens(message: Message) -> int:
    """About how many tokens `message` costs in a request."""
    tokens = MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(message.content or "")
    for call in message.tool_calls:
        tokens += TOOL_CALL_OVERHEAD_TOKENS
        tokens += estimate_text_tokens(call.name) + estimate_text_tokens(call.arguments)
    return tokens


def estimate_tool_tokens(tool: ToolSpec) -> int:
    """About how many tokens offering `tool` costs: its spec as JSON."""
    spec = {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }
    text = json.dumps(spec, ensure_ascii=False)
    return TOOL_SPEC_OVERHEAD_TOKENS + estimate_text_tokens(text)


def estimate_request_tokens(
    messages: Iterable[Message], tools: Iterable[ToolSpec] = ()
) -> int:
    """About how many tokens a request of `messages` offering `tools` costs."""
    tokens = REQUEST_OVERHEAD_TOKENS
    tokens += sum(estimate_message_tokens(m) for m in messages)
    specs = [estimate_tool_tokens(t) for t in tools]
    if specs:
        tokens += TOOLS_PREAMBLE_TOKENS + sum(specs)
    return tokens


def prompt_budget(window_tokens: int, reply_tokens: int) -> int:
    """The estimated tokens a request may cost in a context of
    `window_tokens` that keeps `reply_tokens` for the reply (0 or less: none)."""
    return math.floor((window_tokens - reply_tokens) / SAFETY_MARGIN)


def real_tokens(estimated: int) -> int:
    """The tokens an `estimated` cost may really be (the margin added)."""
    return math.ceil(estimated * SAFETY_MARGIN)


UNREPORTED = Usage(llm_calls=1, estimated_calls=1)
"""The usage of a reply whose server said none, until `with_estimate`."""


def with_estimate(request: LLMRequest, reply: Completion) -> Completion:
    """`reply`, whose server reported no usage, with its tokens estimated
    from the request and the reply (marked: `Usage.estimated_calls`)."""
    prompt = estimate_request_tokens(request.messages, request.tools)
    answer = Message.assistant(reply.content, tool_calls=reply.tool_calls)
    completed = estimate_message_tokens(answer) + estimate_text_tokens(reply.reasoning)
    usage = UNREPORTED.model_copy(
        update={
            "prompt_tokens": prompt,
            "completion_tokens": completed,
            "total_tokens": prompt + completed,
        }
    )
    return reply.model_copy(update={"usage": usage})
