"""`loopwire chat`: a scripted WebSocket client for a running server.

Sends one `chat`, prints the run as it happens, answers `request_input`
questions from `--answer` values or the terminal (and stops the run when it
has neither), and exits with 0 when the run completes, 1 on an error frame.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any, TextIO
from urllib.parse import quote

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

Frame = dict[str, Any]


def chat_command(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_chat(args, sys.stdout))
    except (OSError, WebSocketException) as exc:
        print(f"loopwire: cannot talk to {args.url}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


async def _chat(args: argparse.Namespace, out: TextIO) -> int:
    session = getattr(args, "session", None)
    params = f"?session_id={quote(session)}" if session else ""
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    async with connect(args.url + params, additional_headers=headers) as ws:
        ready = json.loads(await ws.recv())
        if ready.get("type") != "session_ready":
            print(describe(ready), file=out)
            return 1
        if session and not ready["resumed"]:
            print(f"loopwire: no conversation {session} on this server", file=out)
            return 1
        request: Frame = {
            "type": "chat",
            "content": args.message,
            "agent_mode": args.agent,
        }
        if args.max_steps is not None:
            request["agent_max_steps"] = args.max_steps
        await ws.send(json.dumps(request))
        answers = list(args.answer or ())
        after = ready["last_seq"]  # what a resumed session replays is old news
        status = await _follow(ws, args.json, answers, out, args.approve, after)
        if not args.json:
            print(
                f"(conversation {ready['session_id']}: --session to continue)", file=out
            )
        return status


async def _follow(
    ws: ClientConnection,
    raw: bool,
    answers: list[str],
    out: TextIO,
    approve: str | None = None,
    after_seq: int = 0,
) -> int:
    status, streamed = 0, False
    while True:
        frame: Frame = json.loads(await ws.recv())
        if frame.get("seq", 0) <= after_seq:
            continue
        line = json.dumps(frame) if raw else describe(frame)
        if frame["type"] == "chat_response" and streamed and not raw:
            line = ""  # already printed token by token
        streamed = frame["type"] == "token_stream"
        if line:
            print(line, file=out, end="" if frame["type"] == "token_stream" else "\n")
            out.flush()
        if frame["type"] == "error":
            status = 1
        if frame.get("update_type") == "agent_request_input":
            await _answer(ws, frame, answers, out)
        if frame["type"] == "tool_approval_request":
            await _approve(ws, frame, approve, out)
        if frame["type"] == "response_complete":
            return status


async def _answer(
    ws: ClientConnection, frame: Frame, answers: list[str], out: TextIO
) -> None:
    """Answer from --answer values, else from the terminal, else stop the run."""
    if answers:
        answer = answers.pop(0)
        print(f"your answer> {answer}", file=out)
    elif sys.stdin.isatty():
        answer = await asyncio.to_thread(input, "your answer> ")
    else:
        print(
            "(no answer to give: pass --answer or use a terminal; stopping)", file=out
        )
        await ws.send(json.dumps({"type": "agent_control", "action": "stop"}))
        return
    reply = {
        "type": "agent_user_input",
        "content": answer,
        "question_id": frame["question_id"],
    }
    await ws.send(json.dumps(reply))


async def _approve(
    ws: ClientConnection, frame: Frame, policy: str | None, out: TextIO
) -> None:
    """Decide from --approve, else ask in the terminal, else decline."""
    if policy is not None:
        approved = policy == "yes"
        print(f"approve {frame['tool_name']}? {policy}", file=out)
    elif sys.stdin.isatty():
        prompt = (
            f"approve {frame['tool_name']}({json.dumps(frame['arguments'])})? [y/N] "
        )
        approved = (await asyncio.to_thread(input, prompt)).strip().lower() in (
            "y",
            "yes",
        )
    else:
        print(
            "(no one to approve: pass --approve yes|no or use a terminal; declining)",
            file=out,
        )
        approved = False
    reply: Frame = {
        "type": "tool_approval_response",
        "tool_call_id": frame["tool_call_id"],
        "approved": approved,
    }
    await ws.send(json.dumps(reply))


def describe(frame: Frame) -> str:
    """A human line for a frame ('' for frames not worth a line)."""
    kind = frame["type"]
    if kind == "agent_update":
        return _describe_update(frame)
    if kind == "tool_start":
        return f"  → {frame['tool_name']}({json.dumps(frame['arguments'])})"
    if kind == "tool_complete":
        return f"  ← {frame['tool_name']}: {json.dumps(frame['result'])}"
    if kind == "tool_approval_request":
        return f"  ! {frame['tool_name']} needs your approval: {frame['description']}"
    if kind == "tool_error":
        return f"  ✗ {frame['tool_name']} [{frame['status']}]: {frame['error']}"
    if kind == "token_stream":
        return "\n" if frame["is_last"] else str(frame["token"])
    if kind == "chat_response":
        return f"\nassistant: {frame['message']}"
    if kind == "error":
        return f"error ({frame['error_type']}): {frame['message']}"
    return ""


def _describe_update(frame: Frame) -> str:
    update = frame["update_type"]
    if update == "agent_turn_start":
        return f"— step {frame['step']} / {frame['max_steps']}"
    if update in ("agent_reason", "agent_observe"):
        phase = "reason" if update == "agent_reason" else "observe"
        return f"  [{phase}] {frame['content']}"
    if update == "agent_request_input":
        return f"  ? {frame['question']}"
    if update == "agent_completion":
        steps, ms = frame["steps"], frame["duration_ms"]
        return f"(done: {frame['reason']}, {steps} step(s), {ms:.0f} ms)"
    if update in ("agent_stopped", "agent_max_steps_reached", "agent_error"):
        return f"  ({update.removeprefix('agent_').replace('_', ' ')})"
    return ""


def conversations_command(args: argparse.Namespace) -> int:
    """`loopwire conversations`: the server's stored conversations, newest first."""
    url = f"{args.url.rstrip('/')}/api/conversations?limit={args.limit}"
    request = urllib.request.Request(url)
    if args.token:
        request.add_header("Authorization", f"Bearer {args.token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            page = json.load(response)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        print(f"loopwire: {url}: {exc.code} {detail}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"loopwire: cannot talk to {url}: {exc}", file=sys.stderr)
        return 2
    print(format_conversations(page["items"]), end="")
    return 0


def format_conversations(items: list[Frame]) -> str:
    """One line per conversation: id, last activity (local time), title."""
    lines = []
    for item in items:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(item["updated_at"]))
        lines.append(f"{item['id']}  {when}  {item['title'] or '(untitled)'}\n")
    return "".join(lines) or "(no conversations)\n"
