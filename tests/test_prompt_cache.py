"""Prompt caching: a strict react run keeps its prompt prefix stable.

The fake OpenAI server counts a prefix cache as OpenAI's works
(`tests.fake_openai.PrefixCache`): a prompt's longest prefix that an earlier
request already sent, in whole 1,024 tokens then 128-token increments, is
read from the cache and reported as `prompt_tokens_details.cached_tokens`.
A ten-step react run goes through the real `OpenAIClient` to that server,
in a conversation whose earlier turns alone fill the history window, so
the window has to move while the run grows.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from backend.history import History
from backend.llm.base import Completion, LLMRequest, Message, ToolCall, Usage
from backend.llm.openai_compat.client import OpenAIClient
from backend.llm.tokens import estimate_message_tokens
from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from tests.fake_openai import (
    CACHE_MIN_TOKENS,
    FakeOpenAIServer,
    FakeUsage,
    PrefixCache,
    Reply,
    prompt_text,
)
from tests.fakes import observe, reason
from tests.run_harness import Run, strategies

STEPS = 10
PAGE_CHARS = 3_000
"""A tool result about as long as a web page's text, shortened."""
EARLIER_TURNS = 8
"""Earlier exchanges in the conversation: more than the history window holds."""


class PageArgs(BaseModel):
    page: int


def page_text(page: int) -> str:
    """A page of plain text, different for every page."""
    words = [f"word{(page * 7919 + i * 104729) % 10007}" for i in range(PAGE_CHARS)]
    return " ".join(words)[:PAGE_CHARS]


async def read_page(args: PageArgs, ctx: ToolContext) -> dict[str, Any]:
    return {"page": args.page, "text": page_text(args.page)}


def registry() -> ToolRegistry:
    effect = ToolEffect(read_only=True, idempotent=True, untrusted_result=False)
    return ToolRegistry(
        [Tool("read_page", "Read one page of the report.", PageArgs, read_page, effect)]
    )


def earlier_turns() -> list[Message]:
    """Earlier exchanges, each a question, a page read and an answer."""
    messages: list[Message] = []
    for turn in range(1, EARLIER_TURNS + 1):
        call = ToolCall(id=f"old_{turn}", name="read_page", arguments="{}")
        result = json.dumps({"page": 100 + turn, "text": page_text(100 + turn)})
        messages += [
            Message.user(f"What does appendix {turn} say?"),
            Message.assistant(None, (call,)),
            Message.tool(call.id, "read_page", result),
            Message.assistant(f"Appendix {turn} lists the figures for year {turn}."),
        ]
    return messages


PHASE = re.compile(r"# Agent step (\d+) of \d+: (\w+)")


def obeying(body: dict[str, Any]) -> Reply:
    """The model: reads one page a step, for ten steps, then answers."""
    tail = body["messages"][-1]["content"]
    found = PHASE.search(tail)
    assert found is not None, tail[:200]
    step, phase = int(found.group(1)), found.group(2)
    if phase == "REASON":
        return Reply(content=reason(f"Read page {step}.", tools=["read_page"]))
    if phase == "ACT":
        return Reply(tool_calls=[("read_page", {"page": step})])
    last = step == STEPS
    final = "The report's ten pages agree." if last else ""
    return Reply(
        content=observe(f"Page {step} read.", should_continue=not last, final=final)
    )


@pytest.fixture
async def client(fake_openai: FakeOpenAIServer) -> AsyncIterator[OpenAIClient]:
    llm = OpenAIClient(model="fake-gpt", base_url=fake_openai.base_url, max_retries=0)
    yield llm
    await llm.aclose()


async def ten_step_run(fake: FakeOpenAIServer, llm: OpenAIClient) -> PrefixCache:
    cache = fake.count_prefix_cache()
    fake.respond(obeying)
    react = strategies(llm, registry()).get("react")
    assert react is not None
    run = Run(react, question="Summarise the report.", history=earlier_turns())
    result = await run.go()
    assert (result.reason, result.answer) == (
        "finished",
        "The report's ten pages agree.",
    )
    assert len(fake.requests) == 3 * STEPS
    return cache


def stable_prefix(body: dict[str, Any]) -> bytes:
    """What every call of a run must begin with: the tools and the system prompt."""
    return prompt_text({"tools": body.get("tools"), "messages": body["messages"][:1]})


def body(content: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}]}


def test_the_fake_reads_from_its_cache_as_openai_counts() -> None:
    """The longest prefix sent before is cached, in 1,024 + k·128 tokens, none under."""
    cache = PrefixCache()
    short, long, other = "a" * 4000, "a" * 8000 + "b" * 4000, "a" * 8000 + "c" * 4000
    # `[]\n{"content":"` then the text: 15 bytes before it, 4 bytes a token
    assert len(prompt_text(body(long))) == 15 + 12_000 + len('","role":"user"}\n')

    counted = [
        cache.count(body(short)),
        cache.count(body(short)),  # seen, but under 1,024 tokens
        cache.count(body(long)),
        cache.count(body(other)),  # 8,015 bytes shared: 2,003 tokens
        cache.count(body(other + "d")),  # all 3,008 tokens of `other` shared
    ]

    assert counted == [(1008, 0), (1008, 0), (3008, 0), (3008, 1920), (3009, 2944)]
    assert cache.counts == counted
    assert cache.hit_ratio == (1920 + 2944) / (1008 * 2 + 3008 * 2 + 3009)
    assert CACHE_MIN_TOKENS == 1024


