"""From the findings to a verdict: works, works with these settings, or
won't work — and why, and the settings to use.

    won't work                  no completion, no streamed answer, no tool
                                call (native or read from text), or a call
                                that failed outright
    works with these settings   the model writes no control block (use the
                                `act` strategy), or the server refuses a
                                parameter its own profile does not send
    works                       everything else; notes say what loopwire
                                works around (text tool calls, no usage in
                                streams, a refused parameter)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from backend.doctor.checks import Findings, Target
from backend.doctor.servers import server_profile
from backend.llm.openai_compat.profiles import PROFILES

Outcome = Literal["works", "works with these settings", "won't work"]

_NATIVE_CALLS = {
    "vllm": "start vLLM with --enable-auto-tool-choice and --tool-call-parser",
    "llamacpp": "start llama-server with --jinja",
    "ollama": "use a model whose Ollama template has tools",
    "lmstudio": "load a model LM Studio has native tool use for "
    "(a hammer badge in the app)",
}
"""How each server makes its tool calls native: for the note on text calls,
and under a verdict of no tool call at all."""


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    reasons: tuple[str, ...]
    """Why it won't work, or why the settings are needed."""
    notes: tuple[str, ...]
    """What loopwire works around, said once."""
    settings: tuple[tuple[str, str], ...]
    """`(name, value)` to use; none when it won't work."""

    @property
    def exit_code(self) -> int:
        return 1 if self.outcome == "won't work" else 0


def judge(findings: Findings, target: Target) -> Verdict:
    profile = server_profile(findings.owners, target.base_url, target.profile)
    notes = tuple(_notes(findings, profile, target))
    blockers = tuple(_blockers(findings, profile))
    if blockers:
        return Verdict("won't work", blockers, notes, ())
    strategy = "react" if findings.status("control block") == "ok" else "act"
    changes = tuple(_changes(findings, profile, target.profile, strategy))
    settings = (
        ("LOOPWIRE_LLM_BASE_URL", target.shown_url),
        ("LOOPWIRE_LLM_MODEL", target.model),
        ("LOOPWIRE_LLM_PROFILE", profile),
        ("LOOPWIRE_AGENT_LOOP_STRATEGY", strategy),
    )
    outcome: Outcome = "works with these settings" if changes else "works"
    return Verdict(outcome, changes, notes, settings)


def _blockers(findings: Findings, profile: str) -> list[str]:
    reasons: list[str] = []
    if findings.status("completion") == "fail":
        why = f"no completion: {findings.detail('completion')}"
        if findings.status("models") == "warn":
            why += f" ({findings.detail('models')})"
        return [why]
    if findings.status("streaming") == "fail":
        reasons.append(f"no streamed answer: {findings.detail('streaming')}")
    if findings.status("tool call") == "fail":
        why = findings.detail("tool call")
        reason = f"no tool call ({why}): agent runs could not use tools"
        if profile in _NATIVE_CALLS:
            reason += f"; for native calls, {_NATIVE_CALLS[profile]}"
        reasons.append(reason)
    if findings.status("control block") == "fail":
        why = findings.detail("control block")
        reasons.append(f"the reason phase's call failed: {why}")
    return reasons


def _changes(
    findings: Findings, profile: str, configured: str, strategy: str
) -> list[str]:
    changes: list[str] = []
    if strategy == "act":
        changes.append(
            "the model wrote no control block for the reason phase: "
            "the act strategy needs none (LOOPWIRE_AGENT_LOOP_STRATEGY=act)"
        )
    for parameter in findings.refusals:
        if _sends(profile, parameter) or not _sends(configured, parameter):
            continue
        changes.append(
            f"the server refuses {parameter}: the {profile} profile does not "
            f"send it (LOOPWIRE_LLM_PROFILE={profile})"
        )
    return changes


def _notes(findings: Findings, profile: str, target: Target) -> list[str]:
    notes: list[str] = []
    if findings.status("models") == "warn":
        notes.append(findings.detail("models"))
    if findings.text_call_format and findings.status("tool call") != "fail":
        how = _NATIVE_CALLS.get(profile, "use a server-side tool-call parser")
        notes.append(
            f"tool calls come as text ({findings.text_call_format} format): loopwire "
            f"reads them; for native calls, {how}"
        )
    refused: dict[str, list[str]] = {}
    for parameter, message in findings.refusals.items():
        if _sends(profile, parameter):
            refused.setdefault(message, []).append(parameter)
    for message, parameters in refused.items():
        notes.append(
            f"the server refuses {' and '.join(parameters)} ({message}): loopwire "
            f"stops sending {'them' if len(parameters) > 1 else 'it'} after the "
            "first refusal in each process"
        )
    extra = {
        "completion": "the plain answer was cut short (finish: length)",
        "streaming": "the answer is not streamed in pieces: it shows all at once",
        "stream usage": "no token usage in streams: token counts read 0",
        "reasoning": "thinking tags were left in an answer",
    }
    notes.extend(
        note for name, note in extra.items() if findings.status(name) == "warn"
    )
    return notes


def _sends(profile: str, parameter: str) -> bool:
    """Whether the profile called `profile` sends `parameter` at first."""
    found = PROFILES.get(profile)
    return found is None or bool(getattr(found, parameter, True))
