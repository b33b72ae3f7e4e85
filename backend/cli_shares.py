"""`loopwire conversations share ID`, `... shares ID` and `... unshare
SHARE_ID`: read-only links to a conversation of a running server
(`transport/shares.py`), through the Python client (`loopwire/shares.py`).

`share` prints the new link's URL; `shares` one line per link, newest
first: its id, when it was made (local time), its URL; `unshare` stops a
link. Exit status as the other commands': 0 done, 1 the server refused
(its reason on stderr), 2 no ID given, 8 no connection.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from loopwire.errors import ClientError, ConnectionFailed
from loopwire.exit_codes import ExitCode
from loopwire.shares import share, shares, unshare

ACTIONS = ("share", "shares", "unshare")
WANTED = {
    "share": "an ID from `conversations`",
    "shares": "an ID from `conversations`",
    "unshare": "a SHARE_ID from `conversations shares ID`",
}


def share_command(args: argparse.Namespace) -> int:
    """`args.action` (one of `ACTIONS`) on `args.target`."""
    if args.target is None:
        wanted = WANTED[args.action]
        print(f"loopwire: conversations {args.action}: {wanted}?", file=sys.stderr)
        return ExitCode.USAGE
    try:
        print(asyncio.run(_act(args)), end="")
    except ClientError as exc:
        print(f"loopwire: {args.action}: {exc}", file=sys.stderr)
        return ExitCode.ERROR
    except ConnectionFailed as exc:
        print(f"loopwire: {exc}", file=sys.stderr)
        return ExitCode.CONNECTION
    return ExitCode.FINISHED


async def _act(args: argparse.Namespace) -> str:
    """What the action prints."""
    url, target, token = args.url, args.target, args.token
    if args.action == "share":
        link = await share(url, target, token=token)
        return f"{link['url']}\n"
    if args.action == "shares":
        return format_shares(await shares(url, target, token=token))
    await unshare(url, target, token=token)
    return f"stopped sharing {target}\n"


def format_shares(links: list[dict[str, Any]]) -> str:
    """One line per link: id, when it was made (local time), URL."""
    lines = []
    for link in links:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(link["created_at"]))
        lines.append(f"{link['id']}  {when}  {link['url']}\n")
    return "".join(lines)
