"""Reading a JSON export back (`transcript_export`): the checks that make
its messages a history a model can be sent, or the first problem found.

A document is refused (`ImportProblem`, or pydantic's `ValidationError`
for a bad shape) when it is not version `EXPORT_VERSION`, when a field is
unknown or of the wrong type, when a message does not fit its role, or
when the order is one no provider takes: a tool result must answer an
earlier call of the same name that has no result yet, and a call's
result must come before the next user or assistant message. Calls left
without a result at the very end (an export taken while a run waited)
get a `cancelled` result saying so, as a stopped run's do. Runs and
files are not read: an import starts with the messages only.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from backend.chat.transcript_export import EXPORT_VERSION
from backend.errors import LoopwireError
from backend.history import History
from backend.text import shorten
from backend.transcript import INTERJECTION, Message, Role, ToolStatus

MAX_MESSAGES = 20_000
TITLE_CHARS = 200
"""An imported title is cut to this many characters (as a rename allows)."""
ID_CHARS = 200
NOT_RUN_NOTE = "Not run: the conversation was exported before this call had a result."


class ImportProblem(LoopwireError):
    """What is wrong with a document, and where (`field`, dotted)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Call(_Strict):
    id: Annotated[str, Field(min_length=1, max_length=ID_CHARS)]
    name: Annotated[str, Field(min_length=1, max_length=ID_CHARS)]
    arguments: str = "{}"


class _Meta(_Strict):
    status: ToolStatus = "ok"
    error: str | None = None


class _Message(_Strict):
    role: Role
    content: str | None = None
    tool_calls: list[_Call] = Field(default_factory=list)
    tool_call_id: Annotated[str, Field(min_length=1, max_length=ID_CHARS)] | None = None
    name: Annotated[str, Field(max_length=ID_CHARS)] | None = None
    meta: _Meta | None = None

    @model_validator(mode="after")
    def _fits_its_role(self) -> _Message:
        problem = _role_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self


def _role_problem(m: _Message) -> str | None:
    """Why `m` is not a message of its role (None: it is)."""
    if m.role == "tool":
        if m.tool_call_id is None or not m.name or m.content is None:
            return "a tool result needs tool_call_id, name and content"
        return "a tool result makes no tool calls" if m.tool_calls else None
    if m.tool_call_id is not None or m.meta is not None:
        return f"a {m.role} message has no tool_call_id or meta"
    if m.role == "assistant":
        return None if m.content is not None or m.tool_calls else "it is empty"
    if m.tool_calls:
        return f"a {m.role} message makes no tool calls"
    if m.content is None:
        return f"a {m.role} message needs content"
    if m.name is not None and (m.role, m.name) != ("user", INTERJECTION):
        return f"a {m.role} message has no name"
    return None


class _Conversation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = None
    title: str = ""
    created_at: float | None = None
    updated_at: float | None = None


class _Document(_Strict):
    loopwire_export: int
    conversation: _Conversation
    messages: Annotated[list[_Message], Field(max_length=MAX_MESSAGES)]
    runs: list[dict[str, Any]] = Field(default_factory=list)
    files: list[dict[str, Any]] = Field(default_factory=list)


class Imported(BaseModel):
    """What an import creates: the title, the messages in order."""

    model_config = ConfigDict(frozen=True)

    title: str
    messages: list[Message]
    closed_calls: list[str]
    """Calls the export left without a result, given a `cancelled` one."""
    runs_left_out: int
    files_left_out: list[str]
    """The names of the files the export listed (their contents never come)."""


def read_export(data: Any) -> Imported:
    """The conversation `data` (a parsed JSON export) holds; `ImportProblem`
    or `ValidationError` if it is not one this server can continue."""
    _check_version(data)
    document = _Document.model_validate(data)
    _check_order(document.messages)
    history = History(
        Message.model_validate(m.model_dump(mode="python")) for m in document.messages
    )
    closed = history.close_dangling_tool_calls(NOT_RUN_NOTE)
    return Imported(
        title=shorten(document.conversation.title.strip(), TITLE_CHARS),
        messages=list(history.messages),
        closed_calls=closed,
        runs_left_out=len(document.runs),
        files_left_out=[
            f["name"] for f in document.files if isinstance(f.get("name"), str)
        ],
    )


def _check_version(data: Any) -> None:
    if not isinstance(data, dict):
        raise ImportProblem("body", "a loopwire export is a JSON object")
    if "loopwire_export" not in data:
        raise ImportProblem("loopwire_export", "missing: is this a loopwire export?")
    version = data["loopwire_export"]
    if version != EXPORT_VERSION or isinstance(version, bool):
        shown = shorten(repr(version), 40)
        raise ImportProblem(
            "loopwire_export",
            f"version {shown}; this server reads version {EXPORT_VERSION}",
        )


def _check_order(messages: list[_Message]) -> None:
    """Each result answers an open call of its name; each call is answered
    before the next user or assistant message (the last one's may not be)."""
    waiting: dict[str, str] = {}
    """Calls without a result yet: id → tool name."""
    for index, m in enumerate(messages):
        where = f"messages.{index}"
        if m.role == "tool":
            assert m.tool_call_id is not None  # `_fits_its_role`
            name = waiting.pop(m.tool_call_id, None)
            if name is None:
                raise ImportProblem(
                    where,
                    f"a result for call {m.tool_call_id!r}, which no earlier "
                    "message made (or it has a result already)",
                )
            if name != m.name:
                raise ImportProblem(
                    where, f"the result of a {name!r} call names {m.name!r}"
                )
        elif m.role == "assistant" or (m.role == "user" and m.name is None):
            if waiting:
                raise ImportProblem(
                    where, f"comes before the result of call {next(iter(waiting))!r}"
                )
            waiting = _calls_of(m, where)


def _calls_of(m: _Message, where: str) -> dict[str, str]:
    calls: dict[str, str] = {}
    for call in m.tool_calls:
        if call.id in calls:
            raise ImportProblem(where, f"two tool calls have the id {call.id!r}")
        calls[call.id] = call.name
    return calls
