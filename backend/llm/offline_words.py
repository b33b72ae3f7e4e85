"""The offline model's own words: small talk, what it can do (from the
skills it has), and honest accounts of what went wrong — for any tool."""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.llm.offline_skill import Skill

REAL_MODEL_HINT = (
    "To use a real model, set LOOPWIRE_LLM_BASE_URL, LOOPWIRE_LLM_API_KEY "
    "and LOOPWIRE_LLM_MODEL."
)
IDENTITY = "I'm loopwire's built-in offline demo model"

_HELP = re.compile(
    r"\b(?:help|what\s+can\s+you\s+do|who\s+are\s+you|what\s+are\s+you|"
    r"how\s+do\s+(?:i|you)\s+(?:use|work))\b",
    re.IGNORECASE,
)
_THANKS = re.compile(
    r"\b(?:thanks|thank\s+you|thx|cheers|much\s+appreciated)\b", re.IGNORECASE
)
_GREETING = re.compile(
    r"^\W*(?:hi|hello|hey|hiya|howdy|greetings|yo|hallo|bonjour|hola|"
    r"good\s+(?:morning|afternoon|evening|day))\b"
    r"(?:\s+(?:there|all|everyone|everybody|folks|friend|again|loopwire))?"
    r"[\s,.!;:~-]*",
    re.IGNORECASE,
)


class Words:
    """What the model says of itself, given the skills it has right now."""

    def __init__(self, skills: Sequence[Skill]) -> None:
        self.capabilities = [c for s in skills for c in s.skill.capabilities]

    def capability_list(self) -> str:
        if not self.capabilities:
            return "I have no tools to work with right now."
        lines = [
            f"- {c.summary}{c.qualifier} — {_quoted(c.examples)}"
            for c in self.capabilities
        ]
        return "I can:\n" + "\n".join(lines)

    def greeting(self) -> str:
        shown = [c for c in self.capabilities if c.in_greeting and c.examples]
        if not shown:
            return f"Hello! {IDENTITY}."
        summaries = _and([c.summary for c in shown])
        examples = _or([f"“{c.examples[0]}”" for c in shown])
        return f"Hello! {IDENTITY}. I can {summaries} — try {examples}."

    def thanks(self) -> str:
        shown = [c.summary for c in self.capabilities if c.in_greeting]
        if not shown:
            return "You're welcome!"
        return f"You're welcome! Ask me to {_or(shown)} any time."

    def help(self) -> str:
        return (
            f"{IDENTITY} (simple rules, no network).\n\n"
            f"{self.capability_list()}\n\n{REAL_MODEL_HINT}"
        )

    def introduction(self, request: str | None = None) -> str:
        """For a request no skill understands (`request`: after a greeting,
        named, so the person sees it was read)."""
        if request is None:
            return (
                f"{IDENTITY}: simple rules, no network and no AI, so I can't "
                f"answer that one.\n\n{self.capability_list()}\n\n{REAL_MODEL_HINT}"
            )
        return (
            f"Hello! {IDENTITY}: simple rules, no network and no AI, so I can't "
            f"answer “{request}”.\n\n{self.capability_list()}\n\n{REAL_MODEL_HINT}"
        )

    def small_talk(self, text: str) -> str | None:
        """The answer to small talk; None for anything else (a greeting
        followed by a request is the request: `after_greeting`)."""
        if _HELP.search(text):
            return self.help()
        if _THANKS.search(text):
            return self.thanks()
        if _GREETING.search(text) and after_greeting(text) is None:
            return self.greeting()
        return None

    def needs_tools(self, tool: str, goal: str) -> str:
        """Plain chat: the request needs a tool and none is on."""
        return (
            f"{IDENTITY}, and to {goal} I need the {tool} tool — turn on tools or "
            f"agent mode and ask again.\n\n{self.capability_list()}\n\n"
            f"{REAL_MODEL_HINT}"
        )


def after_greeting(text: str) -> str | None:
    """What `text` asks after a greeting ("Hello! What is the capital of
    France?" → "What is the capital of France?"); None without one."""
    found = _GREETING.match(text)
    if found is None:
        return None
    rest = text[found.end() :].strip()
    return rest if any(c.isalnum() for c in rest) else None


def unavailable(tool: str, goal: str) -> str:
    return f"The {tool} tool is not available, so I can't {goal}."


def not_run(tool: str, goal: str) -> str:
    """The tool is not among this session's tools."""
    return (
        f"I couldn't finish: I needed the {tool} tool to {goal}, but it isn't "
        "enabled for this session."
    )


def not_reached(tool: str, goal: str) -> str:
    """The tool was there, but the run ended (steps, time, a stop) before it ran."""
    return (
        f"I couldn't finish: the run ended before I could use the {tool} tool to "
        f"{goal}. Ask me to continue and I'll carry on from there."
    )


def still_missing(missing: str) -> str:
    return (
        f"I couldn't finish: I still need to know {missing}. "
        "Reply with it and I'll carry on."
    )


def _quoted(examples: Sequence[str]) -> str:
    return ", ".join(f"“{e}”" for e in examples)


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _or(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"
