"""A model's context window, read once from its server (`discover`).

OpenAI-compatible servers do not say how long a model's context is in any
common way; the local ones each say it in their own API:

    server     asked                 the window
    ---------  --------------------  ----------------------------------------
    vLLM       GET  /v1/models       the model's `max_model_len`
    llama.cpp  GET  /props           `default_generation_settings.n_ctx` (a
                                     slot's share of `--ctx-size`)
    LM Studio  GET  /api/v0/models   `loaded_context_length` of a loaded
                                     model, else its `max_context_length`
    Ollama     POST /api/show        the `num_ctx` its Modelfile sets, which
                                     is what Ollama uses; else, once it is
                                     loaded, `GET /api/ps`'s `context_length`;
                                     else Ollama's default (`OLLAMA_DEFAULT`);
                                     never more than the model's own
                                     `<architecture>.context_length`

`auto` asks them in that order (a server that is not the one asked answers
404, or without the field) and stops at the first answer, or at the first
sign the server is down; a named profile asks its own server only, and
`openai` and `deepseek` are not asked (their APIs do not say). A failure is
logged and leaves the window unknown: requests are then built as before,
bounded by `LOOPWIRE_HISTORY_WINDOW_TOKENS` alone.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard
from urllib.parse import urlsplit

import httpx2

from backend.redaction import bare_urls

__all__ = ["OLLAMA_DEFAULT", "discover"]

log = logging.getLogger(__name__)

OLLAMA_DEFAULT = 4096
"""The context Ollama gives a model whose Modelfile sets no `num_ctx` (its
default on a machine with less than 24 GiB of VRAM; `OLLAMA_CONTEXT_LENGTH`
changes it, and the API does not say so: set LOOPWIRE_LLM_CONTEXT_TOKENS)."""
HOSTED = frozenset({"api.openai.com", "api.deepseek.com"})
"""Hosted APIs, not asked even by `auto`: none of them says a window, and
each probe would be a request on the user's key."""
MAX_BYTES = 4 * 1024 * 1024
"""A larger answer is not read (a model list is a few KB)."""


class _Down(Exception):
    """The server could not be reached: asking it more is pointless."""


@dataclass(frozen=True)
class _Server:
    """Where to ask: `base` is the OpenAI-style base URL (…/v1), `root` the
    server's own (without the /v1)."""

    http: httpx2.AsyncClient
    base: str
    root: str

    async def get(self, url: str) -> Any:
        return await self._ask("GET", url, None)

    async def post(self, url: str, body: Mapping[str, Any]) -> Any:
        return await self._ask("POST", url, body)

    async def _ask(self, method: str, url: str, body: Mapping[str, Any] | None) -> Any:
        """The JSON answer; None for an error status or a body that is not JSON."""
        try:
            async with self.http.stream(method, url, json=body) as response:
                if response.status_code != 200:
                    return None
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_BYTES:
                        return None
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise _Down(str(exc) or type(exc).__name__) from exc
        try:
            return json.loads(bytes(data))
        except ValueError:
            return None


Probe = Callable[[_Server, str], Awaitable[int | None]]


async def _vllm(server: _Server, model: str) -> int | None:
    listed = await server.get(f"{server.base}/models")
    for entry in _entries(listed):
        if entry.get("id") == model:
            return _positive(entry.get("max_model_len"))
    return None


async def _llamacpp(server: _Server, model: str) -> int | None:
    props = await server.get(f"{server.root}/props")
    settings = props.get("default_generation_settings") if _is_map(props) else None
    return _positive(settings.get("n_ctx")) if _is_map(settings) else None


async def _lmstudio(server: _Server, model: str) -> int | None:
    listed = await server.get(f"{server.root}/api/v0/models")
    for entry in _entries(listed):
        if entry.get("id") == model:
            loaded = _positive(entry.get("loaded_context_length"))
            return loaded or _positive(entry.get("max_context_length"))
    return None


