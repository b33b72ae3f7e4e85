"""The first probe: the server's model list, read over plain HTTP
(`GET {base}/models`). It is also where an endpoint that cannot be reached
at all is found out: `Unreachable`, said in one line."""

from __future__ import annotations

import asyncio
import socket

import httpx2

from backend.doctor.checks import Check, Findings, Target


class Unreachable(Exception):
    """The endpoint cannot be reached at all; the message is the one line."""


async def list_models(target: Target, findings: Findings) -> None:
    """`GET {base}/models`: is the chosen model there, and who serves it."""
    url = target.base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    reason: str | None = None
    try:
        async with (
            asyncio.timeout(target.timeout_s),
            httpx2.AsyncClient(timeout=target.timeout_s) as http,
        ):
            response = await http.get(url, headers=headers)
    except (TimeoutError, httpx2.TimeoutException):
        reason = f"no answer within {target.timeout_s:g}s"
    except httpx2.TransportError as exc:
        reason = why_unreachable(exc)
    if reason is not None:
        raise Unreachable(f"cannot reach {target.shown_url}: {reason}")
    findings.add(_models_check(response, target.model, findings))


def why_unreachable(exc: BaseException) -> str:
    """A connection failure in plain words, from its chain of causes."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "unknown host"
        if "certificate" in str(cause).lower() or "SSL" in str(cause):
            return "the TLS handshake failed"
        cause = cause.__cause__ or cause.__context__
    return f"connection failed ({exc})"


def _models_check(response: httpx2.Response, model: str, findings: Findings) -> Check:
    if response.status_code != 200:
        return Check("models", "warn", f"no model list (HTTP {response.status_code})")
    try:
        entries = response.json().get("data")
    except (ValueError, AttributeError):
        entries = None
    if not isinstance(entries, list):
        return Check("models", "warn", "no model list (not an OpenAI-style list)")
    models = [entry for entry in entries if isinstance(entry, dict)]
    ids = tuple(str(entry.get("id", "")) for entry in models)
    findings.listed = ids
    findings.owners = {str(e["owned_by"]) for e in models if e.get("owned_by")}
    if model in ids:
        return Check("models", "ok", f"{model} is listed ({_count(ids)})")
    if not ids:
        return Check("models", "warn", "the server lists no models")
    shown = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
    return Check("models", "warn", f"{model} is not listed; the server has {shown}")


def _count(ids: tuple[str, ...]) -> str:
    return "1 model" if len(ids) == 1 else f"{len(ids)} models"
