"""`get_json`: one HTTP/1.1 GET on loopback, its JSON body (no client library)."""

from __future__ import annotations

import asyncio
import json
from typing import Any


class ProbeError(Exception):
    """The request failed or was not answered 200 with JSON."""


async def get_json(port: int, path: str, *, timeout_s: float = 5.0) -> Any:
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                request = (
                    f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    "Accept: application/json\r\nConnection: close\r\n\r\n"
                )
                writer.write(request.encode())
                raw = await reader.read()
            finally:
                writer.close()
    except (OSError, TimeoutError) as exc:
        raise ProbeError(f"GET {path}: {exc!r}") from exc
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")
    if len(status) < 2 or status[1] != "200":
        raise ProbeError(f"GET {path}: {lines[0]!r}")
    headers = {
        k.strip().lower(): v.strip()
        for k, _, v in (x.partition(":") for x in lines[1:])
    }
    if headers.get("transfer-encoding") == "chunked":
        body = _unchunked(body)
    try:
        return json.loads(body)
    except ValueError as exc:
        raise ProbeError(f"GET {path}: not JSON: {body[:200]!r}") from exc


def _unchunked(body: bytes) -> bytes:
    parts = []
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        parts.append(rest[:size])
        body = rest[size + 2 :]
    return b"".join(parts)
