"""Fitting each request to the model's context window (`fitted_window`).

A request is what must be sent — the system prompt, the client's own
instructions, the phase prompt, the tools offered (their JSON specs count)
and the current user message — and the history window. With the model's
context window known (`LoopConfig.context_window`), the request may cost
`tokens.prompt_budget` estimated tokens (the window less the reply's share,
with a safety margin for the estimate), and the history gets what the rest
leaves, never more than `history_window_tokens`. When the current request
alone is longer (a long run's tool results), it is shortened in turn until
it fits:

1. the history window as always (older tool results compacted);
2. every tool result in it, the current request's too, cut to half as many
   characters each time, down to `MIN_TOOL_CHARS`;
3. then the older steps of the current request left out (whole call groups,
   newest kept: `History.window(whole_current=False)`).

What must be sent is never shortened: a request that does not fit even then
is refused (`ContextOverflow`) before it is sent, saying what it needed.
With the window unknown, requests are built as they always were.

The history before the current request is left out in whole blocks of a
`WINDOW_BLOCKS`th of what the history may cost (`History.window`'s
`block_tokens`: the smaller of `history_window_tokens` and, when the model's
window is known, `prompt_budget`), so that the window's start, and the
prompt prefix a provider caches, stays put for several steps of a run
instead of moving with every message that pushes an old one out. The block
size depends on the settings and the model only, never on one request's
phase prompt, so every call of a run cuts the history at the same places.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from backend.agent.config import LoopConfig
from backend.errors import ContextOverflow
from backend.history import History
from backend.llm.base import Message, ToolSpec
from backend.llm.tokens import (
    estimate_message_tokens,
    estimate_request_tokens,
    prompt_budget,
    real_tokens,
)
from backend.text import shorten

log = logging.getLogger(__name__)

MIN_TOOL_CHARS = 200
"""The fewest characters of a tool result a shortened window keeps."""
WINDOW_BLOCKS = 4
"""The history window leaves old messages out a quarter of its budget at a
time: it holds at least three quarters of what it may, less a message."""


def fitted_window(
    history: History,
    *,
    since: int,
    config: LoopConfig,
    model: str,
    fixed: Sequence[Message],
    tools: Sequence[ToolSpec],
) -> list[Message]:
    """The history window of a request whose other messages are `fixed` and
    which offers `tools`, fitted to `model`'s context window when known."""
    chars = config.history_tool_output_chars
    budget = config.history_window_tokens
    window = config.context_window(model)
    if window is None:
        block = max(1, budget // WINDOW_BLOCKS)
        return history.window(
            budget, tool_output_chars=chars, since=since, block_tokens=block
        )
    room = prompt_budget(window, config.reply_tokens)
    block = max(1, min(budget, room) // WINDOW_BLOCKS)
    room -= estimate_request_tokens(fixed, tools)
    budget = max(0, min(budget, room))
    cost = 0
    for older, current, whole in _shortenings(chars):
        messages = history.window(
            budget,
            since=since,
            tool_output_chars=older,
            current_tool_chars=current,
            whole_current=whole,
            block_tokens=block,
        )
        cost = sum(estimate_message_tokens(m) for m in messages)
        if cost <= room:
            return messages
    needed = real_tokens(estimate_request_tokens(fixed, tools) + cost)
    raise ContextOverflow(_too_long(model, needed, window, config, len(tools)))


TOOLS_SHARE = 0.25
"""The most of what a request may cost that the tools offered may take (a
request may name them twice: in the system prompt and offered)."""
BRIEF_CHARS = 160
"""A tool's description cut to its first sentence, at most this long."""


def fitted_tools(
    tools: Sequence[ToolSpec],
    *,
    config: LoopConfig,
    model: str,
    preferred: Sequence[str] = (),
) -> tuple[ToolSpec, ...]:
    """The tools to offer in a request to `model`: all of them, when their
    specs take at most `TOOLS_SHARE` of what a request may cost (or the
    window is unknown); else with their descriptions cut to a sentence; else
    the `preferred` ones (those the step named) first, then the rest in order,
    as many as fit."""
    window = config.context_window(model)
    if window is None or not tools:
        return tuple(tools)
    cap = prompt_budget(window, config.reply_tokens) * TOOLS_SHARE
    if estimate_request_tokens((), tools) <= cap:
        return tuple(tools)
    brief = [
        spec.model_copy(update={"description": _brief(spec.description)})
        for spec in tools
    ]
    if estimate_request_tokens((), brief) <= cap:
        return tuple(brief)
    first = [spec for spec in brief if spec.name in preferred]
    kept: list[ToolSpec] = []
    for spec in [*first, *(spec for spec in brief if spec not in first)]:
        if estimate_request_tokens((), [*kept, spec]) <= cap:
            kept.append(spec)
    names = {spec.name for spec in kept}
    log.info(
        "%s: %d of %d tools offered (their specs fill the context window): %s",
        model,
        len(kept),
        len(tools),
        ", ".join(spec.name for spec in tools if spec.name in names),
    )
    return tuple(spec for spec in brief if spec.name in names)


def _brief(description: str) -> str:
    """The first sentence of `description`, at most `BRIEF_CHARS` long."""
    first, stop, _ = description.strip().partition(". ")
    return shorten(first + stop.strip(), BRIEF_CHARS)


def _shortenings(chars: int) -> Iterator[tuple[int, int | None, bool]]:
    """How `History.window` is asked, each time shorter than the last: the
    characters of older tool results, of the current request's (None:
    whole), and whether the current request is kept whole."""
    yield chars, None, True
    while True:
        yield chars, chars, True
        if chars <= MIN_TOOL_CHARS:
            break
        chars = max(MIN_TOOL_CHARS, chars // 2)
    yield chars, chars, False


def _too_long(
    model: str, needed: int, window: int, config: LoopConfig, tools: int
) -> str:
    reply = config.reply_tokens
    offered = f", the {tools} tools offered" if tools else ""
    return (
        f"This request to {model} needs about {needed + reply} tokens "
        f"({reply} of them kept for the reply), more than its context window "
        f"of {window} tokens: the system prompt, the phase prompt{offered} and "
        "the user's message alone are too long, and they are never cut. Raise "
        "LOOPWIRE_LLM_CONTEXT_TOKENS if the model takes a longer context (for "
        "Ollama, its num_ctx), or lower LOOPWIRE_LLM_REPLY_TOKENS."
    )
