"""`loopwire chat`, `conversations` and `grants`: scripts on a running server.

`chat` sends one message through `loopwire.AgentClient` and shows the run
as it happens (`loopwire.terminal`); it answers the agent's questions and
approvals from `--answer` / `--approve`, the terminal, or stdin's lines
(`loopwire.answers`), and its exit status says how the run ended
(`loopwire.exit_codes`). `grants` lists the tools the user always allows
(`always` at an approval) and `grants revoke ID` takes one back. Where to
connect, and the token, default to the `LOOPWIRE_*` settings; a bad setting
is one line naming it, exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, TextIO

from backend.protocol import BudgetLimits
from backend.settings import Settings
from backend.settings_problems import load_settings
from backend.settings_problems import settings_problem as settings_problem
from loopwire.answers import Answers
from loopwire.client import AgentClient
from loopwire.errors import ClientError, ConnectionFailed, HandshakeRefused
from loopwire.exit_codes import ExitCode
from loopwire.follow import Request, follow
from loopwire.terminal import Terminal

Frame = dict[str, Any]


# ------------------------------------------------------------ settings


def server_url(settings: Settings, scheme: str, path: str = "") -> str:
    """Where this machine reaches the server the settings describe."""
    host = settings.host
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{settings.port}{path}"


def _target(args: argparse.Namespace, scheme: str, path: str) -> None:
    """Fill in `args.url` and `args.token` from the settings when not given."""
    if args.url is not None and args.token is not None:
        return
    settings = load_settings()
    args.url = args.url or server_url(settings, scheme, path)
    args.token = args.token or settings.auth_token


# ------------------------------------------------------------ chat


def chat_command(args: argparse.Namespace) -> int:
    _target(args, "ws", "/ws")
    try:
        return asyncio.run(_chat(args, sys.stdout, sys.stderr, sys.stdin))
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except (BrokenPipeError, BaseExceptionGroup) as exc:
        if not _only_broken_pipes(exc):
            raise
        return _pipe_closed()  # `| head`: the reader has all it wanted


def _only_broken_pipes(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        found, rest = exc.split(BrokenPipeError)
        return found is not None and rest is None
    return isinstance(exc, BrokenPipeError)


def _pipe_closed() -> int:
    """Stdout was closed under us: say nothing more (Python would print
    an error flushing it at exit), and exit as other tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return ExitCode.PIPE_CLOSED


async def _chat(
    args: argparse.Namespace, out: TextIO, err: TextIO, stdin: TextIO | None
) -> int:
    terminal = Terminal(
        out, err, json_lines=args.json, thinking=getattr(args, "thinking", False)
    )
    answers = Answers(
        terminal,
        stdin,
        given=args.answer or (),
        approve=args.approve,
        no_input=args.no_input,
    )
    try:
        async with AgentClient(
            args.url, token=args.token, session_id=args.session, client="cli"
        ) as client:
            terminal.ready(client.ready)
            request = Request(
                args.message,
                args.agent,
                args.strategy,
                args.max_steps,
                args.system,
                _budget(args),
            )
            code = await follow(client, request, terminal, answers)
            if terminal.mode != "json" and client.run_id is not None:
                terminal.line(
                    f"(conversation {client.session_id}: --session to continue)"
                )
            return code
    except HandshakeRefused as exc:
        terminal.problem(f"loopwire: {args.url}: {exc}")
        return ExitCode.CONNECTION
    except ConnectionFailed as exc:
        terminal.problem(f"loopwire: {exc}")
        return ExitCode.CONNECTION
    except ClientError as exc:
        terminal.problem(f"loopwire: {exc}")
        return ExitCode.ERROR
    finally:
        terminal.close()


# ------------------------------------------------------------ conversations


def conversations_command(args: argparse.Namespace) -> int:
    """`loopwire conversations`: the server's stored conversations, newest first
    (`export ID`, `import FILE`: `cli_exports`; `share ID`, `shares ID`,
    `unshare SHARE_ID`: `cli_shares`)."""
    _target(args, "http", "")
    if getattr(args, "action", "list") in ("share", "shares", "unshare"):
        from backend.cli_shares import share_command

        return share_command(args)
    if getattr(args, "action", "list") != "list" or getattr(args, "target", None):
        from backend.cli_exports import transfer_command

        return transfer_command(args)
    query = {"limit": str(args.limit)}
    if getattr(args, "origin", None):
        query["origin"] = args.origin
    page = _api(args, "GET", f"/api/conversations?{urllib.parse.urlencode(query)}")
    if isinstance(page, int):
        return page
    print(format_conversations(page["items"]), end="")
    return 0


def grants_command(args: argparse.Namespace) -> int:
    """`loopwire grants [list]`: the tools the user allows without asking;
    `loopwire grants revoke ID`: take one back (it asks again)."""
    if args.action == "list" and args.grant_id is not None:
        print("loopwire: grants: an ID goes with `revoke` only", file=sys.stderr)
        return ExitCode.USAGE
    if args.action == "revoke" and args.grant_id is None:
        print("loopwire: grants revoke: which? (an ID from `grants`)", file=sys.stderr)
        return ExitCode.USAGE
    _target(args, "http", "")
    if args.action == "list":
        listed = _api(args, "GET", "/api/tool-grants")
        if isinstance(listed, int):
            return listed
        print(format_grants(listed["grants"]), end="")
        return 0
    path = f"/api/tool-grants/{urllib.parse.quote(args.grant_id, safe='')}"
    revoked = _api(args, "DELETE", path)
    if isinstance(revoked, int):
        return revoked
    print(f"revoked: {format_grants([revoked['revoked']])}", end="")
    return 0


def _api(args: argparse.Namespace, method: str, path: str) -> Frame | int:
    """The server's JSON answer to `method path`, or the exit status of a
    failure (said on stderr)."""
    url = f"{args.url.rstrip('/')}{path}"
    request = urllib.request.Request(url, method=method)
    if args.token:
        request.add_header("Authorization", f"Bearer {args.token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: Frame = json.load(response)
            return answer
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        print(f"loopwire: {url}: {exc.code} {detail}", file=sys.stderr)
        return ExitCode.ERROR
    except OSError as exc:
        print(f"loopwire: cannot talk to {url}: {exc}", file=sys.stderr)
        return ExitCode.CONNECTION


def format_conversations(items: list[Frame]) -> str:
    """One line per conversation: id, last activity (local time), title."""
    lines = []
    for item in items:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(item["updated_at"]))
        lines.append(f"{item['id']}  {when}  {item['title'] or '(untitled)'}\n")
    return "".join(lines) or "(no conversations)\n"


def format_grants(items: list[Frame]) -> str:
    """One line per grant: id, since when (local time), the tool, where."""
    lines = []
    for item in items:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(item["created_at"]))
        conversation = item["conversation_id"]
        where = (
            f"conversation {conversation}" if conversation else "all your conversations"
        )
        lines.append(f"{item['id']}  {when}  {item['tool']}  {where}\n")
    return "".join(lines) or "(no tools allowed without asking)\n"


def _budget(args: argparse.Namespace) -> BudgetLimits | None:
    """`--budget-tokens`, `--budget-cost` and `--budget-time`, if any."""
    tokens, cost, time_s = (
        getattr(args, f"budget_{kind}", None) for kind in ("tokens", "cost", "time")
    )
    if tokens is None and cost is None and time_s is None:
        return None
    return BudgetLimits(tokens=tokens, cost_usd=cost, time_s=time_s)
