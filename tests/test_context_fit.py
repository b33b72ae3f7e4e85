"""Context fitting: each request fits the model's context window.

The fake server plays a model with a 4,096-token window: it counts each
request's tokens its own way (`counted_tokens`, stricter than a real
tokenizer and independent of `backend.llm.tokens`) and refuses one over the
window with the 400 real servers send. The window is learnt the way the
server runs do: read from the model's server at start-up (`discover`).
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any

import pytest
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.history import History
from backend.llm.base import Message, ToolCall
from backend.llm.openai_compat.context_window import OLLAMA_DEFAULT, discover
from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from tests.conftest import StartServer
from tests.fake_openai import ErrorReply, FakeOpenAIServer, Reply, ScriptedReply
from tests.fakes import observe, reason
from tests.ws_client import labels

JSON = dict[str, Any]
WINDOW = 4096
MODEL = "small-model"
STEPS = 10
PAGE_CHARS = 3000
"""Each tool result is about this long: ten of them are twice the window."""

CHARS_PER_TOKEN = 3.5
"""The fake's count: a token per 3.5 characters (dense JSON and code run
about 3.5 to 4 per token in GPT-style tokenizers, English prose more), plus
the chat template's framing."""
PHASE = re.compile(r"# Agent step (\d+) of (\d+): (\w+)")


def counted_tokens(body: JSON) -> int:
    """The request's tokens as the fake model counts them: every message's
    text (tool calls as the JSON sent) and the tools' JSON, by characters,
    4 a message for its framing, 3 to start the reply."""
    total = 3
    for message in body["messages"]:
        text = message.get("content") or ""
        text += "".join(json.dumps(c) for c in message.get("tool_calls") or [])
        total += 4 + math.ceil(len(text) / CHARS_PER_TOKEN)
    if body.get("tools"):
        total += math.ceil(len(json.dumps(body["tools"])) / CHARS_PER_TOKEN)
    return total


class SmallModel:
    """A responder with a 4,096-token window that works through the react
    phases: reason, act (`fetch_page` for the step's page), observe (go on
    until step 10, then answer)."""

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.refused = 0

    def __call__(self, body: JSON) -> ScriptedReply:
        count = counted_tokens(body)
        self.counts.append(count)
        if count > WINDOW:
            self.refused += 1
            return ErrorReply(
                400,
                f"This model's maximum context length is {WINDOW} tokens. However, "
                f"you requested {count} tokens ({count} in the messages, 0 in the "
                "completion). Please reduce the length of the messages or completion.",
            )
        phase = PHASE.search(body["messages"][-1]["content"] or "")
        if phase is None:
            return Reply(content="The report has ten pages.")
        step, kind = int(phase.group(1)), phase.group(3)
        if kind == "REASON":
            return Reply(content=reason(f"Fetch page {step}.", tools=["fetch_page"]))
        if kind == "ACT":
            return Reply(tool_calls=[("fetch_page", {"page": step})])
        last = step == STEPS
        final = "The report has ten pages." if last else ""
        return Reply(
            content=observe(f"Read page {step}.", should_continue=not last, final=final)
        )


class PageArgs(BaseModel):
    page: int