async def _ollama(server: _Server, model: str) -> int | None:
    shown = await server.post(f"{server.root}/api/show", {"model": model})
    if not _is_map(shown):
        return None
    trained = _trained_length(shown.get("model_info"))
    used = _num_ctx(shown.get("parameters")) or await _ollama_loaded(server, model)
    used = used or OLLAMA_DEFAULT
    return min(used, trained) if trained else used


async def _ollama_loaded(server: _Server, model: str) -> int | None:
    """The context a loaded model runs with (`/api/ps`); None if not loaded."""
    running = await server.get(f"{server.root}/api/ps")
    entries = running.get("models") if _is_map(running) else None
    names = {model, f"{model}:latest"}
    for entry in entries if isinstance(entries, list) else []:
        if _is_map(entry) and {entry.get("name"), entry.get("model")} & names:
            return _positive(entry.get("context_length"))
    return None


PROBES: dict[str, tuple[Probe, ...]] = {
    "vllm": (_vllm,),
    "llamacpp": (_llamacpp,),
    "lmstudio": (_lmstudio,),
    "ollama": (_ollama,),
    "openai": (),
    "deepseek": (),
    "auto": (_vllm, _llamacpp, _lmstudio, _ollama),
}
"""Which servers a profile asks, in order."""


async def discover(
    base_url: str,
    models: Sequence[str],
    *,
    api_key: str | None = None,
    profile: str = "auto",
    timeout_s: float = 5.0,
) -> dict[str, int | None]:
    """Each model's context window as its server at `base_url` says (None:
    it did not say, or could not be asked); what was found is logged."""
    probes = PROBES.get(profile, PROBES["auto"])
    found: dict[str, int | None] = dict.fromkeys(models)
    if not probes or urlsplit(base_url).hostname in HOSTED:
        return found
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = base_url.rstrip("/")
    root = base.removesuffix("/v1")
    async with httpx2.AsyncClient(timeout=timeout_s, headers=headers) as http:
        server = _Server(http, base, root)
        for model in models:
            try:
                found[model] = await _first_answer(server, model, probes)
            except _Down as exc:
                log.warning(
                    "cannot read the models' context windows from %s (%s): "
                    "unknown; set LOOPWIRE_LLM_CONTEXT_TOKENS",
                    bare_urls(base),
                    exc,
                )
                break
            _report(model, found[model])
    return found


async def _first_answer(
    server: _Server, model: str, probes: Sequence[Probe]
) -> int | None:
    for probe in probes:
        tokens = await probe(server, model)
        if tokens is not None:
            return tokens
    return None


def _report(model: str, tokens: int | None) -> None:
    if tokens is None:
        log.info(
            "model %s: its server does not say its context window; "
            "set LOOPWIRE_LLM_CONTEXT_TOKENS to fit requests to it",
            model,
        )
    else:
        log.info("model %s: context window %d tokens (from its server)", model, tokens)


def _entries(listed: Any) -> list[Mapping[str, Any]]:
    """The model entries of an OpenAI-style list (`{"data": [...]}`)."""
    data = listed.get("data") if _is_map(listed) else None
    return [e for e in data if _is_map(e)] if isinstance(data, list) else []


def _trained_length(info: Any) -> int | None:
    """`<architecture>.context_length` of Ollama's `model_info`."""
    if not _is_map(info):
        return None
    architecture = info.get("general.architecture")
    return _positive(info.get(f"{architecture}.context_length"))


def _num_ctx(parameters: Any) -> int | None:
    """`num_ctx N` among Ollama's Modelfile parameters (one per line)."""
    if not isinstance(parameters, str):
        return None
    for line in parameters.splitlines():
        name, _, value = line.strip().partition(" ")
        if name == "num_ctx":
            return _positive(value.strip())
    return None


def _positive(value: Any) -> int | None:
    """`value` as a positive whole number of tokens, else None."""
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, Mapping)
