"""What instances say to each other: the bodies of commands and replies.

One pydantic model per command kind (`attach`, `handle`, … — `CommandKind`),
one discriminated union of them (`CommandBody`, tagged by `kind`), and the
bodies of the replies whose fields the asker reads (`ReplyBody`). They are
validated once, where a message arrives from another instance
(`backend.bus.inbox`); inside a process they travel as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_serializer

from backend.protocol import ClientMessage, ErrorType
from backend.store.records import FileRecord


class BusModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def wire(message: ClientMessage) -> dict[str, Any]:
    """A client message as the JSON a client would have sent (for the owner)."""
    return {"type": message.type, **message.model_dump(mode="json", exclude_unset=True)}


class _Forwarded(BusModel):
    message: ClientMessage
    """A client's message, as that client sent it (unset fields stay unset)."""

    @field_serializer("message")
    def _as_sent(self, message: ClientMessage) -> dict[str, Any]:
        return wire(message)


# ------------------------------------------------------------ commands


class Attach(BusModel):
    """Register the asker as a watcher; the frames after `after`."""

    kind: Literal["attach"] = "attach"
    after: int = 0


class Watching(BusModel):
    """A watcher's report: the sessions it shows."""

    kind: Literal["watching"] = "watching"
    sessions: list[str] = []


class Handle(_Forwarded):
    kind: Literal["handle"] = "handle"


class Dispatch(_Forwarded):
    kind: Literal["dispatch"] = "dispatch"


class Report(BusModel):
    kind: Literal["report"] = "report"
    message: str
    error_type: ErrorType


class Outcome(BusModel):
    kind: Literal["outcome"] = "outcome"
    run_id: str
    answer: str | None = None


class StopRun(BusModel):
    kind: Literal["stop_run"] = "stop_run"
    run_id: str


class Flush(BusModel):
    """Save what is pending; with `store`, create the conversation first."""

    kind: Literal["flush"] = "flush"
    store: bool = False


class Forget(BusModel):
    kind: Literal["forget"] = "forget"


class FilesAdded(BusModel):
    kind: Literal["files_added"] = "files_added"
    record: FileRecord


CommandBody = Annotated[
    Attach
    | Watching
    | Handle
    | Dispatch
    | Report
    | Outcome
    | StopRun
    | Flush
    | Forget
    | FilesAdded,
    Field(discriminator="kind"),
]
CommandKind = Literal[
    "attach",
    "watching",
    "handle",
    "dispatch",
    "report",
    "outcome",
    "stop_run",
    "flush",
    "forget",
    "files_added",
]
command_body_adapter: TypeAdapter[CommandBody] = TypeAdapter(CommandBody)


def command_body(kind: CommandKind, fields: Mapping[str, Any]) -> CommandBody:
    """The body of a `kind` command from its fields as JSON (for callers that
    hold them as a dict); `pydantic.ValidationError` if they do not fit."""
    if kind == "files_added":
        return FilesAdded(record=FileRecord.model_validate(fields))
    return command_body_adapter.validate_python({**fields, "kind": kind})


# ------------------------------------------------------------ replies


class Attached(BusModel):
    """The owner's replay window after the asked seq, its last seq and run."""

    kind: Literal["attached"] = "attached"
    last_seq: int = 0
    run_id: str | None = None
    frames: list[tuple[int, str]] = []


class Watched(BusModel):
    """The watched sessions not here now, and the last seq of the others."""

    kind: Literal["watched"] = "watched"
    gone: list[str] = []
    last: dict[str, int] = {}


class Forgotten(BusModel):
    kind: Literal["forgotten"] = "forgotten"
    forgotten: bool


class Stored(BusModel):
    kind: Literal["stored"] = "stored"
    stored: bool


class Result(BusModel):
    """A JSON result handed on as it is (a dispatch's, a run's outcome)."""

    kind: Literal["result"] = "result"
    value: dict[str, Any] = {}


ReplyBody = Annotated[
    Attached | Watched | Forgotten | Stored | Result, Field(discriminator="kind")
]
