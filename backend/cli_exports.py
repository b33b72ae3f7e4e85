"""`loopwire conversations export ID` and `loopwire conversations import
FILE`: a conversation written out of a running server, or read into it
(`transport/exports.py`).

`export` writes the Markdown transcript (`--format json`: the JSON export)
to stdout or to `-o FILE`; `import` sends a JSON export (`-` reads stdin)
and prints the new conversation's id and title. Exit status as the other
commands': 0 done, 1 the server refused (its reason on stderr), 2 bad
arguments or a file that cannot be read or written, 8 no connection.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from loopwire.exit_codes import ExitCode

Answer = tuple[bytes, None] | tuple[None, int]
"""The response's body, or the exit status of a failure (said on stderr)."""


def transfer_command(args: argparse.Namespace) -> int:
    """`export ID` or `import FILE` (`args.action`, `args.target`)."""
    if args.action == "list":
        print("loopwire: conversations list takes no argument", file=sys.stderr)
        return ExitCode.USAGE
    if args.target is None:
        wanted = "an ID from `conversations`" if args.action == "export" else "FILE"
        print(f"loopwire: conversations {args.action}: {wanted}?", file=sys.stderr)
        return ExitCode.USAGE
    if args.action == "export":
        return export_command(args)
    return import_command(args)


def export_command(args: argparse.Namespace) -> int:
    conversation = urllib.parse.quote(args.target, safe="")
    kind = urllib.parse.quote(args.format or "markdown")
    body, failed = _call(
        args, "GET", f"/api/conversations/{conversation}/export?format={kind}"
    )
    if body is None:
        return failed or ExitCode.ERROR
    if args.output is None:
        sys.stdout.buffer.write(body)
        sys.stdout.flush()
        return ExitCode.FINISHED
    try:
        Path(args.output).write_bytes(body)
    except OSError as exc:
        print(f"loopwire: cannot write {args.output}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.FINISHED


def import_command(args: argparse.Namespace) -> int:
    try:
        data = (
            sys.stdin.buffer.read()
            if args.target == "-"
            else Path(args.target).read_bytes()
        )
    except OSError as exc:
        print(f"loopwire: cannot read {args.target}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    body, failed = _call(args, "POST", "/api/conversations/import", data)
    if body is None:
        return failed or ExitCode.ERROR
    print(describe_import(json.loads(body)), end="")
    return ExitCode.FINISHED


def describe_import(answer: dict[str, object]) -> str:
    """What `import` prints: the new id and title, and what was left out."""
    left_out = answer["left_out"]
    assert isinstance(left_out, dict)
    runs, files = left_out["runs"], left_out["files"]
    line = f"{answer['id']}  {answer['title']}  ({answer['messages']} messages)\n"
    if runs or files:
        line += f"not imported: {runs} run records, {len(files)} files\n"
    return line


def _call(
    args: argparse.Namespace, method: str, path: str, data: bytes | None = None
) -> Answer:
    url = f"{args.url.rstrip('/')}{path}"
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if args.token:
        request.add_header("Authorization", f"Bearer {args.token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.read(), None
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        print(f"loopwire: {url}: {exc.code} {detail}", file=sys.stderr)
        return None, ExitCode.ERROR
    except OSError as exc:
        print(f"loopwire: cannot talk to {url}: {exc}", file=sys.stderr)
        return None, ExitCode.CONNECTION
