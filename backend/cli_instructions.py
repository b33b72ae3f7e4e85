"""`loopwire instructions show|set [--conversation ID] [TEXT|-]`: the
user's custom instructions on a running server (`chat/instructions.py`).

`show` prints the user's own instructions (with `--conversation`, that
conversation's); `set TEXT` keeps TEXT (`-` reads it from stdin; empty
text clears them) and says how long they are now. Exit status as the
other commands': 0 done, 1 the server refused (its reason on stderr, e.g.
over the limit), 2 bad arguments, 8 no connection.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

USAGE, FINISHED, ERROR, CONNECTION = 2, 0, 1, 8
"""As `loopwire.exit_codes.ExitCode` (not imported: building the parser
of every command imports this module)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("show", "set"))
    parser.add_argument("text", nargs="?", help="set: the text (-: read stdin)")
    parser.add_argument(
        "--conversation", metavar="ID", help="this conversation's, not your own"
    )
    parser.add_argument("--url", help="the server (default http://LOOPWIRE_HOST:PORT)")
    parser.add_argument("--token", help="auth token (LOOPWIRE_AUTH_TOKEN)")


def instructions_command(args: argparse.Namespace) -> int:
    if args.action == "show" and args.text is not None:
        print("loopwire: instructions show takes no text", file=sys.stderr)
        return USAGE
    if args.action == "set" and args.text is None:
        print("loopwire: instructions set: TEXT? (- reads stdin)", file=sys.stderr)
        return USAGE
    from backend.cli import _target
    from loopwire.errors import ClientError, ConnectionFailed

    _target(args, "http", "")
    try:
        return asyncio.run(_run(args))
    except ConnectionFailed as exc:
        print(f"loopwire: {exc}", file=sys.stderr)
        return CONNECTION
    except ClientError as exc:
        print(f"loopwire: {exc}", file=sys.stderr)
        return ERROR


async def _run(args: argparse.Namespace) -> int:
    from loopwire.instructions import instructions, set_instructions

    where = {"conversation_id": args.conversation, "token": args.token}
    if args.action == "show":
        text = await instructions(args.url, **where)
        print(text, end="\n" if text else "")
        return FINISHED
    given = sys.stdin.read() if args.text == "-" else args.text
    kept = await set_instructions(args.url, given, **where)
    print(
        f"instructions set: {len(kept)} characters" if kept else "instructions cleared"
    )
    return FINISHED
