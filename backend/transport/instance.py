"""`X-Loopwire-Instance` on every HTTP response: which instance answered
(behind a load balancer, what an operator and the cluster tests read). The
WebSocket endpoint sends it with its handshake."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-loopwire-instance"


class InstanceHeader:
    def __init__(self, app: ASGIApp, *, instance_id: str) -> None:
        self.app = app
        self.value = instance_id.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (HEADER, self.value)]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)
