"""What the client raises. Everything derives from `ClientError`:

```
ClientError                   anything this client raises on purpose
├── HandshakeRefused          the server answered the handshake with an HTTP
│                             error (401 unauthorized, 403 origin, 429 too many
│                             connections, …) and its JSON reason
├── ConnectionFailed          no connection: the server cannot be reached, or
│                             the connection was lost and every reconnect
│                             attempt failed
├── SessionNotFound           `session_id` names no session this server has
├── ProtocolMismatch          the server sent a frame this client cannot read
├── AgentError                an `error` frame: the server refused a request
│                             or the run failed (`error_type`, `message`)
└── NoPendingQuestion         `answer()` with no question waiting
```
"""

from __future__ import annotations

from typing import Any


class ClientError(Exception):
    """Anything `loopwire.client` raises on purpose."""


class HandshakeRefused(ClientError):
    """The WebSocket handshake got an HTTP error instead of a socket."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(f"refused ({status} {error_type}): {message}")
        self.status = status
        self.error_type = error_type
        self.message = message


class ConnectionFailed(ClientError):
    """The server could not be reached, or could not be reached again."""

    def __init__(self, message: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.attempts = attempts


class SessionNotFound(ClientError):
    """The session to continue is not on this server (any more)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no conversation {session_id} on this server")
        self.session_id = session_id


class ProtocolMismatch(ClientError):
    """A frame that is not protocol v1 as this client knows it."""


class AgentError(ClientError):
    """An `error` frame (or a request the protocol refuses before sending).

    `frame` is the server's frame; None when the client caught the problem
    itself (a blank message, `max_steps=0`): the same check the server makes.
    """

    def __init__(self, error_type: str, message: str, frame: Any = None) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message
        self.frame = frame


class NoPendingQuestion(ClientError):
    """`answer()` when the agent is not waiting for one."""
