"""The shapes corpus (`tests/reply_corpus.py`) through every strategy that
can meet each shape, on the `openai` provider and the whole server.

Every run ends with the right answer or an honest, specific failure; the
tool runs exactly as often as the model asked; the user never sees the
model's thinking or a call's JSON as the answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from backend.llm.replies.cutoff import BRIEF_NOTE
from tests.conftest import Harness, server_starter
from tests.fake_openai import FakeOpenAIServer, running_fake_openai
from tests.fakes import test_registry
from tests.reply_corpus import (
    ANSWER,
    EXPRESSIONS,
    MODES,
    QUESTION,
    SHAPES,
    THOUGHT,
    USAGE,
    CorpusModel,
    Shape,
)
from tests.ws_client import Frame

pytestmark = pytest.mark.asyncio(loop_scope="module")

CASES = [(shape, mode) for shape in SHAPES for mode in shape.modes]
UNLIMITED = {
    "runs_per_minute": 1e6,
    "run_burst": 100_000,
    "connects_per_s": 1e6,
    "connect_burst": 100_000,
    "tool_rate_limit_calls": 100_000,
}
"""One client runs the whole table: no limit meant for people applies."""

NEVER_SHOWN = (
    "PONDER",
    "<think",
    "</think>",
    "tool_call",
    "[TOOL_CALLS]",
    "python_tag",
    "<function=",
    '"arguments"',
    '"parameters"',
    '"name"',
    "DRAFT",
    "```",
)
"""Thinking, call markup or JSON, and drafts: never in the user's answer."""

CUT_OFF = "cut off at its length limit"


def expected_runs(shape: Shape, mode: str) -> int:
    """How often `add` runs: as often as the model asks, which it does in
    every mode with tools unless its replies fail first."""
    if mode in ("llm_only", "chat") or shape.outcome == "cut_off":
        return 0
    if shape.outcome == "no_control" and mode == "plan_execute":
        return 0  # the plan never comes, so no step is carried out
    return shape.calls


def updates(frames: list[Frame], kind: str) -> list[Frame]:
    return [f for f in frames if f.get("update_type") == kind]


def of_type(frames: list[Frame], kind: str) -> list[Frame]:
    return [f for f in frames if f["type"] == kind]


@dataclass
class Servers:
    fake: FakeOpenAIServer
    loopwire: Harness


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def servers() -> AsyncIterator[Servers]:
    """One fake model server and one loopwire server on it for the whole
    table (each run has a connection, so a conversation, of its own)."""
    async with AsyncExitStack() as stack:
        fake = await stack.enter_async_context(running_fake_openai())
        harness = await server_starter(stack)(
            None, test_registry(), llm_base_url=fake.base_url, **UNLIMITED
        )
        yield Servers(fake, harness)


@pytest.mark.parametrize(
    ("shape", "mode"), CASES, ids=[f"{shape.name}-{mode}" for shape, mode in CASES]
)
async def test_every_shape_through_every_strategy_that_meets_it(
    shape: Shape, mode: str, servers: Servers
) -> None:
    """A run meeting the shape ends as the shape's outcome says, runs `add`
    exactly as often as the model asked, and shows no thinking or call JSON."""
    model = CorpusModel(shape)
    fake_openai = servers.fake
    fake_openai.requests.clear()
    fake_openai.respond(model)
    client, _ = await servers.loopwire.ready_client()

    frames = await client.chat(QUESTION, **MODES[mode])
    await client.connection.close()

    agent = bool(MODES[mode].get("agent_mode"))
    check_outcome(shape, agent, frames, fake_openai.requests)
    check_tool_runs(shape, mode, model, frames, fake_openai.requests)
    check_nothing_leaked(shape, frames)
    check_retries(shape, model, fake_openai.requests)
    if agent:  # a reply cut off twice counts its two calls too
        check_usage(shape, frames, len(fake_openai.requests))