def page_text(page: int) -> str:
    line = f"Page {page}: the northern region's quarterly figures rose again. "
    return (line * (PAGE_CHARS // len(line) + 1))[:PAGE_CHARS]


async def _fetch_page(args: PageArgs, ctx: ToolContext) -> dict[str, Any]:
    return {"page": args.page, "text": page_text(args.page)}


def page_registry() -> ToolRegistry:
    effect = ToolEffect(read_only=True, idempotent=True, untrusted_result=False)
    fetch = Tool(
        "fetch_page", "Fetch one page of the report.", PageArgs, _fetch_page, effect
    )
    return ToolRegistry([fetch])


def serve(fake: FakeOpenAIServer, path: str, answer: Any, method: str = "GET") -> None:
    """`fake` answers `method path` with the JSON `answer` (ahead of its own routes)."""

    async def endpoint(request: Request) -> Response:
        return JSONResponse(answer)

    fake.app.router.routes.insert(0, Route(path, endpoint, methods=[method]))


def vllm_models(tokens: int) -> JSON:
    return {
        "object": "list",
        "data": [
            {"id": "other-model", "object": "model", "max_model_len": 131072},
            {"id": MODEL, "object": "model", "max_model_len": tokens},
        ],
    }


async def test_a_ten_step_run_with_long_tool_results_never_overflows_the_window(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """Ten react steps of 3 KB tool results on a 4,096-token model: no request over it."""
    model = SmallModel()
    fake_openai.respond(model)
    serve(fake_openai, "/v1/models", vllm_models(WINDOW))
    harness = await start_server(
        None, page_registry(), llm_base_url=fake_openai.base_url, llm_model=MODEL
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("How many pages has the report?", agent_mode=True)

    step = ["agent_turn_start", "agent_reason"]
    step += ["tool_start:fetch_page", "tool_complete:fetch_page", "agent_observe"]
    assert labels(frames) == [
        "agent_start",
        *(step * STEPS),
        "chat_response",
        "agent_completion",
        "response_complete",
    ]
    assert frames[-2]["reason"] == "finished"
    assert frames[-3]["message"] == "The report has ten pages."
    assert (model.refused, len(model.counts)) == (0, 3 * STEPS)
    assert max(model.counts) <= WINDOW
    # the tool results alone were twice the window: they had to be shortened
    assert STEPS * PAGE_CHARS / CHARS_PER_TOKEN > 2 * WINDOW
    last = fake_openai.requests[-1]["messages"]
    assert last[1] == {"role": "user", "content": "How many pages has the report?"}
    assert "chars omitted]" in last[-2]["content"]  # the newest result, shortened
    assert last[-3]["tool_calls"][0]["function"]["arguments"] == '{"page": 10}'


async def test_without_a_known_window_the_same_run_is_refused_and_ends(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """The fake's 400 is real: unfitted, the run overflows it and ends with an error."""
    model = SmallModel()
    fake_openai.respond(model)
    harness = await start_server(
        None,
        page_registry(),
        llm_base_url=fake_openai.base_url,
        llm_model=MODEL,
        llm_max_retries=0,
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("How many pages has the report?", agent_mode=True)

    step = ["agent_turn_start", "agent_reason"]
    step += ["tool_start:fetch_page", "tool_complete:fetch_page", "agent_observe"]
    assert labels(frames) == [
        "agent_start",
        # every call offers the tools (a stable prefix for prompt caching),
        # so the run outgrows the window one step sooner than it did
        *(step * 2),
        *step[:-1],
        "agent_error",  # step 3's observe call was refused
        "chat_response",  # what the tools did, as a model failure answers
        "agent_completion",
        "response_complete",
    ]
    assert (model.refused, len(model.counts)) == (1, 9)
    assert model.counts[-1] > WINDOW
    assert "maximum context length is 4096 tokens" in frames[-4]["message"]
    assert frames[-2]["reason"] == "error"


async def test_a_request_that_cannot_fit_is_refused_before_it_is_sent(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """A message longer than the window: a plain error naming the sizes and the setting."""
    harness = await start_server(
        None,
        page_registry(),
        llm_base_url=fake_openai.base_url,
        llm_model=MODEL,
        llm_context_tokens=2048,
        llm_reply_tokens=512,
    )
    client, _ = await harness.ready_client()

    frames = await client.chat(
        "Summarise this: " + "lorem ipsum " * 1000, agent_mode=True
    )

    assert labels(frames) == [
        "agent_start",
        "agent_turn_start",
        "agent_error",
        "agent_completion",
        "response_complete",
    ]
    assert fake_openai.requests == []  # never sent
    message = frames[2]["message"]
    found = re.fullmatch(
        rf"This request to {MODEL} needs about (\d+) tokens \(512 of them kept for "
        r"the reply\), more than its context window of 2048 tokens: the system "
        # reason offers the tools too (fetch_page, request_input; prompt caching)
        r"prompt, the phase prompt, the 2 tools offered and the user's message "
        r"alone are too long, and "
        r"they are never cut\. Raise "
        r"LOOPWIRE_LLM_CONTEXT_TOKENS if the model takes a longer context \(for "
        r"Ollama, its num_ctx\), or lower LOOPWIRE_LLM_REPLY_TOKENS\.",
        message,
    )
    assert found is not None, message
    # the reason phase: 12,016 characters of message, in the user's message and
    # again in the phase prompt, are about 6,000 estimated tokens, 7,800 with
    # the margin for a real tokenizer, and the reply's 512 come on top
    assert 7800 + 512 < int(found.group(1)) < 7800 + 512 + 1000
    assert frames[3]["reason"] == "error"


def call_group(call_id: str, result: str) -> list[Message]:
    call = ToolCall(id=call_id, name="fetch_page", arguments='{"page": 1}')
    return [
        Message.assistant(None, [call]),
        Message.tool(call_id, "fetch_page", result),
    ]


def test_a_tight_window_keeps_the_question_and_the_newest_whole_call_groups() -> None:
    """Shortened: the current question, then only whole call groups, newest first."""
    older = [Message.user("before"), Message.assistant("an old answer")]
    current = [Message.user("the question")]
    steps = [*call_group("c1", "a" * 400), *call_group("c2", "b" * 400)]
    history = History([*older, *current, *steps])

    whole = history.window(10, tool_output_chars=100)
    shortened = history.window(10, tool_output_chars=100, current_tool_chars=100)
    tight = history.window(
        80, tool_output_chars=100, current_tool_chars=100, whole_current=False
    )
    least = history.window(
        1, tool_output_chars=100, current_tool_chars=100, whole_current=False
    )

    assert whole == [*current, *steps]  # the current request, whole, over budget
    assert [m.content for m in shortened[2::2]] == [
        "a" * 100 + "\n… [300 chars omitted]",
        "b" * 100 + "\n… [300 chars omitted]",
    ]
    assert tight == [current[0], steps[2], shortened[4]]  # c1's group left out
    assert least == current  # never a result without its call
    assert list(history) == [*older, *current, *steps]  # the history is unchanged


OLLAMA_SHOW = {
    "parameters": 'stop "<|im_end|>"\nnum_ctx 16384',
    "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
}
OLLAMA_BARE = {
    "parameters": 'stop "<|im_end|>"',
    "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
}
SERVERS: dict[str, tuple[list[tuple[str, str, Any]], int]] = {
    "vllm": ([("GET", "/v1/models", vllm_models(8192))], 8192),
    "llamacpp": (
        [("GET", "/props", {"default_generation_settings": {"n_ctx": 4096}})],
        4096,
    ),
    "lmstudio-loaded": (
        [
            (
                "GET",
                "/api/v0/models",
                {
                    "data": [
                        {
                            "id": MODEL,
                            "state": "loaded",
                            "max_context_length": 32768,
                            "loaded_context_length": 8192,
                        }
                    ]
                },
            )
        ],
        8192,
    ),
    "lmstudio-not-loaded": (
        [
            (
                "GET",
                "/api/v0/models",
                {
                    "data": [
                        {
                            "id": MODEL,
                            "state": "not-loaded",
                            "max_context_length": 32768,
                        }
                    ]
                },
            )
        ],
        32768,
    ),
    "ollama-num_ctx": ([("POST", "/api/show", OLLAMA_SHOW)], 16384),
    "ollama-loaded": (
        [
            ("POST", "/api/show", OLLAMA_BARE),
            (
                "GET",
                "/api/ps",
                {"models": [{"name": f"{MODEL}:latest", "context_length": 8192}]},
            ),
        ],
        8192,
    ),
    "ollama-default": (
        [("POST", "/api/show", OLLAMA_BARE), ("GET", "/api/ps", {"models": []})],
        OLLAMA_DEFAULT,
    ),
}


@pytest.mark.parametrize("kind", list(SERVERS))
async def test_the_window_is_read_from_each_kind_of_server(
    fake_openai: FakeOpenAIServer, kind: str
) -> None:
    """vLLM, llama.cpp, LM Studio and Ollama each say it their way; auto finds it."""
    routes, tokens = SERVERS[kind]
    for method, path, answer in routes:
        serve(fake_openai, path, answer, method)

    found = await discover(fake_openai.base_url, [MODEL], profile="auto")

    assert found == {MODEL: tokens}


async def test_a_named_profile_asks_its_own_server_only(
    fake_openai: FakeOpenAIServer,
) -> None:
    """`ollama` does not read vLLM's answer; `openai` asks nothing."""
    serve(fake_openai, "/v1/models", vllm_models(8192))

    assert await discover(fake_openai.base_url, [MODEL], profile="ollama") == {
        MODEL: None
    }
    assert await discover(fake_openai.base_url, [MODEL], profile="vllm") == {
        MODEL: 8192
    }
    assert await discover(fake_openai.base_url, [MODEL], profile="openai") == {
        MODEL: None
    }


@pytest.mark.parametrize(
    "answer",
    [
        {"data": [{"id": "other-model", "max_model_len": 8192}]},
        {"data": [{"id": MODEL, "max_model_len": "lots"}]},
        {"data": [{"id": MODEL, "max_model_len": -1}]},
        ["not", "a", "list", "of", "models"],
    ],
    ids=["not-listed", "not-a-number", "negative", "not-an-object"],
)
async def test_an_answer_without_the_window_leaves_it_unknown(
    fake_openai: FakeOpenAIServer, answer: Any
) -> None:
    """A server that does not say (or says nonsense) leaves the window unknown."""
    serve(fake_openai, "/v1/models", answer)

    assert await discover(fake_openai.base_url, [MODEL]) == {MODEL: None}


async def test_a_server_that_is_down_leaves_the_window_unknown_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No server at the URL: unknown, and a warning naming the setting."""
    logger = "backend.llm.openai_compat.context_window"
    with caplog.at_level(logging.WARNING, logger=logger):
        found = await discover("http://127.0.0.1:9/v1", [MODEL, "other-model"])

    assert found == {MODEL: None, "other-model": None}
    [record] = [r for r in caplog.records if r.name == logger]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(
        "cannot read the models' context windows from http://127.0.0.1:9/v1 ("
    )
    assert record.getMessage().endswith("): unknown; set LOOPWIRE_LLM_CONTEXT_TOKENS")


async def test_the_setting_comes_before_the_server(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """With LOOPWIRE_LLM_CONTEXT_TOKENS set the server is not asked, and it bounds requests."""
    asked: list[str] = []

    async def models(request: Request) -> Response:
        asked.append(request.url.path)
        return JSONResponse(vllm_models(WINDOW))

    fake_openai.app.router.routes.insert(0, Route("/v1/models", models))
    model = SmallModel()
    fake_openai.respond(model)
    harness = await start_server(
        None,
        page_registry(),
        llm_base_url=fake_openai.base_url,
        llm_model=MODEL,
        llm_context_tokens=WINDOW,
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("How many pages has the report?", agent_mode=True)

    assert asked == []
    assert labels(frames)[-3:] == [
        "chat_response",
        "agent_completion",
        "response_complete",
    ]
    assert (model.refused, len(model.counts)) == (0, 3 * STEPS)
    assert max(model.counts) <= WINDOW


@pytest.mark.parametrize(
    "base_url", ["https://api.openai.com/v1", "https://api.deepseek.com/v1"]
)
async def test_a_hosted_api_is_not_asked_for_its_window(
    base_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`auto` sends no probe to a hosted API: its windows stay unknown, and
    nothing was tried (a probe would fail here, offline, and say so)."""
    with caplog.at_level(logging.DEBUG, logger="backend.llm.openai_compat"):
        found = await discover(base_url, ["gpt-x"], api_key="sk-test")
    assert found == {"gpt-x": None}
    assert caplog.records == []


def many_tools_registry(count: int) -> ToolRegistry:
    """`fetch_page` and `count` other tools, each with a long description."""
    effect = ToolEffect(read_only=True, idempotent=True, untrusted_result=False)
    wordy = "Look something up in the archive. " + "It knows a great deal. " * 30
    others = [
        Tool(f"archive_{n}", wordy, PageArgs, _fetch_page, effect) for n in range(count)
    ]
    fetch = Tool(
        "fetch_page", "Fetch one page of the report.", PageArgs, _fetch_page, effect
    )
    return ToolRegistry([*others, fetch])


async def test_a_tool_list_too_long_for_the_window_is_cut_to_what_fits(
    start_server: StartServer, fake_openai: FakeOpenAIServer
) -> None:
    """Forty wordy tools do not fit a 4,096-token window: each act call offers
    a subset that does, with the tool the step named although it is listed
    last, and no request is refused; the run uses that tool and finishes."""
    model = SmallModel()
    fake_openai.respond(model)
    serve(fake_openai, "/v1/models", vllm_models(WINDOW))
    registry = many_tools_registry(40)
    everything = [{"function": t.spec().model_dump()} for t in registry]
    assert counted_tokens({"messages": [], "tools": everything}) > WINDOW
    harness = await start_server(
        None, registry, llm_base_url=fake_openai.base_url, llm_model=MODEL
    )
    client, _ = await harness.ready_client()

    frames = await client.chat("How many pages has the report?", agent_mode=True)

    assert frames[-2]["reason"] == "finished"
    assert (model.refused, max(model.counts) <= WINDOW) == (0, True)
    # every call offers the tools (prompt caching); act lets the model call them
    acts = [b for b in fake_openai.requests if b.get("tool_choice") == "auto"]
    assert len(acts) == STEPS
    offered = [[t["function"]["name"] for t in body["tools"]] for body in acts]
    # fetch_page, the step's choice, is kept although it comes last
    assert all(names[-2:] == ["fetch_page", "request_input"] for names in offered)
    assert all(4 <= len(names) < 20 for names in offered)
    descriptions = {t["function"]["description"] for t in acts[0]["tools"]}
    assert "Look something up in the archive." in descriptions  # a sentence left
    started = [f["tool_name"] for f in frames if f["type"] == "tool_start"]
    assert started == ["fetch_page"] * STEPS
