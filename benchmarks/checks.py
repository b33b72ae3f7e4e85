"""What every benchmarked run must look like; a run that differs fails the bench.

A figure is reported only for rounds whose every run was checked here: the
exact frame sequence (docs/protocol.md; a streamed answer's `token_stream`
frames are counted exactly where token batching is off, else bounded, and
their tokens joined must be the answer), the tool results, the answer text,
the step count and the LLM calls the server says it made. The fake LLM's
request counts are checked against the same expectations (`expect_calls`),
so a run that ended early, retried or made an extra call never yields a
flattering number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.fake_llm import (
    TOOL_MODE_EXPRESSION,
    answer_text,
    answer_tokens,
    final_answer,
    step_expression,
)

Frame = dict[str, Any]

STEP_KINDS = ("agent_turn_start", "agent_reason", "tool_start", "tool_complete")
RUN_END = ("chat_response", "agent_completion", "response_complete")


class BenchError(Exception):
    """A run went wrong, or a process misbehaved: no figure is reported."""


def kind(frame: Frame) -> str:
    """A frame's type, or its `update_type` for `agent_update` frames."""
    return str(frame.get("update_type") or frame.get("type"))


def kinds(frames: Sequence[Frame]) -> list[str]:
    return [kind(frame) for frame in frames]


SHOWN = 24
"""Frame kinds quoted in a failure, at most."""


def compact(names: Sequence[str]) -> str:
    """Frame kinds for a message: repeats folded (`token_stream x17`), long
    lists cut."""
    folded: list[str] = []
    index = 0
    while index < len(names):
        end = index
        while end + 1 < len(names) and names[end + 1] == names[index]:
            end += 1
        count = end - index + 1
        folded.append(names[index] + (f" x{count}" if count > 1 else ""))
        index = end + 1
    cut = len(folded) > SHOWN
    return ", ".join(folded[:SHOWN]) + (f", … ({len(names)} frames)" if cut else "")


def _fail(what: str, frames: Sequence[Frame], problem: str) -> BenchError:
    errors = [f.get("message") for f in frames if f.get("type") == "error"]
    errors += [f.get("message") for f in frames if kind(f) == "agent_error"]
    detail = f"; errors: {errors}" if errors else ""
    return BenchError(f"{what}: {problem}; frames: {compact(kinds(frames))}{detail}")


def _expect_kinds(what: str, frames: Sequence[Frame], expected: Sequence[str]) -> None:
    got = kinds(frames)
    if got != list(expected):
        at = next(
            (
                i
                for i, pair in enumerate(zip(got, expected, strict=False))
                if pair[0] != pair[1]
            ),
            min(len(got), len(expected)),
        )
        wanted = expected[at] if at < len(expected) else "the end"
        found = got[at] if at < len(got) else "the end"
        problem = f"frame {at + 1}: expected {wanted}, got {found}"
        raise _fail(what, frames, problem)


def _only(frames: Sequence[Frame], wanted: str) -> Frame:
    found = [frame for frame in frames if kind(frame) == wanted]
    if len(found) != 1:
        raise _fail("run", frames, f"expected one {wanted}, got {len(found)}")
    return found[0]


def check_tool_turn(frames: Sequence[Frame], tokens: int) -> None:
    """Tool mode: one `calculator` call, then an answer of `tokens` tokens
    (in as many frames as the server's token batching made, `check_stream`)."""
    what = "tool-mode turn"
    _expect_kinds(what, frames[:2], ["tool_start", "tool_complete"])
    result = frames[1].get("result")
    if result != {"expression": TOOL_MODE_EXPRESSION, "result": 42}:
        raise _fail(what, frames, f"calculator returned {result!r}")
    _check_streamed(what, frames[2:], tokens, exact=False)


def check_agent_run(frames: Sequence[Frame], steps: int) -> None:
    """A react run of exactly `steps` steps of reason, act (calculator), observe."""
    what = f"{steps}-step agent run"
    step_kinds = [*STEP_KINDS, "agent_observe"] * steps
    _expect_kinds(what, frames, ["agent_start", *step_kinds, *RUN_END])
    completions = [f for f in frames if kind(f) == "tool_complete"]
    for step, frame in enumerate(completions, start=1):
        expected = {"expression": step_expression(step), "result": 2 * step}
        if frame.get("result") != expected:
            raise _fail(what, frames, f"step {step}: calculator gave {frame!r}")
    completion = _only(frames, "agent_completion")
    usage = completion.get("usage") or {}
    if (
        completion.get("reason") != "finished"
        or completion.get("steps") != steps
        or usage.get("llm_calls") != 3 * steps
    ):
        raise _fail(what, frames, f"completion {completion!r}")
    _check_answer(what, frames, final_answer(steps))


