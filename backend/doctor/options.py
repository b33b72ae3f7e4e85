"""`loopwire doctor`'s options and help (light: read whatever command runs)."""

from __future__ import annotations

import argparse

from backend.llm.openai_compat.profiles import PROFILES

DOCTOR_HELP = """Probe an OpenAI-compatible endpoint the way loopwire will use it:
the model list, a completion, streaming and its usage, a tool call, the
reason phase's control block, reasoning output. Prints a table, a verdict
and the settings to use; the API key is never printed.

exit status: 0 loopwire will work (perhaps with the settings shown),
1 it won't, or the endpoint cannot be reached; 2 bad arguments or settings."""


def add_arguments(doctor: argparse.ArgumentParser) -> None:
    doctor.add_argument("--base-url", help="the server (LOOPWIRE_LLM_BASE_URL)")
    doctor.add_argument("--model", help="the model (LOOPWIRE_LLM_MODEL)")
    doctor.add_argument(
        "--api-key", help="the key (LOOPWIRE_LLM_API_KEY or OPENAI_API_KEY)"
    )
    doctor.add_argument(
        "--profile",
        choices=tuple(PROFILES),
        help="the profile to probe with (LOOPWIRE_LLM_PROFILE)",
    )
    doctor.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help="bound on each probe (default: LOOPWIRE_LLM_TIMEOUT_S)",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {text}")
    return value
