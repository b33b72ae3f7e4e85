"""The exception tree. Every error loopwire raises on purpose is one of these::

    LoopwireError
    ├── ConfigError            bad settings, prompt templates or tool config
    ├── ProtocolError          a client frame that cannot be accepted
    │   ├── InvalidMessage     unparseable / invalid / oversize  -> "invalid_message"
    │   ├── InvalidAnswer      a person's input that does not fit what was
    │   │                      asked (edited arguments, a form's answer):
    │   │                      the wait goes on          -> "invalid_answer"
    │   ├── Busy               a chat while a run is active      -> "busy"
    │   ├── NoPendingInput     an answer with no question open   -> "no_pending_input"
    │   ├── NoPendingApproval  an approval nobody asked for  -> "no_pending_approval"
    │   ├── NoActiveRun        a control frame with no run        -> "no_active_run"
    │   ├── StoreUnavailable   the store failed a read a frame needs -> "store_error"
    │   ├── BudgetExhausted    the user's daily budget is spent  -> "budget_exhausted"
    │   ├── Unavailable        the instance owning the conversation is unreachable
    │   │                                                          -> "unavailable"
    │   └── Moved              a decision reached an instance that lost the
    │                          conversation; send it again       -> "moved"
    ├── NoSuchConversation     no conversation by that id is the caller's (404)
    ├── OwnershipLost          another instance owns the conversation now (the
    │                          store's fence refused a write): let it go
    ├── RunSuspended           a shutdown parked the run (at a phase boundary,
    │                          in a wait, or in a tool call's question)
    ├── LLMError               the model provider failed          -> "llm_error"
    │   └── ContextOverflow    a request the model's context window cannot hold
    ├── ToolError              a tool failed (fed back to the model, never fatal)
    │
    │   each seam's own, beside its code:
    ├── StoreError             store/base.py: the database failed a read or write
    │   ├── Fenced             ... a stale owner's write (an OwnershipLost too)
    │   └── LimitReached       ... a conversation's file count
    │       └── QuotaExceeded  ... a user's bytes of files
    ├── BusError               bus/base.py: Redis failed or timed out
    │   └── InstanceGone       ... the instance asked is no longer alive
    ├── StartFailed            tools/mcp_connection.py: an MCP server did not start
    ├── FileRefused            files/kinds.py: a file of a kind or size not taken
    ├── DocumentRefused        sources/documents.py: a document not indexed
    ├── UnknownSource          sources/index.py: a data source nobody configured
    ├── EventTooLarge          llm/sse.py: a server-sent event past its bound
    ├── SignInFailed           identity/oidc.py: the provider's answer is refused
    ├── Limited                transport/limits.py: a client past its limits (429)
    ├── BodyTooLarge           transport/files.py: an upload past its bound (413)
    └── Refused                transport/refusal.py: any HTTP refusal, as its status

`ProtocolError.error_type` is the `error_type` of the `error` frame the
transport sends; the connection always stays usable afterwards. Anything
else is a bug or an outage: the client hears that it happened and an
`incident` id, the log has the rest.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence

from backend.budget import day_end
from backend.text import shorten


class LoopwireError(Exception):
    """Base of every error raised on purpose."""


class ConfigError(LoopwireError):
    """Settings, templates or tool configuration are invalid."""


class ProtocolError(LoopwireError):
    error_type = "invalid_message"

    @staticmethod
    def of_type(error_type: str | None, message: str) -> ProtocolError:
        """The `ProtocolError` whose `error_type` this is (another
        instance's refusal, raised here as it was there)."""
        for kind in _PROTOCOL_ERRORS:
            if kind.error_type == error_type:
                return kind(message)
        return InvalidMessage(message)


class InvalidMessage(ProtocolError):
    error_type = "invalid_message"


class InvalidAnswer(ProtocolError):
    """A person's input that does not fit what they were asked (a form
    question's answer, an approval's edited arguments): refused, and the
    wait goes on."""

    error_type = "invalid_answer"


def client_names(names: Sequence[str], *, most: int = 5, chars: int = 40) -> str:
    """Names a client sent, for an error: the first `most`, each cut to
    `chars` characters, the rest counted (never echo 256 of them in full)."""
    shown = ", ".join(shorten(n, chars) for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


class Busy(ProtocolError):
    error_type = "busy"


class NoPendingInput(ProtocolError):
    error_type = "no_pending_input"


class NoPendingApproval(ProtocolError):
    error_type = "no_pending_approval"


class NoActiveRun(ProtocolError):
    error_type = "no_active_run"


class StoreUnavailable(ProtocolError):
    """What a client frame needs from the store could not be read."""

    error_type = "store_error"


class LLMError(LoopwireError):
    """The model provider failed (after its bounded retries)."""


class ContextOverflow(LLMError):
    """A request that cannot fit the model's context window even with the
    history, tool results and all else that may go left out: refused before
    it is sent. Its message says how many tokens it needed, the window, and
    which setting to change."""


class ToolError(LoopwireError):
    """A tool failed. Its message is what the model is told.

    `retryable=True` marks a transient failure (a busy upstream, a dropped
    connection): the executor retries it for idempotent tools. Plain
    ToolErrors are deterministic refusals and are never retried.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def incident() -> str:
    """A short id for an unexpected failure: the log line that has the details
    carries it, and the client is told only the id, never the exception."""
    return secrets.token_hex(6)


class BudgetExhausted(ProtocolError):
    """A run refused: its user has spent their daily budget. `resets_at`
    (epoch seconds) is when it starts over (the next UTC midnight, as
    `backend.budget.day_end` says; a refusal forwarded from another
    instance works it out again from its message's day)."""

    error_type = "budget_exhausted"

    def __init__(self, message: str, resets_at: float | None = None) -> None:
        super().__init__(message)
        self.resets_at = day_end(time.time()) if resets_at is None else resets_at


class Unavailable(ProtocolError):
    """The server instance that holds the conversation cannot be reached."""

    error_type = "unavailable"


class Moved(ProtocolError):
    """A decision reached an instance that no longer owns the conversation
    (its store refused to record it): nothing was done; send it again."""

    error_type = "moved"


class OwnershipLost(LoopwireError):
    """This instance no longer owns the conversation (`store.base.Fenced` is
    one): nothing more may be written or run for it here. Never turned into
    a tool error: it ends what is under way."""


class RunSuspended(LoopwireError):
    """The run was parked for a shutdown, at a phase boundary or in a wait
    (one inside a tool call too: it goes through the tool, never becoming
    the call's failure). Its last checkpoint continues it after the
    restart; nothing was ended."""


class NoSuchConversation(LoopwireError):
    """No conversation by that id belongs to the caller (HTTP: 404)."""


_PROTOCOL_ERRORS: tuple[type[ProtocolError], ...] = (
    InvalidMessage,
    Busy,
    NoPendingInput,
    NoPendingApproval,
    NoActiveRun,
    StoreUnavailable,
    BudgetExhausted,
    Unavailable,
    Moved,
)
