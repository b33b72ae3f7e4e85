"""`loopwire doctor` against imitations of the servers people run
(`tests/server_imitations.py`): the table, the verdict, the settings to use
and the exit status; an endpoint that is down said in one line."""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from backend.__main__ import main
from backend.doctor import listing, probes
from backend.doctor.command import NOTHING_TO_PROBE
from backend.doctor.servers import server_profile
from tests.fake_openai import ErrorReply
from tests.server_imitations import (
    OLLAMA_RUNNER_STOPPED,
    VLLM_NO_PARSER,
    Imitation,
    ImitationServer,
    running_imitation,
)

HEADINGS = [
    "check          result  detail",
    "-------------  ------  ------",
]


@pytest.fixture(autouse=True)
def _steady(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A clock that moves 250 ms at each reading; no `.env` and no model
    settings from the environment."""
    ticks = itertools.count()
    monkeypatch.setattr(probes, "clock", lambda: next(ticks) * 0.25)
    monkeypatch.chdir(tmp_path)
    for name in (
        "LOOPWIRE_LLM_MODEL",
        "LOOPWIRE_LLM_PROFILE",
        "LOOPWIRE_LLM_TIMEOUT_S",
    ):
        monkeypatch.delenv(name, raising=False)


async def doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """`loopwire doctor ARGV` in-process (in a thread: the imitation answers
    from this loop); its exit status and stdout, stderr being empty."""
    code = await asyncio.to_thread(main, ["doctor", *argv])
    out, err = capsys.readouterr()
    assert err == ""
    return code, out


def against(server: ImitationServer, *more: str) -> list[str]:
    return ["--base-url", server.base_url, "--model", server.imitation.model, *more]


def sent(server: ImitationServer) -> list[tuple[bool, bool, str | None]]:
    """Each chat request as (streamed, offered tools, tool_choice)."""
    return [
        (bool(body.get("stream")), "tools" in body, body.get("tool_choice"))
        for body in server.requests
    ]


PROBES_SENT = [
    (False, False, None),  # completion
    (True, False, None),  # streaming
    (True, True, "auto"),  # tool call
    (False, False, None),  # control block
]


@pytest.fixture
async def openai_like() -> AsyncIterator[ImitationServer]:
    async with running_imitation("openai") as server:
        yield server


async def test_an_openai_like_server_works_with_react(
    capsys: pytest.CaptureFixture[str], openai_like: ImitationServer
) -> None:
    """Native calls, usage and a kept control block: works, profile openai,
    strategy react, exit 0 — the whole report, probe by probe."""
    code, out = await doctor(capsys, *against(openai_like))

    url = openai_like.base_url
    assert code == 0
    assert out.splitlines() == [
        f"loopwire doctor: {url}, model gpt-4o-mini (profile auto)",
        "",
        *HEADINGS,
        "models         ok      gpt-4o-mini is listed (2 models)",
        'completion     ok      "pong" (finish: stop) in 250 ms',
        "streaming      ok      13 pieces; first text after 250 ms",
        "stream usage   ok      21 prompt + 7 completion tokens",
        'tool call      ok      native: get_time({"zone": "UTC"})',
        'control block  ok      parsed: plan "Call get_time for UTC.", finish false',
        "reasoning      none    no thinking in the replies",
        "",
        "verdict: works",
        "settings:",
        f"  LOOPWIRE_LLM_BASE_URL={url}",
        "  LOOPWIRE_LLM_MODEL=gpt-4o-mini",
        "  LOOPWIRE_LLM_PROFILE=openai",
        "  LOOPWIRE_AGENT_LOOP_STRATEGY=react",
    ]
    assert sent(openai_like) == PROBES_SENT
    assert openai_like.requests[1]["stream_options"] == {"include_usage": True}
    assert openai_like.authorizations == [""]


async def test_an_ollama_like_reasoning_model_works_from_its_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`<think>` kept out of every answer and a Hermes call read from text:
    works, profile ollama, with a note on native calls."""
    async with running_imitation("ollama") as server:
        code, out = await doctor(capsys, *against(server))

    lines = out.splitlines()
    assert code == 0
    assert lines[4:] == [
        "models         ok      qwen3:8b is listed (2 models)",
        'completion     ok      "pong" (finish: stop) in 250 ms',
        "streaming      ok      13 pieces; first text after 250 ms",
        "stream usage   ok      21 prompt + 7 completion tokens",
        'tool call      ok      read from text (hermes format): get_time({"zone": "UTC"})',
        'control block  ok      parsed: plan "Call get_time for UTC.", finish false',
        "reasoning      ok      thinking in 4 of 4 replies, kept out of the answers",
        "",
        "verdict: works",
        "notes:",
        "  - tool calls come as text (hermes format): loopwire reads them; for "
        "native calls, use a model whose Ollama template has tools",
        "settings:",
        f"  LOOPWIRE_LLM_BASE_URL={server.base_url}",
        "  LOOPWIRE_LLM_MODEL=qwen3:8b",
        "  LOOPWIRE_LLM_PROFILE=ollama",
        "  LOOPWIRE_AGENT_LOOP_STRATEGY=react",
    ]
    assert sent(server) == PROBES_SENT


async def test_a_vllm_like_server_refusing_tool_choice_still_gets_a_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vLLM's 400 for `tool_choice` without a tool parser: the call is sent
    again without tools, read from text; works, profile vllm, the refusal
    and the server flags named."""
    async with running_imitation("vllm") as server:
        code, out = await doctor(capsys, *against(server, "--timeout", "5"))

    lines = out.splitlines()
    assert code == 0
    assert lines[8] == (
        "tool call      warn    read from text (hermes format), the server "
        'refusing tools and tool_choice: get_time({"zone": "UTC"})'
    )
    assert lines[10] == (
        "reasoning      ok      thinking in 4 of 4 replies, kept out of the answers"
    )
    assert lines[12:] == [
        "verdict: works",
        "notes:",
        "  - tool calls come as text (hermes format): loopwire reads them; for "
        "native calls, start vLLM with --enable-auto-tool-choice and "
        "--tool-call-parser",
        f"  - the server refuses tool_choice and tools ({VLLM_NO_PARSER}): "
        "loopwire stops sending them after the first refusal in each process",
        "settings:",
        f"  LOOPWIRE_LLM_BASE_URL={server.base_url}",
        "  LOOPWIRE_LLM_MODEL=Qwen/Qwen3-8B",
        "  LOOPWIRE_LLM_PROFILE=vllm",
        "  LOOPWIRE_AGENT_LOOP_STRATEGY=react",
    ]
    assert sent(server) == [*PROBES_SENT[:3], (True, False, None), PROBES_SENT[3]]


async def test_a_small_model_without_control_blocks_works_with_act(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Prose where the reason phase asks for a control block: works with
    these settings, strategy act (profile llamacpp, from its model list)."""
    async with running_imitation("small") as server:
        code, out = await doctor(capsys, *against(server))

    lines = out.splitlines()
    assert code == 0
    assert lines[8:10] == [
        'tool call      ok      native: get_time({"zone": "UTC"})',
        'control block  warn    none in the reply: "I would look up the current '
        'time in UTC…"',
    ]
    assert lines[12:] == [
        "verdict: works with these settings",
        "  - the model wrote no control block for the reason phase: the act "
        "strategy needs none (LOOPWIRE_AGENT_LOOP_STRATEGY=act)",
        "settings:",
        f"  LOOPWIRE_LLM_BASE_URL={server.base_url}",
        "  LOOPWIRE_LLM_MODEL=qwen2.5-0.5b-instruct-q4_k_m",
        "  LOOPWIRE_LLM_PROFILE=llamacpp",
        "  LOOPWIRE_AGENT_LOOP_STRATEGY=act",
    ]


async def test_lm_studio_with_a_native_tool_model_works(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """LM Studio with a model it has native tool use for: works, profile
    lmstudio from its `owned_by: "organization_owner"`, strategy react, exit 0."""
    async with running_imitation("lmstudio") as server:
        code, out = await doctor(capsys, *against(server))

    assert code == 0
    assert out.splitlines()[4:] == [
        "models         ok      qwen2.5-7b-instruct is listed (2 models)",
        'completion     ok      "pong" (finish: stop) in 250 ms',
        "streaming      ok      13 pieces; first text after 250 ms",
        "stream usage   ok      21 prompt + 7 completion tokens",
        'tool call      ok      native: get_time({"zone": "UTC"})',
        'control block  ok      parsed: plan "Call get_time for UTC.", finish false',
        "reasoning      none    no thinking in the replies",
        "",
        "verdict: works",
        "settings:",
        f"  LOOPWIRE_LLM_BASE_URL={server.base_url}",
        "  LOOPWIRE_LLM_MODEL=qwen2.5-7b-instruct",
        "  LOOPWIRE_LLM_PROFILE=lmstudio",
        "  LOOPWIRE_AGENT_LOOP_STRATEGY=react",
    ]
    assert sent(server) == PROBES_SENT
    assert server.requests[2]["stream_options"] == {"include_usage": True}


async def test_lm_studio_with_a_model_lacking_a_tool_template_wont_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A call LM Studio's default tool use could not parse, left as text that
    loopwire cannot read either: won't work, exit 1, the model's own words
    and how to get native calls given, no settings."""
    async with running_imitation("lmstudio-default") as server:
        code, out = await doctor(capsys, *against(server))

    answered = 'no call; the model answered "[TOOL_REQUEST]get_time(zone="UTC")[END_…"'
    assert code == 1
    assert out.splitlines()[4:] == [
        "models         ok      gemma-2-2b-it is listed (1 model)",
        'completion     ok      "pong" (finish: stop) in 250 ms',
        "streaming      ok      13 pieces; first text after 250 ms",
        "stream usage   ok      21 prompt + 7 completion tokens",
        f"tool call      fail    {answered}",
        'control block  ok      parsed: plan "Call get_time for UTC.", finish false',
        "reasoning      none    no thinking in the replies",
        "",
        "verdict: won't work",
        f"  - no tool call ({answered}): agent runs could not use tools; for "
        "native calls, load a model LM Studio has native tool use for (a hammer "
        "badge in the app)",
    ]
    assert sent(server) == PROBES_SENT


async def test_deepseek_reasoner_works_its_thinking_kept_apart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`deepseek-reasoner`: `reasoning_content` beside every answer and its
    native call, kept out of them; works, profile deepseek from `owned_by:
    "deepseek"`, strategy react, exit 0."""
    async with running_imitation("deepseek") as server:
        argv = ["--base-url", server.base_url, "--model", "deepseek-reasoner"]
        code, out = await doctor(capsys, *argv)

    assert code == 0
    assert out.splitlines()[4:] == [
        "models         ok      deepseek-reasoner is listed (2 models)",
        'completion     ok      "pong" (finish: stop) in 250 ms',
        "streaming      ok      13 pieces; first text after 250 ms",
        "stream usage   ok      21 prompt + 7 completion tokens",
        'tool call      ok      native: get_time({"zone": "UTC"})',
        'control block  ok      parsed: plan "Call get_time for UTC.", finish false',
        "reasoning      ok      thinking in 4 of 4 replies, kept out of the answers",
        "",
        "verdict: works",
        "settings:",
        f"  LOOPWIRE_LLM_BASE_URL={server.base_url}",
        "  LOOPWIRE_LLM_MODEL=deepseek-reasoner",
        "  LOOPWIRE_LLM_PROFILE=deepseek",
        "  LOOPWIRE_AGENT_LOOP_STRATEGY=react",
    ]
    assert sent(server) == PROBES_SENT
    assert [body["model"] for body in server.requests] == ["deepseek-reasoner"] * 4


async def test_deepseek_chat_works_without_thinking(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`deepseek-chat` on the same API: native call, no thinking; works,
    profile deepseek, exit 0."""
    async with running_imitation("deepseek") as server:
        code, out = await doctor(capsys, *against(server))

    lines = out.splitlines()
    assert code == 0
    assert lines[4] == "models         ok      deepseek-chat is listed (2 models)"
    assert lines[8:11] == [
        'tool call      ok      native: get_time({"zone": "UTC"})',
        'control block  ok      parsed: plan "Call get_time for UTC.", finish false',
        "reasoning      none    no thinking in the replies",
    ]
    assert lines[12:] == [
        "verdict: works",
        "settings:",
        f"  LOOPWIRE_LLM_BASE_URL={server.base_url}",
        "  LOOPWIRE_LLM_MODEL=deepseek-chat",
        "  LOOPWIRE_LLM_PROFILE=deepseek",
        "  LOOPWIRE_AGENT_LOOP_STRATEGY=react",
    ]


@pytest.mark.parametrize(
    ("owners", "base_url", "profile"),
    [
        ({"organization_owner"}, "http://10.0.0.5:8000/v1", "lmstudio"),
        ({"deepseek"}, "https://gateway.example/v1", "deepseek"),
        (set(), "http://127.0.0.1:1234/v1", "lmstudio"),
        (set(), "https://api.deepseek.com/v1", "deepseek"),
        ({"organization_owner"}, "https://api.deepseek.com/v1", "lmstudio"),
        ({"deepseek", "library"}, "http://127.0.0.1:9999/v1", "auto"),
    ],
)
def test_lm_studio_and_deepseek_are_named_from_owners_then_address(
    owners: set[str], base_url: str, profile: str
) -> None:
    """The model list's `owned_by` names the profile; with none (or a mix),
    LM Studio's port 1234 or DeepSeek's host does, else the configured one."""
    assert server_profile(owners, base_url, "auto") == profile


async def test_the_endpoint_and_model_default_to_the_settings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without options the endpoint, model and profile are the settings'."""
    async with running_imitation("small") as server:
        monkeypatch.setenv("LOOPWIRE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("LOOPWIRE_LLM_MODEL", server.imitation.model)
        monkeypatch.setenv("LOOPWIRE_LLM_PROFILE", "llamacpp")
        code, out = await doctor(capsys)

    assert code == 0
    assert out.splitlines()[0] == (
        f"loopwire doctor: {server.base_url}, model "
        "qwen2.5-0.5b-instruct-q4_k_m (profile llamacpp)"
    )
    assert server.requests[2]["parallel_tool_calls"] is True


async def test_a_server_that_lists_models_but_fails_completions_wont_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its model listed, every completion a 500: won't work, exit 1, the
    later probes not tried (one chat request only), no settings offered."""
    async with running_imitation("broken") as server:
        code, out = await doctor(capsys, *against(server))

    failed = f"the LLM server answered 500: {OLLAMA_RUNNER_STOPPED}"
    assert code == 1
    assert out.splitlines()[2:] == [
        "check          result   detail",
        "-------------  -------  ------",
        "models         ok       llama3.1:8b is listed (1 model)",
        f"completion     fail     {failed}",
        "streaming      skipped  not tried: an earlier probe failed",
        "stream usage   skipped  not tried: an earlier probe failed",
        "tool call      skipped  not tried: an earlier probe failed",
        "control block  skipped  not tried: an earlier probe failed",
        "reasoning      skipped  no reply to look at",
        "",
        "verdict: won't work",
        f"  - no completion: {failed}",
    ]
    assert len(server.requests) == 1


async def test_the_api_key_is_sent_but_never_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A server echoing the key in its 401: the report masks it, the model
    list was asked for with it."""
    key = "sk-doctor-test-0123456789abcdef"
    echo = Imitation("echo", [("gpt-4o-mini", "system")], lambda body: _refuse(key))
    server = ImitationServer(echo)
    await server.start()
    try:
        code, out = await doctor(capsys, *against(server, "--api-key", key))
    finally:
        await server.stop()

    assert code == 1
    assert key not in out
    assert "verdict: won't work" in out.splitlines()
    assert server.authorizations == [f"Bearer {key}"]


def _refuse(key: str) -> ErrorReply:
    return ErrorReply(401, f"Incorrect API key provided: {key}.")


async def test_an_endpoint_that_refuses_connections_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing listening: one line, no traceback, exit 1."""
    port = _closed_port()

    code, out = await doctor(capsys, "--base-url", f"http://127.0.0.1:{port}/v1")

    assert code == 1
    assert out == (
        f"loopwire doctor: cannot reach http://127.0.0.1:{port}/v1: "
        "connection refused\n"
    )


async def test_an_endpoint_that_never_answers_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A server that takes the connection and says nothing: one line once
    the timeout passes, exit 1."""
    silent = await asyncio.start_server(_say_nothing, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    try:
        code, out = await doctor(
            capsys, "--base-url", f"http://127.0.0.1:{port}/v1", "--timeout", "0.2"
        )
    finally:
        silent.close()
        await silent.wait_closed()

    assert code == 1
    assert out == (
        f"loopwire doctor: cannot reach http://127.0.0.1:{port}/v1: "
        "no answer within 0.2s\n"
    )


def test_an_unknown_host_is_said_plainly() -> None:
    """A failed name lookup under the HTTP client's error reads `unknown host`
    (no lookup is made: tests stay on this machine)."""
    lookup = socket.gaierror(-2, "Name or service not known")
    try:
        raise httpx2.ConnectError(str(lookup)) from lookup
    except httpx2.ConnectError as exc:
        failed = exc

    assert listing.why_unreachable(failed) == "unknown host"


async def _say_nothing(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    await reader.read()  # until the client gives up and closes
    writer.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_doctor_runs_as_a_command(
    openai_like: ImitationServer, tmp_path: Path
) -> None:
    """`python -m backend doctor` as a process: the verdict on stdout, exit 0."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("LOOPWIRE_", "OPENAI_"))
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "backend",
        "doctor",
        *against(openai_like, "--timeout", "30"),
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()

    lines = out.decode().splitlines()
    assert (process.returncode, err.decode()) == (0, "")
    assert lines[-6:] == [
        "verdict: works",
        "settings:",
        f"  LOOPWIRE_LLM_BASE_URL={openai_like.base_url}",
        "  LOOPWIRE_LLM_MODEL=gpt-4o-mini",
        "  LOOPWIRE_LLM_PROFILE=openai",
        "  LOOPWIRE_AGENT_LOOP_STRATEGY=react",
    ]
    assert len(openai_like.requests) == 4


async def test_with_no_server_configured_it_says_so_and_probes_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No base URL and no key anywhere: one line saying loopwire runs offline
    and how to name a server, exit 2, and no request to any default host."""
    code, out = await doctor(capsys)
    assert (code, out) == (2, NOTHING_TO_PROBE + "\n")
