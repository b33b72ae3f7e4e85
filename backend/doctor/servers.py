"""Which kind of server answered, so which `LOOPWIRE_LLM_PROFILE` to name.

The names are `backend.llm.openai_compat.profiles.PROFILES`'. A server says
who it is in its model list's `owned_by` (each writes its own word there);
failing that, a well-known host or port does:

    owned_by              server                        profile
    --------------------  ----------------------------  ---------
    library               Ollama's /v1                  ollama
    vllm                  vLLM                          vllm
    llamacpp              llama.cpp's llama-server      llamacpp
    organization_owner    LM Studio                     lmstudio
    deepseek              DeepSeek's API                deepseek
    openai, system        OpenAI's API                  openai

    host or port: api.openai.com (openai), api.deepseek.com (deepseek),
    port 11434 (ollama), port 1234 (lmstudio).
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from backend.llm.openai_compat.profiles import PROFILES

_OWNERS = {
    "library": "ollama",
    "vllm": "vllm",
    "llamacpp": "llamacpp",
    "organization_owner": "lmstudio",
    "deepseek": "deepseek",
    "openai": "openai",
    "system": "openai",
    "openai-internal": "openai",
}
_HOSTS = {"api.openai.com": "openai", "api.deepseek.com": "deepseek"}
_PORTS = {11434: "ollama", 1234: "lmstudio"}


def server_profile(owners: Iterable[str], base_url: str, configured: str) -> str:
    """The profile for the server at `base_url` whose models are `owned_by`
    `owners`: the one they name, else the one its address names, else the
    `configured` one."""
    named = {_OWNERS[owner] for owner in owners if owner in _OWNERS}
    if len(named) == 1:
        return named.pop()
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return configured
    by_address = _HOSTS.get(host) or (_PORTS.get(port) if port else None)
    guess = by_address or configured
    return guess if guess in PROFILES else "auto"
