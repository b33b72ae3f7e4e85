"""The report as text: a heading, the table (check, result, detail), the
verdict with its reasons and notes, and the settings to use."""

from __future__ import annotations

from backend.doctor.checks import CHECK_NAMES, Findings, Target
from backend.doctor.verdicts import Verdict

_HEADINGS = ("check", "result", "detail")


def report(target: Target, findings: Findings, verdict: Verdict) -> str:
    lines = [
        f"loopwire doctor: {target.shown_url}, model {target.model} "
        f"(profile {target.profile})",
        "",
        *table(findings),
        "",
        f"verdict: {verdict.outcome}",
        *(f"  - {reason}" for reason in verdict.reasons),
    ]
    if verdict.notes:
        lines.append("notes:")
        lines.extend(f"  - {note}" for note in verdict.notes)
    if verdict.settings:
        lines.append("settings:")
        lines.extend(f"  {name}={value}" for name, value in verdict.settings)
        if target.api_key:
            lines.append("  LOOPWIRE_LLM_API_KEY: as you have it (not shown)")
    return "\n".join(lines) + "\n"


def table(findings: Findings) -> list[str]:
    """One line per check, in probe order, under aligned headings."""
    rows = [
        (check.name, check.status, check.detail)
        for name in CHECK_NAMES
        if (check := findings.checks.get(name)) is not None
    ]
    widths = [max(len(row[i]) for row in [_HEADINGS, *rows]) for i in range(2)]

    def line(cells: tuple[str, str, str]) -> str:
        name, result, detail = cells
        return f"{name:<{widths[0]}}  {result:<{widths[1]}}  {detail}".rstrip()

    rule = ("-" * widths[0], "-" * widths[1], "-" * 6)
    return [line(_HEADINGS), line(rule), *(line(row) for row in rows)]