async def test_cached_tokens_reach_the_usage_of_plain_and_streamed_replies(
    fake_openai: FakeOpenAIServer, client: OpenAIClient
) -> None:
    """Counted prompt and cached tokens reach the real client, plain and streamed."""
    fake_openai.count_prefix_cache()
    fake_openai.script(
        Reply(content="Noted."),
        Reply(content="Noted again.", usage=FakeUsage(1, 3, reasoning_tokens=1)),
    )
    request = LLMRequest(messages=(Message.user("q" * 8400),), purpose="chat")

    plain = await client.complete(request)
    events = [event async for event in client.stream(request)]

    assert fake_openai.requests[1]["stream_options"] == {"include_usage": True}
    # 8,432 bytes of prompt text: 2,108 tokens, of which 1,024 + 8·128 cached
    assert plain.usage == Usage(
        prompt_tokens=2108, completion_tokens=2, total_tokens=2110, llm_calls=1
    )
    streamed = events[-1]
    assert isinstance(streamed, Completion) and streamed.content == "Noted again."
    assert streamed.usage == Usage(
        prompt_tokens=2108,
        completion_tokens=3,
        total_tokens=2111,
        llm_calls=1,
        cached_tokens=2048,
        reasoning_tokens=1,
    )


async def test_a_ten_step_react_run_reads_most_of_its_prompts_from_the_cache(
    fake_openai: FakeOpenAIServer, client: OpenAIClient
) -> None:
    """Over 70 % of a ten-step react run's input tokens are cached prefix."""
    cache = await ten_step_run(fake_openai, client)

    # 49 % before the history window moved in blocks and every call offered
    # the same tools (docs/benchmarks.md, "Prompt caching")
    assert cache.hit_ratio > 0.70
    assert round(cache.hit_ratio, 3) == 0.797


async def test_every_call_of_a_run_starts_with_the_same_tools_and_system_prompt(
    fake_openai: FakeOpenAIServer, client: OpenAIClient
) -> None:
    """Reason, act and observe all begin with the same tools and system prompt."""
    cache = await ten_step_run(fake_openai, client)

    bodies = fake_openai.requests
    assert [body.get("tool_choice") for body in bodies] == [
        "none",
        "auto",
        "none",
    ] * STEPS
    assert len({stable_prefix(body) for body in bodies}) == 1
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == [
        "read_page",
        "request_input",
    ]
    first = bodies[0]["messages"][0]
    assert first["role"] == "system" and "`read_page`" in first["content"]
    # the step's own text (its number, plan, results) is the phase prompt,
    # last; before it, each call sends the previous one's messages and what
    # the run added since, except where the window left a block out: three
    # times in thirty calls (the calls the cache missed), not at every call
    before = [body["messages"][:-1] for body in bodies]
    moved = [
        number
        for number in range(1, len(before))
        if before[number][: len(before[number - 1])] != before[number - 1]
    ]
    assert moved == [14, 20, 26]
    assert [cache.counts[n][1] for n in moved] == [0, 0, 0]


def window_starts(block_tokens: int) -> list[int]:
    """Where the window starts as a run adds ten messages after its question,
    in a history of sixteen earlier messages; every message costs the same,
    and the window may hold ten of them."""
    history = History()
    for number in range(16):
        text = f"earlier {number:02}"
        history.append(
            Message.user(text) if number % 2 == 0 else Message.assistant(text)
        )
    history.append(Message.user("the question"))
    cost = estimate_message_tokens(history[0])
    assert {estimate_message_tokens(m) for m in history} == {cost}
    starts = []
    for number in range(10):
        window = history.window(
            10 * cost, tool_output_chars=100, block_tokens=block_tokens * cost
        )
        starts.append(len(history) - len(window))
        history.append(Message.assistant(f"working {number:02}"))
    return starts


def test_the_history_window_leaves_old_messages_out_in_whole_blocks() -> None:
    """In blocks the window's start stays put for steps; unblocked it moves each one."""
    # ten of 17 + k messages fit: the earliest start is 7 + k, never past the
    # question (16); blocks of four messages begin at 0, 4, 8 and 12
    assert window_starts(0) == [7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    assert window_starts(4) == [8, 8, 12, 12, 12, 12, 16, 16, 16, 16]


def test_a_block_that_begins_inside_a_call_group_begins_after_it() -> None:
    """A block beginning inside a call group starts the window after the group."""
    call = ToolCall(id="c1", name="read_page", arguments="{}")
    history = History(
        [
            Message.user("first"),
            Message.assistant(None, (call,)),
            Message.tool("c1", "read_page", "x" * 400),
            Message.assistant("first answer"),
            Message.user("second"),
            Message.assistant("second answer"),
            Message.user("the question"),
        ]
    )
    costs = [estimate_message_tokens(m) for m in history]
    budget = sum(costs[1:])  # all but the first message fits
    # the second block begins inside the tool result: its first safe start
    # is the answer after it
    block = costs[0] + costs[1] + 1

    unblocked = history.window(budget, tool_output_chars=1000)
    window = history.window(budget, tool_output_chars=1000, block_tokens=block)

    assert unblocked[0].tool_calls == (call,) and len(unblocked) == 6
    assert [m.content for m in window] == [
        "first answer",
        "second",
        "second answer",
        "the question",
    ]