def check_stream(frames: Sequence[Frame], tokens: int, *, exact: bool = True) -> int:
    """A plain chat: an answer of `tokens` streamed tokens; its `token_stream`
    frames counted.

    Exact: a frame per token and the empty closing one (`tokens` + 1, a
    server with token batching off). Otherwise 2 to `tokens` + 1 frames (the
    batcher joins the pieces after the first). Either way the first frame is
    marked first, only the closing one last (with no text), the tokens
    joined are the answer streamed, and `chat_response` has it."""
    return _check_streamed("streamed answer", frames, tokens, exact=exact)


def _check_streamed(
    what: str, frames: Sequence[Frame], tokens: int, *, exact: bool
) -> int:
    """`frames`: a streamed answer of `tokens` tokens to the end of the run
    (`check_stream`); the `token_stream` frames counted."""
    count = 0
    while count < len(frames) and kind(frames[count]) == "token_stream":
        count += 1
    low, high = (tokens + 1, tokens + 1) if exact else (min(2, tokens + 1), tokens + 1)
    if not low <= count <= high:
        wanted = f"{low}" if low == high else f"{low} to {high}"
        raise _fail(what, frames, f"{count} token_stream frames, expected {wanted}")
    _expect_kinds(what, frames[count:], ["chat_response", "response_complete"])
    streamed = frames[:count]
    firsts = [i for i, frame in enumerate(streamed) if frame.get("is_first")]
    lasts = [i for i, frame in enumerate(streamed) if frame.get("is_last")]
    if firsts != [0] or lasts != [count - 1] or streamed[-1].get("token") != "":
        problem = (
            f"is_first on frames {firsts}, is_last on {lasts} of {count}, "
            f"closing token {streamed[-1].get('token')!r}"
        )
        raise _fail(what, frames, problem)
    text = "".join(str(frame.get("token")) for frame in streamed)
    if any(not frame.get("token") for frame in streamed[:-1]):
        raise _fail(what, frames, "an empty token_stream frame before the last")
    if text != "".join(answer_tokens(tokens)):
        raise _fail(what, frames, f"tokens joined: {text!r}")
    _check_answer(what, frames, answer_text(tokens))
    return count


def check_paused(frames: Sequence[Frame]) -> None:
    """An agent run waiting on its first question."""
    expected = ["agent_start", "agent_turn_start", "agent_reason"]
    _expect_kinds("paused run", frames, [*expected, "agent_request_input"])


def check_stopped(frames: Sequence[Frame], *, agent: bool, tool: str = "") -> None:
    """What a Stop must end with: `response_complete`, no error; for agent
    runs `agent_stopped` (immediate) and `agent_completion` (stopped); a
    running `tool` reported cancelled."""
    what = "stopped run"
    if not frames or kind(frames[-1]) != "response_complete":
        raise _fail(what, frames, "it did not end with response_complete")
    if any(kind(f) in ("error", "agent_error") for f in frames):
        raise _fail(what, frames, "an error was reported")
    if agent:
        stopped = _only(frames, "agent_stopped")
        completion = _only(frames, "agent_completion")
        if stopped.get("mode") != "immediate" or completion.get("reason") != "stopped":
            raise _fail(what, frames, f"{stopped!r} / {completion!r}")
    if tool:
        errors = [f for f in frames if kind(f) == "tool_error"]
        if not any(
            f.get("tool_name") == tool and f.get("status") == "cancelled"
            for f in errors
        ):
            raise _fail(what, frames, f"{tool} was not reported cancelled")


def _check_answer(what: str, frames: Sequence[Frame], expected: str) -> None:
    message = _only(frames, "chat_response").get("message")
    if message != expected:
        raise _fail(what, frames, f"answer {message!r}, expected {expected!r}")


def expect_calls(
    before: Mapping[str, int], after: Mapping[str, int], **expected: int
) -> None:
    """The fake LLM got exactly the `expected` requests per phase between
    two readings of its counts, and no others."""
    seen = {k: after.get(k, 0) - before.get(k, 0) for k in {*before, *after}}
    seen = {k: v for k, v in seen.items() if v and k != "requests"}
    wanted = {k: v for k, v in expected.items() if v}
    total = after.get("requests", 0) - before.get("requests", 0)
    if seen != wanted or total != sum(wanted.values()):
        raise BenchError(
            f"the fake LLM got {seen} ({total} requests), expected {wanted}"
        )
