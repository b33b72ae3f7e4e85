"""What a failed attempt at an OpenAI-compatible server means.

Every exception an attempt can raise (`FAULTS`) becomes a `Failure`
(`backend.llm.retries`): the sentence the user sees, whether trying again can
help, the server's `Retry-After`, and the detail for the server log. The
sentence names no URL, key or exception; the detail names the server and the
exceptions, and neither carries the key.

The SDK reports the transport's errors as its own (`openai.APITimeoutError`,
`openai.APIConnectionError`, `openai.APIStatusError`); the two faults of our
own are `BadReply` and `CutShort`. Which of them are retried is the table in
`client.py`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import aiohttp
import openai

from backend.llm.retries import Failure, retry_after_s
from backend.redaction import redact

__all__ = ["FAULTS", "BadReply", "CutShort", "failure", "status_detail"]

_MAX_ERROR_DETAIL = 500

_RETRIED_STATUSES = frozenset({408, 409, 429})
"""Retried besides every 5xx (unless the server says otherwise)."""


class BadReply(Exception):
    """A reply that parsed but cannot be used (not retried)."""


class CutShort(Exception):
    """A stream that ended without a finish reason: it was cut off."""


FAULTS = (openai.OpenAIError, json.JSONDecodeError, BadReply, CutShort)
"""What a failed attempt raises; anything else is a bug, not a fault."""


def failure(exc: Exception, *, timeout_s: float, base_url: str, secret: str) -> Failure:
    """What one failed attempt means: its message, and whether to retry.
    `secret` (the API key) is masked in both message and detail."""
    message, retryable, after = _meaning(exc, timeout_s)
    detail = f"{base_url}: {message}"
    if not isinstance(exc, openai.APIStatusError):
        cause = exc.__cause__
        detail += f" [{type(exc).__name__}: {exc}]"
        if cause is not None:
            detail += f" [{type(cause).__name__}: {cause}]"
    return Failure(redact(message, secret), retryable, after, redact(detail, secret))


def _meaning(exc: Exception, timeout_s: float) -> tuple[str, bool, float | None]:
    """The user's message for `exc`, whether it is worth retrying, and the
    server's `Retry-After`."""
    if isinstance(exc, openai.APITimeoutError) and _timed_out(exc):
        return f"the LLM request timed out after {timeout_s:g}s", True, None
    if isinstance(exc, openai.APIConnectionError):
        return _connection_message(exc), True, None
    if isinstance(exc, openai.APIStatusError):
        return _status_meaning(exc)
    if isinstance(exc, json.JSONDecodeError):
        return "the LLM server sent a malformed reply (invalid JSON)", False, None
    if isinstance(exc, BadReply):
        return str(exc), False, None
    if isinstance(exc, CutShort):
        message = "the LLM server's reply stopped before it was complete"
        return message, True, None
    if isinstance(exc, openai.APIResponseValidationError):
        return "the LLM server sent a reply of an unexpected shape", False, None
    if isinstance(exc, openai.APIError):
        return f"the LLM server reported an error: {exc.message}", False, None
    return "the LLM request failed", False, None


def _timed_out(exc: BaseException) -> bool:
    """Whether a timeout error was one: the aiohttp transport under the SDK
    also reports a refused or dropped connection as a connect timeout, but
    only a real one has a `TimeoutError` among its causes."""
    causes = list(_chain(exc))[1:]
    # no cause at all: take it at its word
    return not causes or any(isinstance(c, TimeoutError) for c in causes)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what caused it, and so on (each once)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        yield cause
        cause = cause.__cause__ or cause.__context__


def _status_meaning(exc: openai.APIStatusError) -> tuple[str, bool, float | None]:
    status = exc.status_code
    message = f"the LLM server answered {status}: {status_detail(exc)}"
    headers = exc.response.headers
    should = headers.get("x-should-retry")
    if should in ("true", "false"):
        retryable = should == "true"
    else:
        retryable = status in _RETRIED_STATUSES or status >= 500
    return message, retryable, retry_after_s(headers, time.time())


def status_detail(exc: openai.APIStatusError) -> str:
    """The server's own error message, else its body, else the HTTP reason."""
    body = exc.body
    detail: str | None = None
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message.strip():
            detail = message.strip()
        elif body:
            detail = json.dumps(body, ensure_ascii=False)
    elif isinstance(body, str) and body.strip():
        detail = body.strip()
    if not detail:
        detail = exc.response.reason_phrase or "no details given"
    if len(detail) > _MAX_ERROR_DETAIL:
        detail = detail[:_MAX_ERROR_DETAIL] + "…"
    return detail


_CLOSED = (
    ConnectionResetError,
    aiohttp.ClientPayloadError,
    aiohttp.ServerDisconnectedError,
)
"""What a connection the server closed mid-reply raises (under the SDK's own)."""


def _connection_message(exc: BaseException) -> str:
    """Why a connection failed, from the exception chain, in plain words."""
    for cause in _chain(exc):
        text = str(cause)
        if isinstance(cause, ConnectionRefusedError) or "Connection refused" in text:
            return "cannot reach the LLM server: connection refused"
        if "Connect call failed" in text:
            return "cannot reach the LLM server: connection refused"
        if "Name or service not known" in text or "nodename nor servname" in text:
            return "cannot reach the LLM server: unknown host"
        if "certificate" in text.lower() or "SSL" in text:
            return "cannot reach the LLM server: the TLS handshake failed"
        if isinstance(cause, _CLOSED) or "peer closed" in text:
            return "the LLM server closed the connection before its reply was complete"
    return "cannot reach the LLM server: connection error"
