"""The probes `loopwire doctor` runs, in order, each bounded by the timeout.

The model list comes first (`listing`, plain HTTP); every other probe is a
call through the real `OpenAIClient`, so a reply is read as loopwire reads
it: thinking apart, tool calls written as text made real, parameters the
server refuses dropped (`OpenAIClient.refusals`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from backend.agent.control import parse_control
from backend.doctor.checks import CHECK_NAMES, Check, Findings, Status, Target
from backend.doctor.listing import list_models
from backend.errors import LLMError
from backend.llm.base import Completion, LLMRequest, Message, TextDelta, ToolSpec
from backend.llm.openai_compat.client import OpenAIClient
from backend.prompts import PromptProvider, ToolLine
from backend.protocol import ReasonControl

clock: Callable[[], float] = time.perf_counter
"""How the probes time replies (tests put a steady one in its place)."""

TOOL = ToolSpec(
    name="get_time",
    description="The current time in a time zone (an IANA name such as UTC).",
    parameters={
        "type": "object",
        "properties": {"zone": {"type": "string"}},
        "required": ["zone"],
    },
)
"""The one tool the probes offer."""

QUESTION = "What time is it in UTC?"
TOOL_REQUEST = f"{QUESTION} Call the get_time tool to find out."
PONG = "Reply with the one word: pong"
COUNT = "Count from 1 to 20, the numbers separated by spaces."


Probe = Callable[[OpenAIClient, Findings], Awaitable[None]]


async def examine(target: Target) -> Findings:
    """Run every probe against `target`; `Unreachable` if nothing answers."""
    findings = Findings()
    await list_models(target, findings)
    client = OpenAIClient(
        model=target.model,
        base_url=target.base_url,
        api_key=target.api_key or None,
        timeout_s=target.timeout_s,
        max_retries=0,
        profile=target.profile,
    )
    try:
        for name, probe in _CALLS:
            await _bounded(name, probe, client, findings, target.timeout_s)
    finally:
        await client.aclose()
    findings.refusals.update(client.refusals)
    findings.add(reasoning_check(findings))
    for name in CHECK_NAMES:
        if name not in findings.checks:
            findings.add(Check(name, "skipped", "not tried: an earlier probe failed"))
    return findings


async def _bounded(
    name: str,
    probe: Probe,
    client: OpenAIClient,
    findings: Findings,
    timeout_s: float,
) -> None:
    """Run one probe within `timeout_s`; its failure is its row's `fail`."""
    if findings.status("completion") == "fail":
        return
    try:
        async with asyncio.timeout(timeout_s):
            await probe(client, findings)
    except TimeoutError:
        findings.add(Check(name, "fail", f"no reply within {timeout_s:g}s"))
    except LLMError as exc:
        findings.add(Check(name, "fail", str(exc)))


# -- calls through the client ---------------------------------------------------


async def completion(client: OpenAIClient, findings: Findings) -> None:
    """A plain, non-streamed completion."""
    started = clock()
    reply = await client.complete(LLMRequest(messages=(Message.user(PONG),)))
    took = clock() - started
    findings.replies.append(reply)
    findings.answers.append(reply.content)
    finish = reply.finish_reason or "none"
    if not reply.content.strip():
        findings.add(Check("completion", "fail", f"an empty answer (finish: {finish})"))
        return
    status: Status = "warn" if reply.finish_reason == "length" else "ok"
    detail = f"{quote(reply.content)} (finish: {finish}) in {duration(took)}"
    findings.add(Check("completion", status, detail))


async def streaming(client: OpenAIClient, findings: Findings) -> None:
    """A streamed completion: text in pieces, how soon, and its usage."""
    request = LLMRequest(messages=(Message.user(COUNT),))
    final, pieces, first = await _streamed(client, request)
    findings.replies.append(final)
    findings.answers.append("".join(pieces))
    findings.add(_streaming_check(pieces, first))
    findings.add(_usage_check(final, client.refusals))


async def _streamed(
    client: OpenAIClient, request: LLMRequest
) -> tuple[Completion, list[str], float | None]:
    """The final reply, the text pieces before it, and the time to the first."""
    pieces: list[str] = []
    first: float | None = None
    final: Completion | None = None
    started = clock()
    async for event in client.stream(request):
        if isinstance(event, TextDelta):
            if first is None:
                first = clock() - started
            pieces.append(event.text)
        else:
            final = event
    if final is None:  # the client always ends with one; never trust a seam
        raise LLMError("the stream ended without a completion")
    return final, pieces, first


