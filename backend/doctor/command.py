"""`loopwire doctor`: the settings and options in, the report out, and the
exit status: 0 when loopwire will work with the endpoint, 1 when it won't
(or when the endpoint cannot be reached at all, said in one line)."""

from __future__ import annotations

import argparse
import asyncio
import logging

from backend.doctor.checks import Target
from backend.doctor.listing import Unreachable
from backend.doctor.probes import examine
from backend.doctor.table import report
from backend.doctor.verdicts import judge

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where the `openai` SDK goes when no base URL is set."""


NOTHING_TO_PROBE = (
    "loopwire doctor: no LLM server is configured, so loopwire runs on its "
    "embedded offline model (nothing to probe). Name one with --base-url "
    "(Ollama: http://127.0.0.1:11434/v1) or LOOPWIRE_LLM_BASE_URL, or set "
    "OPENAI_API_KEY for OpenAI."
)


def doctor_command(args: argparse.Namespace) -> int:
    target = _target(args)
    if target is None:
        print(NOTHING_TO_PROBE)
        return 2
    # the client's own warnings would repeat the table's failures on stderr
    quiet = logging.NullHandler()
    logging.getLogger("backend").addHandler(quiet)
    try:
        findings = asyncio.run(examine(target))
    except Unreachable as exc:
        print(f"loopwire doctor: {exc}")
        return 1
    finally:
        logging.getLogger("backend").removeHandler(quiet)
    verdict = judge(findings, target)
    print(report(target, findings, verdict), end="")
    return verdict.exit_code


def _target(args: argparse.Namespace) -> Target | None:
    """The endpoint to probe; None when neither the options nor the settings
    name one (loopwire then runs on the offline model)."""
    from backend.settings_problems import load_settings

    settings = load_settings()
    named = (args.base_url, args.api_key, settings.llm_base_url, settings.llm_api_key)
    if not any(named):
        return None
    timeout_s = args.timeout if args.timeout is not None else settings.llm_timeout_s
    return Target(
        base_url=args.base_url or settings.llm_base_url or OPENAI_BASE_URL,
        model=args.model or settings.llm_model,
        api_key=args.api_key or settings.llm_api_key or "",
        timeout_s=timeout_s,
        profile=args.profile or settings.llm_profile,
    )
