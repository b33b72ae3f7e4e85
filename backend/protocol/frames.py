"""Server → client frames: the `Envelope`, the payload unions, and the flat
frame models (`Envelope` + payload) of the `ServerMessage` union, made from
the payloads, never written out a second time."""

from __future__ import annotations

from typing import Annotated, Any, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model

from backend.protocol.agent_updates import AgentUpdate
from backend.protocol.payloads import (
    BranchSwitched,
    ChatResponse,
    ClientToolCall,
    Error,
    FilesUpdate,
    PendingInput,
    ResponseComplete,
    RunsRemoved,
    SessionReady,
    SessionReset,
    Thinking,
    TokenStream,
    ToolApprovalDecided,
    ToolApprovalRequest,
    ToolComplete,
    ToolError,
    ToolStart,
)
from backend.protocol.values import Payload


class Envelope(BaseModel):
    """What every server frame carries besides its payload."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int = Field(description="Per-session, strictly increasing from 1.")
    session_id: str
    run_id: str | None = Field(description="The run this frame belongs to, if any.")
    ts: float = Field(description="Server time, seconds since the Unix epoch.")


RunEvent = (
    AgentUpdate
    | ToolStart
    | ToolComplete
    | ToolError
    | ToolApprovalRequest
    | ToolApprovalDecided
    | ClientToolCall
    | TokenStream
    | Thinking
)
"""What a run reports while it works (strategies, the driver, the executor's
caller); `ChatService` adds the run's closing frames."""

ServerPayload = (
    SessionReady
    | RunEvent
    | ChatResponse
    | ResponseComplete
    | SessionReset
    | RunsRemoved
    | BranchSwitched
    | FilesUpdate
    | PendingInput
    | Error
)

_AGENT_UPDATES: tuple[type[Payload], ...] = get_args(AgentUpdate)
_OTHER_PAYLOADS: tuple[type[Payload], ...] = (
    SessionReady,
    ToolStart,
    ToolComplete,
    ToolError,
    ToolApprovalRequest,
    ToolApprovalDecided,
    ClientToolCall,
    TokenStream,
    Thinking,
    ChatResponse,
    ResponseComplete,
    SessionReset,
    RunsRemoved,
    BranchSwitched,
    FilesUpdate,
    PendingInput,
    Error,
)


def _frame_model(payload: type[Payload]) -> type[BaseModel]:
    """The flat wire frame of `payload`: the envelope's fields, then its own."""
    return create_model(
        f"{payload.__name__}Frame",
        __base__=(Envelope, payload),
        __module__=__name__,
        __doc__=payload.__doc__,
    )


FRAME_MODELS: dict[type[Payload], type[BaseModel]] = {
    payload: _frame_model(payload) for payload in (*_AGENT_UPDATES, *_OTHER_PAYLOADS)
}
"""Payload type → its flat frame model (for the schema and for parsing frames)."""


def _tagged_union(models: tuple[type[BaseModel], ...], tag: str) -> Any:
    """`Annotated[A | B | …, Field(discriminator=tag)]`, built from `models`."""
    return Annotated[Union[models], Field(discriminator=tag)]  # noqa: UP007


_AGENT_FRAME_UNION = _tagged_union(
    tuple(FRAME_MODELS[p] for p in _AGENT_UPDATES), "update_type"
)
ServerMessage = _tagged_union(
    (_AGENT_FRAME_UNION, *(FRAME_MODELS[p] for p in _OTHER_PAYLOADS)),
    "type",
)
"""Every server frame, flat (`Envelope` + payload), tagged by `type` and, for
`agent_update`, by `update_type`."""
server_message_adapter: TypeAdapter[Any] = TypeAdapter(ServerMessage)
