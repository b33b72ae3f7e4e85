"""The settings as every command loads them: a bad one is one line naming
it, and exit status 2 (`load_settings`).

Apart from `cli.py` so that `serve` reads its settings without importing
the client and its terminal (rich, markdown-it, pygments), which only the
scripting commands use.
"""

from __future__ import annotations

import sys

from pydantic import ValidationError

from backend.settings import Settings


def settings_problem(exc: ValidationError) -> str:
    """A settings error as one line naming each variable at fault."""
    problems = []
    for error in exc.errors(include_url=False):
        message = error["msg"].removeprefix("Value error, ")
        loc = [str(part) for part in error["loc"]]
        if not loc:  # a check across settings: its message names them
            problems.append(message)
            continue
        name = loc[0] if loc[0].isupper() else f"LOOPWIRE_{loc[0].upper()}"
        problems.append(f"{name}={error['input']!r}: {message}")
    return "invalid setting " + "; ".join(problems).replace("\n", " ")


def load_settings() -> Settings:
    """The `LOOPWIRE_*` settings; exits with one line (status 2) if one is bad."""
    try:
        return Settings()
    except ValidationError as exc:
        from loopwire.exit_codes import ExitCode

        print(f"loopwire: {settings_problem(exc)}", file=sys.stderr)
        raise SystemExit(ExitCode.USAGE) from None
