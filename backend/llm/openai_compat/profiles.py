"""Server profiles: what loopwire sends to each kind of OpenAI-compatible server.

`LOOPWIRE_LLM_PROFILE` names one of `PROFILES` (default `auto`). A `Profile`
says which of the optional request parameters a call carries; everything
else (model, messages, the tools' schemas) is the same for every server.
The facts behind each profile, as the servers document them:

    profile   stream_options  tool_choice               parallel_tool_calls
    --------  --------------  ------------------------  ------------------------
    openai    sent            sent                      not sent (on by default)
    ollama    sent            not sent (Ollama's OpenAI not sent (ignored)
                              layer has no such field)
    vllm      sent            sent ("auto" needs        not sent (ignored)
                              --enable-auto-tool-choice
                              and --tool-call-parser)
    lmstudio  sent (0.3.18+)  sent (0.3.15+)            not sent
    llamacpp  sent            sent (needs --jinja)      true (off by default;
                                                        loopwire runs several
                                                        calls in one step)
    deepseek  sent            sent                      not sent (undocumented)
    auto      sent            sent                      not sent

`auto` is the shape most servers take. A server that does not honour
`tool_choice` is not offered tools at all when a call says
`tool_choice: "none"`: told nothing, it would call them anyway.

Refusals: every profile learns, `auto` and a named one alike — a profile is
where a client starts, never a reason to fail a call the server would take
without one of its parameters. A 400 (or 422) whose message names a
parameter the request carried (`refused`) drops that parameter from this
client's profile for the rest of the process (`Profile.without`). Some
servers name a server flag rather than the parameter; those messages are
known here too: vLLM's `"auto" tool choice requires
--enable-auto-tool-choice` and llama.cpp's `tools param requires --jinja`
drop the tools themselves (the model then sees them listed in its prompt and
its tool calls are read from its text), as does Ollama's `does not support
tools`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

__all__ = [
    "DROPPABLE",
    "PROFILES",
    "Profile",
    "ProfileName",
    "profile_named",
    "refused",
    "wants_reasoning",
]

ProfileName = Literal[
    "openai", "ollama", "vllm", "lmstudio", "llamacpp", "deepseek", "auto"
]


@dataclass(frozen=True, slots=True)
class Profile:
    """Which optional parameters a chat completions request carries."""

    name: str
    summary: str
    """One line on the server, for diagnostics."""
    stream_options: bool = True
    """Ask a stream for its usage (`stream_options: {"include_usage": true}`);
    without it most servers send no usage in streams."""
    tool_choice: bool = True
    """Send the call's `tool_choice` when it offers tools."""
    parallel_tool_calls: bool | None = None
    """Sent with tools when not `None`."""
    tools: bool = True
    """Offer tools natively (`tools`); off, tool calls are read from text."""
    temperature: bool = True
    """Send the call's `temperature` when it sets one."""
    max_tokens: bool = True
    """Send the call's `max_tokens` when it sets one (a final answer after
    a budget's bound)."""
    max_tokens_as: str = "max_tokens"
    """The name it is sent as: OpenAI's own API takes `max_completion_tokens`
    (its reasoning models refuse `max_tokens`); servers that follow the
    older shape take `max_tokens` (a refusal of it drops it, as any)."""
    reasoning_back: bool = False
    """Send the thinking behind this turn's tool calls back with them, as
    `reasoning_content` (DeepSeek's thinking mode refuses a tool-call
    history without it)."""

    def without(self, parameter: str) -> Profile:
        """This profile, no longer sending `parameter` (one of `DROPPABLE`)."""
        if parameter not in DROPPABLE:
            raise ValueError(f"{parameter!r} is not a parameter a profile drops")
        off: dict[str, Any] = {
            parameter: None if parameter == "parallel_tool_calls" else False
        }
        return replace(self, **off)

    def sends(self) -> dict[str, bool | None]:
        """What this profile sends, parameter by parameter (for diagnostics)."""
        return {parameter: getattr(self, parameter) for parameter in DROPPABLE}


DROPPABLE: Mapping[str, tuple[str, ...]] = {
    "stream_options": ("stream_options", "stream options", "include_usage"),
    "parallel_tool_calls": ("parallel_tool_calls", "parallel tool calls"),
    "tool_choice": ("tool_choice", "tool choice"),
    "tools": (
        "tools param",
        "support tools",
        "enable-auto-tool-choice",
        "tool-call-parser",
    ),
    "temperature": ("temperature",),
    "max_tokens": ("max_tokens",),
}
"""The parameters a refusal can drop, and the words that name each in a
server's error message (case-insensitive, whole words)."""

_NAMED = {
    parameter: re.compile(
        "|".join(rf"(?<!\w){re.escape(word)}(?!\w)" for word in words),
        re.IGNORECASE,
    )
    for parameter, words in DROPPABLE.items()
}

PROFILES: dict[str, Profile] = {
    "openai": Profile(
        "openai", "OpenAI's own API", max_tokens_as="max_completion_tokens"
    ),
    "ollama": Profile(
        "ollama", "Ollama's /v1 (ignores tool_choice)", tool_choice=False
    ),
    "vllm": Profile(
        "vllm",
        "vLLM (native tool calls need --enable-auto-tool-choice "
        "and --tool-call-parser)",
    ),
    "lmstudio": Profile("lmstudio", "LM Studio 0.3.18 or later"),
    "llamacpp": Profile(
        "llamacpp",
        "llama.cpp's llama-server (native tool calls need --jinja)",
        parallel_tool_calls=True,
    ),
    "deepseek": Profile("deepseek", "DeepSeek's API", reasoning_back=True),
    "auto": Profile("auto", "any server: the common shape, less what it refuses"),
}
"""Every profile by name (`LOOPWIRE_LLM_PROFILE`), `ProfileName`'s values."""


def profile_named(name: str) -> Profile:
    """The profile called `name`; `ValueError` listing the names if none is."""
    try:
        return PROFILES[name]
    except KeyError:
        names = ", ".join(PROFILES)
        raise ValueError(f"unknown LLM profile {name!r} (one of: {names})") from None


_WANTS_REASONING = re.compile(r"(?<!\w)reasoning_content(?!\w)", re.IGNORECASE)


def wants_reasoning(profile: Profile, message: str) -> bool:
    """Whether a refusal asks for the tool calls' thinking (`reasoning_back`)
    that `profile` does not send yet."""
    return not profile.reasoning_back and bool(_WANTS_REASONING.search(message))


def refused(fields: Collection[str], message: str, param: object = None) -> list[str]:
    """The parameters among a body's `fields` a server's refusal names — in
    its `message`, or as its `param` field (OpenAI's errors carry one):
    those to drop."""
    return [
        parameter
        for parameter, named in _NAMED.items()
        if parameter in fields and (param == parameter or named.search(message))
    ]
