"""A real OpenID provider for the sign-in tests: `oidc-provider-mock` (a
Flask app on uvicorn) in its own process on 127.0.0.1, a free port.

`running_oidc_provider(*users)` yields its issuer URL once uvicorn says it
listens (read from its log, no polling) and the discovery document answers;
it is stopped afterwards. `users` are predefined users' claims (each with a
`sub`); any other subject typed into its form signs in too. The provider
requires a `nonce` in every authorization request. `authorize` plays the
provider's form for a script: the redirect back to loopwire's callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx

LISTENING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")
START_LIMIT_S = 30.0


@contextlib.asynccontextmanager
async def running_oidc_provider(*users: dict[str, Any]) -> AsyncIterator[str]:
    args = ["--host", "127.0.0.1", "--port", "0", "--require-nonce"]
    for claims in users:
        args += ["--user-claims", json.dumps(claims)]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "oidc_provider_mock",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"},
    )
    lines: list[str] = []
    listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    reader = asyncio.create_task(_read(process, lines, listening))
    try:
        async with asyncio.timeout(START_LIMIT_S):
            issuer = await listening
        async with httpx.AsyncClient() as http:
            found = await http.get(f"{issuer}/.well-known/openid-configuration")
        assert found.json()["issuer"] == issuer
        yield issuer
    except BaseException:
        print("oidc-provider-mock said:\n" + "\n".join(lines), file=sys.stderr)
        raise
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()
        await reader


async def _read(
    process: asyncio.subprocess.Process,
    lines: list[str],
    listening: asyncio.Future[str],
) -> None:
    """Keep its log (so the pipe never fills); resolve `listening` with the
    issuer URL once uvicorn says it listens."""
    assert process.stderr is not None
    async for raw in process.stderr:
        line = raw.decode(errors="replace").rstrip()
        lines.append(line)
        found = LISTENING.search(line)
        if found and not listening.done():
            listening.set_result(found.group(1))
    if not listening.done():
        listening.set_exception(
            RuntimeError("the OIDC provider exited before it listened")
        )


async def authorize(http: httpx.AsyncClient, url: str, subject: str) -> str:
    """Submit the provider's authorization form at `url` as `subject`; the
    URL it redirects to (loopwire's callback, with the code and state)."""
    form = await http.get(url)
    assert form.status_code == 200 and 'name="sub"' in form.text
    answer = await http.post(url, data={"sub": subject})
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]