def _streaming_check(pieces: list[str], first: float | None) -> Check:
    if not pieces or first is None:
        return Check("streaming", "fail", "no text came in the stream")
    after = f"first text after {duration(first)}"
    if len(pieces) == 1:
        return Check("streaming", "warn", f"the whole answer in one piece; {after}")
    return Check("streaming", "ok", f"{len(pieces)} pieces; {after}")


def _usage_check(final: Completion, refusals: Mapping[str, str]) -> Check:
    usage = final.usage
    if usage.prompt_tokens or usage.completion_tokens:
        detail = f"{usage.prompt_tokens} prompt + {usage.completion_tokens} completion"
        return Check("stream usage", "ok", detail + " tokens")
    why = " (the server refused stream_options)" if "stream_options" in refusals else ""
    return Check("stream usage", "warn", f"none reported{why}: token counts read 0")


async def tool_call(client: OpenAIClient, findings: Findings) -> None:
    """The tool offered with `tool_choice: "auto"`, as the act phase does."""
    prompts = PromptProvider()
    system = prompts.system_prompt(tools=[ToolLine(TOOL.name, TOOL.description)])
    request = LLMRequest(
        messages=(Message.system(system), Message.user(TOOL_REQUEST)),
        tools=(TOOL,),
        tool_choice="auto",
        purpose="act",
    )
    final, pieces, _ = await _streamed(client, request)
    findings.replies.append(final)
    findings.answers.append("".join(pieces))
    findings.text_call_format = final.text_call_format
    findings.add(_tool_check(final, findings.text_call_format, client.refusals))


def _tool_check(
    final: Completion, text_format: str | None, refusals: Mapping[str, str]
) -> Check:
    calls = [call for call in final.tool_calls if call.name == TOOL.name]
    if not calls:
        said = quote(final.content) if final.content.strip() else "nothing"
        return Check("tool call", "fail", f"no call; the model answered {said}")
    arguments = _arguments(calls[0].arguments)
    if arguments is None:
        shown = quote(calls[0].arguments)
        return Check("tool call", "fail", f"arguments not a JSON object: {shown}")
    call = f"{TOOL.name}({json.dumps(arguments, ensure_ascii=False)})"
    how = f"read from text ({text_format} format)" if text_format else "native"
    refused = [p for p in ("tools", "tool_choice") if p in refusals]
    if refused:
        names = " and ".join(refused)
        return Check("tool call", "warn", f"{how}, the server refusing {names}: {call}")
    return Check("tool call", "ok", f"{how}: {call}")


def _arguments(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def control_block(client: OpenAIClient, findings: Findings) -> None:
    """The reason phase's prompt, and its control block parsed as the loop does."""
    prompts = PromptProvider()
    tools = [ToolLine(TOOL.name, TOOL.description)]
    reason = prompts.agent_reason_prompt(
        question=QUESTION,
        step=1,
        max_steps=10,
        tools=tools,
        observations=(),
        ask="tool",
    )
    request = LLMRequest(
        messages=(
            Message.system(prompts.system_prompt(tools=tools)),
            Message.user(QUESTION),
            Message.system(reason),
        ),
        purpose="reason",
    )
    reply = await client.complete(request)
    findings.replies.append(reply)
    findings.answers.append(reply.content)
    control = parse_control(reply.content, ReasonControl).control
    if control is None:
        said = quote(reply.content) if reply.content.strip() else "nothing"
        findings.add(Check("control block", "warn", f"none in the reply: {said}"))
        return
    finish = "true" if control.finish else "false"
    detail = f"parsed: plan {quote(control.plan)}, finish {finish}"
    findings.add(Check("control block", "ok", detail))


_CALLS: tuple[tuple[str, Probe], ...] = (
    ("completion", completion),
    ("streaming", streaming),
    ("tool call", tool_call),
    ("control block", control_block),
)


# -- what the replies show ------------------------------------------------------


def reasoning_check(findings: Findings) -> Check:
    """Thinking present, and kept out of the answers."""
    replies = findings.replies
    if not replies:
        return Check("reasoning", "skipped", "no reply to look at")
    thinking = [reply for reply in replies if reply.reasoning.strip()]
    if any("<think>" in a or "</think>" in a for a in findings.answers):
        return Check("reasoning", "warn", "thinking tags left in an answer")
    if not thinking:
        return Check("reasoning", "none", "no thinking in the replies")
    return Check(
        "reasoning",
        "ok",
        f"thinking in {len(thinking)} of {len(replies)} replies, "
        "kept out of the answers",
    )


def quote(text: str, limit: int = 40) -> str:
    """`text` on one line, quoted, cut at `limit` characters."""
    line = " ".join(text.split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    return f'"{line}"'


def duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s"
