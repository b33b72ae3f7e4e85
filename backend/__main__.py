"""`python -m backend` / `loopwire`: serve, export the protocol schema, chat."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from backend.protocol import json_schema
from backend.settings import Settings

SCHEMA_PATH = Path("docs/protocol.schema.json")


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
    from backend.cli import chat_command

    return chat_command(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwire", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the server (the default)")
    serve.add_argument("--host", help="bind address (LOOPWIRE_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (LOOPWIRE_PORT, default 8000)")
    schema = sub.add_parser("schema", help="print or write the protocol JSON Schema")
    schema.add_argument("--write", action="store_true", help=f"write {SCHEMA_PATH}")
    chat = sub.add_parser("chat", help="send one message to a running server")
    chat.add_argument("message")
    chat.add_argument("--url", default="ws://127.0.0.1:8000/ws")
    chat.add_argument("--agent", action="store_true", help="agent mode")
    chat.add_argument("--max-steps", type=int, default=None)
    chat.add_argument("--json", action="store_true", help="print raw frames")
    chat.add_argument(
        "--token", default=None, help="auth token, if the server needs one"
    )
    chat.add_argument(
        "--approve",
        choices=("yes", "no"),
        help="answer to tool approval requests (default: ask in the terminal)",
    )
    chat.add_argument(
        "--session", help="continue this conversation (its id, as printed after a run)"
    )
    conversations = sub.add_parser(
        "conversations", help="list a running server's conversations, newest first"
    )
    conversations.add_argument("--url", default="http://127.0.0.1:8000")
    conversations.add_argument("--limit", type=int, default=20)
    conversations.add_argument("--token", default=None)
    chat.add_argument(
        "--answer",
        action="append",
        help="answer to the next question (repeatable; default: ask in the terminal)",
    )
    return parser


def _serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn
    from pydantic import ValidationError

    from backend.app import create_app
    from backend.errors import ConfigError
    from backend.server import (
        Server,
        WebSocketProtocol,
        exposure_problem,
        redact_request_logs,
    )

    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            ": ".join(filter(None, [".".join(map(str, e["loc"])), e["msg"]])).replace(
                "Value error, ", ""
            )
            for e in exc.errors(include_url=False)
        )
        print(f"loopwire: invalid settings: {problems}", file=sys.stderr)
        return 2
    host = args.host or settings.host
    port = args.port if args.port is not None else settings.port
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(message)s"
    )
    try:
        app = create_app(settings)
    except ConfigError as exc:
        print(f"loopwire: {exc}", file=sys.stderr)
        return 2
    problem = exposure_problem(host, settings, app.state.users)
    if problem is not None:
        print(f"loopwire: {problem}", file=sys.stderr)
        return 2
    print(f"loopwire: open http://{host}:{port}/ (model: {app.state.chat.llm.model})")
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=settings.log_level,
        ws=WebSocketProtocol,
        ws_max_size=max(4 * settings.max_message_bytes, 1 << 20),
    )
    redact_request_logs()
    Server(config, app.state.chat).run()
    return 0


def _schema(args: argparse.Namespace) -> int:
    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    if args.write:
        SCHEMA_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {SCHEMA_PATH}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
