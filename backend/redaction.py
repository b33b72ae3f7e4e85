"""What an error may show the user: no key, token or URL credentials.

Servers put all sorts into their error messages — the key that was refused,
a URL with its password. `redact` masks the configured key, `sk-…` keys,
bearer tokens, and strips `user:password@` and query strings from URLs.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
_MIN_KEY_CHARS = 8
"""A configured key shorter than this is not masked (it would mask words)."""
_TOKEN = re.compile(r"\bsk-[\w*-]{6,}|\bBearer\s+\S+", re.IGNORECASE)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\"'<>]+", re.IGNORECASE)


def redact(text: str, key: str = "") -> str:
    """`text` without `key`, keys or bearer tokens, and with bare URLs."""
    if len(key) >= _MIN_KEY_CHARS:
        text = text.replace(key, MASK)
    return bare_urls(_TOKEN.sub(MASK, text))


def bare_urls(text: str) -> str:
    """Every URL in `text` without user:password@, query or fragment."""
    return _URL.sub(_bare, text)


def _bare(match: re.Match[str]) -> str:
    try:
        parts = urlsplit(match.group(0))
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return MASK
    if ":" in host:  # IPv6
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
