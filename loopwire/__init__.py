"""loopwire's Python client: `AgentClient` (async), `SyncAgentClient` (blocking).

See docs/clients.md. Events are the frame models of `backend.protocol`,
named for client code in `loopwire.events`.
"""

from backend.protocol import BudgetLimits
from loopwire.branches import branches
from loopwire.client import AgentClient, Decision, Declined, RunResult
from loopwire.connection import Backoff, Event, envelope
from loopwire.conversations import conversations
from loopwire.errors import (
    AgentError,
    ClientError,
    ConnectionFailed,
    HandshakeRefused,
    NoPendingQuestion,
    ProtocolMismatch,
    SessionNotFound,
)
from loopwire.instructions import instructions, set_instructions
from loopwire.shares import share, shares, unshare
from loopwire.sync import SyncAgentClient

__all__ = [
    "AgentClient",
    "AgentError",
    "Backoff",
    "BudgetLimits",
    "ClientError",
    "ConnectionFailed",
    "Decision",
    "Declined",
    "Event",
    "HandshakeRefused",
    "NoPendingQuestion",
    "ProtocolMismatch",
    "RunResult",
    "SessionNotFound",
    "SyncAgentClient",
    "branches",
    "conversations",
    "envelope",
    "instructions",
    "set_instructions",
    "share",
    "shares",
    "unshare",
]
