"""`python -m backend` / `loopwire`: serve, export the protocol schema, chat."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from backend.protocol import json_schema
from backend.protocol_js import PROTOCOL_JS_PATH, protocol_js

if TYPE_CHECKING:
    from backend.settings import Settings
    from backend.tools.base import AnyTool

SCHEMA_PATH = Path("docs/protocol.schema.json")
CHAT_HELP = """Send one message and show the run as it happens.

exit status: 0 finished, 1 error, 2 bad arguments or settings, 3 stopped,
4 max steps reached, 5 a tool call declined, 6 a question or approval timed
out, 7 an answer was needed and none could be given, 8 no connection,
130 interrupted (Ctrl-C stops the run), 141 its output was closed (| head)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    command = args.command or "serve"
    if command == "serve":
        return _serve(args)
    if command == "schema":
        return _schema(args)
    if command == "conversations":
        from backend.cli import conversations_command

        return conversations_command(args)
    if command == "grants":
        from backend.cli import grants_command

        return grants_command(args)
    if command == "instructions":
        from backend.cli_instructions import instructions_command

        return instructions_command(args)
    if command == "doctor":
        from backend.doctor.command import doctor_command

        return doctor_command(args)
    from backend.cli import chat_command

    return chat_command(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwire", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    _serve_arguments(sub.add_parser("serve", help="run the server (the default)"))
    _schema_arguments(
        sub.add_parser("schema", help="print or write the protocol JSON Schema")
    )
    _chat_arguments(
        sub.add_parser(
            "chat",
            help="send one message to a running server",
            description=CHAT_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    _conversations_arguments(
        sub.add_parser(
            "conversations",
            help="list a running server's conversations, newest first "
            "(`export ID`, `import FILE`: write one out, read one in; "
            "`share ID`, `shares ID`, `unshare SHARE_ID`: read-only links)",
        )
    )
    _grants_arguments(
        sub.add_parser(
            "grants",
            help="list the tools you always allow (`grants revoke ID` takes one back)",
        )
    )
    from backend.cli_instructions import add_arguments

    add_arguments(
        sub.add_parser(
            "instructions",
            help="show or set your custom instructions, for every run "
            "(--conversation ID: one conversation's)",
        )
    )
    _doctor_arguments(sub)
    return parser


def _doctor_arguments(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from backend.doctor.options import DOCTOR_HELP, add_arguments

    add_arguments(
        sub.add_parser(
            "doctor",
            help="check an LLM endpoint: will loopwire work with it, and how",
            description=DOCTOR_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )


def _serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--host", help="bind address (LOOPWIRE_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (LOOPWIRE_PORT, default 8000)")


def _schema_arguments(schema: argparse.ArgumentParser) -> None:
    schema.add_argument(
        "--write",
        action="store_true",
        help=f"write {SCHEMA_PATH} and the page's {PROTOCOL_JS_PATH}",
    )


def _budget_arguments(chat: argparse.ArgumentParser) -> None:
    """`--budget-tokens`, `--budget-cost` and `--budget-time`."""
    for kind, unit, parse, what in (
        ("tokens", "N", _steps, "tokens"),
        ("cost", "USD", _amount, "dollars"),
        ("time", "SECONDS", _amount, "seconds of work"),
    ):
        chat.add_argument(
            f"--budget-{kind}",
            type=parse,
            metavar=unit,
            default=None,
            help=f"end the run, with the model's answer, at this many {what} "
            "(below the server's budget)",
        )


def _amount(text: str) -> float:
    """A budget's amount: a number above 0 (else a usage error, 2)."""
    try:
        amount = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not amount > 0 or amount == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive amount")
    return amount


def _steps(text: str) -> int:
    """A step budget: a whole number of at least 1 (else a usage error, 2)."""
    try:
        steps = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if steps < 1:
        raise argparse.ArgumentTypeError(f"{steps} is too few: at least 1")
    return steps


def _chat_arguments(chat: argparse.ArgumentParser) -> None:
    chat.add_argument("message")
    chat.add_argument(
        "--url", help="the server's WebSocket (default ws://LOOPWIRE_HOST:PORT/ws)"
    )
    chat.add_argument(
        "--token", help="auth token, if the server needs one (LOOPWIRE_AUTH_TOKEN)"
    )
    chat.add_argument("--agent", action="store_true", help="agent mode")
    chat.add_argument(
        "--strategy", help="agent mode with this strategy (react, act, …)"
    )
    chat.add_argument(
        "--max-steps", type=_steps, default=None, help="step budget (at least 1)"
    )
    _budget_arguments(chat)
    chat.add_argument(
        "--system",
        metavar="TEXT",
        help="instructions for this run, after the server's own system prompt",
    )
    chat.add_argument(
        "--json", action="store_true", help="print each frame as one JSON line"
    )
    chat.add_argument(
        "--thinking",
        action="store_true",
        help="show a reasoning model's thinking in full (default: one line each)",
    )
    chat.add_argument(
        "--answer",
        action="append",
        help="answer to the next question (repeatable; then the terminal or "
        "stdin); /decline gives no answer, /dismiss puts aside a tool's question",
    )
    chat.add_argument(
        "--approve",
        choices=("yes", "no", "always", "always-for-me"),
        help="answer to tool approval requests; always: yes, and do not ask "
        "again in this conversation; always-for-me: nor in any of yours "
        "(default: the terminal or stdin)",
    )
    chat.add_argument(
        "--no-input",
        action="store_true",
        help="never wait for an answer: a question ends the run (exit 7)",
    )
    chat.add_argument(
        "--session", help="continue this conversation (its id, as printed after a run)"
    )


def _conversations_arguments(conversations: argparse.ArgumentParser) -> None:
    conversations.add_argument(
        "--url", help="the server (default http://LOOPWIRE_HOST:PORT)"
    )
    conversations.add_argument("--limit", type=int, default=20)
    conversations.add_argument(
        "--origin",
        metavar="KINDS",
        help="list: only those started by these clients, comma-separated "
        "(page, python, cli, api, openai, ag-ui, ai-sdk, ws, import, unknown)",
    )
    conversations.add_argument("--token", help="auth token (LOOPWIRE_AUTH_TOKEN)")
    conversations.add_argument(
        "action",
        nargs="?",
        choices=("list", "export", "import", "share", "shares", "unshare"),
        default="list",
    )
    conversations.add_argument(
        "target",
        nargs="?",
        help="export, share, shares: a conversation's id; import: FILE (-: stdin); "
        "unshare: a link's id",
    )
    conversations.add_argument(
        "--format", choices=("markdown", "json"), help="export as (default markdown)"
    )
    conversations.add_argument("-o", "--output", metavar="FILE", help="export to FILE")


def _grants_arguments(grants: argparse.ArgumentParser) -> None:
    grants.add_argument("action", nargs="?", choices=("list", "revoke"), default="list")
    grants.add_argument("grant_id", nargs="?", help="the grant to revoke")
    grants.add_argument("--url", help="the server (default http://LOOPWIRE_HOST:PORT)")
    grants.add_argument("--token", help="auth token (LOOPWIRE_AUTH_TOKEN)")


def serve(argv: Sequence[str] = (), *, extra_tools: Sequence[AnyTool] = ()) -> int:
    """`loopwire serve` with `argv`, its app offering `extra_tools` as well."""
    return _serve(_parser().parse_args(["serve", *argv]), extra_tools=extra_tools)


def _serve(args: argparse.Namespace, *, extra_tools: Sequence[AnyTool] = ()) -> int:
    import logging

    from backend.app import create_app
    from backend.errors import ConfigError
    from backend.server import (
        Server,
        exposure_problem,
        quiet_client_logs,
        redact_request_logs,
        uvicorn_config,
    )
    from backend.settings_problems import load_settings
    from backend.telemetry.logs import configure_logging, say

    settings = load_settings()
    host = args.host or settings.host
    port = args.port if args.port is not None else settings.port
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(message)s"
    )
    configure_logging(settings)
    quiet_client_logs(settings)
    try:
        app = create_app(settings, extra_tools=extra_tools)
    except ConfigError as exc:
        say(settings, f"loopwire: {exc}", error=True)
        return 2
    problem = exposure_problem(host, settings, app.state.users)
    if problem is not None:
        say(settings, f"loopwire: {problem}", error=True)
        return 2
    problem = asyncio.run(_unreachable(settings))
    if problem is not None:
        say(settings, f"loopwire: cannot start: {problem}", error=True)
        return 2
    model = app.state.chat.llm.model
    say(settings, f"loopwire: open http://{host}:{port}/ (model: {model})")
    config = uvicorn_config(app, settings, host=host, port=port)
    redact_request_logs(settings)
    configure_logging(settings, app.state.chat.bus.instance_id)
    server = Server(config, app.state.chat)
    server.run()
    return 0 if server.started else 1


async def _unreachable(settings: Settings) -> str | None:
    """What the server could not reach at start (the database, migrated on
    the way; Redis), said in one line; None when both answer."""
    from backend.bus.base import BusError
    from backend.store.base import StoreError
    from backend.store.sql import SqlStore

    store = SqlStore(settings.database_url)
    try:
        await store.open()
    except StoreError as exc:
        return str(exc)
    finally:
        await store.close()
    if settings.redis_url:
        from backend.bus.redis_bus import check_reachable

        try:
            await check_reachable(settings.redis_url)
        except BusError as exc:
            return str(exc)
    return None


def _schema(args: argparse.Namespace) -> int:
    schema = json_schema()
    text = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    if args.write:
        SCHEMA_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {SCHEMA_PATH}")
        PROTOCOL_JS_PATH.write_text(protocol_js(schema), encoding="utf-8")
        print(f"wrote {PROTOCOL_JS_PATH}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
