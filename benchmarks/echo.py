"""The bare echo: the baseline every loopwire figure is compared with.

    python -m benchmarks.echo --port 9200

uvicorn configured by loopwire's own `backend.server.uvicorn_config` with
loopwire's default settings — the WebSocket protocol class and the options
`python -m backend serve` gives uvicorn (`backend/__main__.py` `_serve`) —
in its own process, serving a raw ASGI app that does nothing but move
frames: whatever loopwire spends on top of this is its own work.

On a WebSocket at any path, each text frame is answered by:

- `{"burst": N, "size": B}` → N frames of B bytes each (a JSON object
  shaped like a `token_stream` frame, padded): the frames/s baseline;
- `{"delay_ms": D}` → the frame itself after D ms: a round trip through a
  server that waits on something upstream (the agent runs' baseline);
- anything else → the frame itself.

`GET /healthz` answers `{"status": "ok", "server": "echo"}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

JSON = dict[str, Any]
Receive = Callable[[], Awaitable[JSON]]
Send = Callable[[JSON], Awaitable[None]]

HEALTH = json.dumps({"status": "ok", "server": "echo"}).encode()


def burst_frame(size: int) -> str:
    """A text frame of `size` bytes shaped like loopwire's `token_stream`."""
    head = (
        '{"type":"token_stream","token":"w1 ","is_first":false,"is_last":false,"pad":"'
    )
    return head + "x" * max(0, size - len(head) - 2) + '"}'


async def app(scope: JSON, receive: Receive, send: Send) -> None:
    kind = scope["type"]
    if kind == "websocket":
        await _echo(receive, send)
    elif kind == "http":
        await _health(scope, send)
    elif kind == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _echo(receive: Receive, send: Send) -> None:
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None:
            continue
        request = json.loads(text) if text.startswith("{") else {}
        if "burst" in request:
            frame = burst_frame(int(request["size"]))
            for _ in range(int(request["burst"])):
                await send({"type": "websocket.send", "text": frame})
            continue
        if "delay_ms" in request:
            await asyncio.sleep(float(request["delay_ms"]) / 1000)
        await send({"type": "websocket.send", "text": text})


async def _health(scope: JSON, send: Send) -> None:
    found = scope["path"] == "/healthz"
    await send(
        {
            "type": "http.response.start",
            "status": 200 if found else 404,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": HEALTH if found else b"{}"})


def main(argv: Sequence[str] | None = None) -> None:
    import logging

    import uvicorn

    from backend.server import redact_request_logs, uvicorn_config
    from backend.settings import Settings

    parser = argparse.ArgumentParser(prog="python -m benchmarks.echo")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    settings = Settings(_env_file=None)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(message)s"
    )
    config = uvicorn_config(app, settings, host=args.host, port=args.port)
    redact_request_logs(settings)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
