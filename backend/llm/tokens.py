"""A rough, dependency-free estimate of how many tokens a message costs.

Not a tokenizer: loopwire talks to many models and ships none of their
vocabularies. BPE tokenizers average about four bytes of English or code per
token, so a text is estimated at `ceil(utf8 bytes / 4)`; each message adds a
fixed overhead for its role and framing, and an assistant message adds its
tool calls' names and JSON arguments. The estimate errs either way by a
fifth or so (more for scripts the tokenizer splits finely), so a budget built
on it is a soft bound: leave headroom below the model's real context size.
"""

from __future__ import annotations

from backend.llm.base import Message

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
"""Role, separators and the like, per message."""
TOOL_CALL_OVERHEAD_TOKENS = 4
"""A tool call's id and framing, besides its name and arguments."""


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