def check_outcome(
    shape: Shape, agent: bool, frames: list[Frame], requests: list[dict[str, Any]]
) -> None:
    """The answer, or the failure the shape's outcome names, and nothing else."""
    assert frames[-1]["type"] == "response_complete"
    errors = of_type(frames, "error") + updates(frames, "agent_error")
    answers = [f["message"] for f in of_type(frames, "chat_response")]
    completion = updates(frames, "agent_completion")
    if shape.outcome == "cut_off":
        kind = "agent_update" if agent else "error"
        assert [(e["type"], CUT_OFF in e["message"]) for e in errors] == [(kind, True)]
        assert "no usable control block" not in errors[0]["message"]
        assert answers == []
        assert [c["reason"] for c in completion] == (["error"] if agent else [])
        return
    assert errors == []
    assert answers == [ANSWER]
    if shape.outcome == "no_control":
        assert [c["reason"] for c in completion] == ["error"]
        last = requests[-1]["messages"][-1]["content"]
        assert "# Final answer" in last and "no usable control block" in last
    elif agent:
        assert [c["reason"] for c in completion] == ["finished"]


def check_tool_runs(
    shape: Shape,
    mode: str,
    model: CorpusModel,
    frames: list[Frame],
    requests: list[dict[str, Any]],
) -> None:
    """`add` started and completed once per call the model asked for, each
    with the arguments it gave, and each result went back to the model."""
    runs = expected_runs(shape, mode)
    started = of_type(frames, "tool_start")
    completed = of_type(frames, "tool_complete")
    assert model.asked == runs
    assert [(f["tool_name"], f["arguments"]) for f in started] == [
        ("add", {"expression": expression}) for expression in EXPRESSIONS[:runs]
    ]
    assert [(f["tool_name"], f["result"]["result"]) for f in completed] == [
        ("add", 5.0)
    ] * runs
    assert of_type(frames, "tool_error") == []
    told = max(
        sum(1 for m in body["messages"] if m["role"] == "tool") for body in requests
    )
    assert told == runs
    ids = [f["tool_call_id"] for f in started]
    assert len(set(ids)) == len(ids)


def check_nothing_leaked(shape: Shape, frames: list[Frame]) -> None:
    """The streamed text and the answer hold no thinking, no call markup,
    no JSON; thinking came apart, as `thinking`."""
    tokens = "".join(f["token"] for f in of_type(frames, "token_stream"))
    for text in [tokens, *(f["message"] for f in of_type(frames, "chat_response"))]:
        assert [mark for mark in NEVER_SHOWN if mark in text] == []
    thoughts = [f["content"] for f in of_type(frames, "thinking")]
    if shape.thinks:
        assert thoughts and all(THOUGHT in thought for thought in thoughts)
    else:
        assert thoughts == []
    for frame in updates(frames, "agent_reason") + updates(frames, "agent_observe"):
        assert "PONDER" not in frame["content"]


def check_retries(
    shape: Shape, model: CorpusModel, requests: list[dict[str, Any]]
) -> None:
    """A reply cut off at its length limit is asked for once more, shorter;
    no other reply is asked for twice."""
    retries = [
        body
        for body in requests
        if any(m.get("content") == BRIEF_NOTE for m in body["messages"])
    ]
    if not shape.cut or model.cut == 0:
        assert retries == []
        return
    if shape.outcome == "cut_off":
        assert (model.cut, len(retries)) == (2, 1)
    else:  # each phase whose reply was cut off asked once more
        assert model.cut == len(retries) >= 1
    for body in retries:
        assert body["messages"][-1] == {"role": "system", "content": BRIEF_NOTE}


def check_usage(shape: Shape, frames: list[Frame], calls: int) -> None:
    """Every call is counted: its tokens as the server reported them, or,
    when it reported none, estimated and said to be."""
    (completion,) = updates(frames, "agent_completion")
    usage = completion["usage"]
    assert usage["llm_calls"] == calls
    if shape.name == "usage-missing":
        assert usage["estimated_calls"] == calls
        assert usage["prompt_tokens"] > 0
    else:
        assert usage["estimated_calls"] == 0
        assert usage["prompt_tokens"] == USAGE.prompt_tokens * calls
