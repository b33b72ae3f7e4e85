"""`Replacement`: what an edit and resend sets aside from a conversation.

A `chat` with `replace_from` names a saved run of its conversation. The
conversation goes back to just before that run: the history is cut where
the run's user message sits (`RunState.request_at`), and that run and every
run started after it are set aside as a branch (`chat/branches.py` can
bring it back). `plan_replacement` works this out from the conversation's
run records (the store's, with the journal's not yet written) or says, as
an `InvalidMessage`, why it cannot be done; nothing is changed here. What
the set-aside runs' tools did is not undone.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, ValidationError

from backend.errors import InvalidMessage
from backend.history import History
from backend.store.records import RunRecord
from backend.text import shorten

ID_PREVIEW = 40
"""Characters of a client's run id quoted in an error."""


@dataclass(frozen=True, slots=True)
class Replacement:
    cut_at: int
    """The history keeps its first `cut_at` messages."""
    run_ids: list[str]
    """The runs set aside, oldest first (the named one first)."""
    started_at: float
    """When the named run started: when the version set aside was made."""


class _Position(BaseModel):
    """The one field of a `RunState` checkpoint an edit needs."""

    model_config = ConfigDict(extra="ignore")

    request_at: int | None = None


def conversation_runs(
    stored: Iterable[RunRecord],
    pending: Iterable[RunRecord],
    *,
    removed: Container[str] = (),
) -> list[RunRecord]:
    """The conversation's runs, oldest first: the stored ones, updated by
    the records not written yet, without the ones already removed."""
    runs = {record.id: record for record in stored}
    runs.update((record.id, record) for record in pending)
    kept = [record for record in runs.values() if record.id not in removed]
    return sorted(kept, key=lambda record: (record.started_at, record.id))


def plan_replacement(
    run_id: str,
    runs: list[RunRecord],
    history: History,
    *,
    unsaved: Container[str] = (),
) -> Replacement:
    """What replacing `run_id` removes; `runs` as `conversation_runs` gives
    them. Raises `InvalidMessage` when the run cannot be replaced."""
    shown = shorten(run_id, ID_PREVIEW)
    named = next((record for record in runs if record.id == run_id), None)
    if named is None:
        if run_id in unsaved:
            raise InvalidMessage(
                f"replace_from: run {shown} was not saved (save_chat: false), so "
                "it is not in the conversation's history and cannot be replaced"
            )
        raise InvalidMessage(
            f"replace_from: run {shown} is not a run of this conversation"
        )
    cut_at = request_at(named)
    if cut_at is None:
        raise InvalidMessage(
            f"replace_from: run {shown} cannot be replaced: its record does not "
            "say where its message is in the history (an older server saved it)"
        )
    removed = [named, *(r for r in runs if _later(r, named))]
    if not _lines_up(cut_at, named, removed[1:], history):
        raise InvalidMessage(
            f"replace_from: run {shown} is no longer where it was in the "
            "conversation's history (the session was reset since), so it "
            "cannot be replaced"
        )
    return Replacement(cut_at, [record.id for record in removed], named.started_at)


def _later(record: RunRecord, named: RunRecord) -> bool:
    return record.id != named.id and record.started_at >= named.started_at


def request_at(record: RunRecord) -> int | None:
    """Where the run's user message sits in the history (None: not known)."""
    try:
        return _Position.model_validate_json(record.state).request_at
    except ValidationError:
        return None


def _lines_up(
    cut_at: int, named: RunRecord, later: list[RunRecord], history: History
) -> bool:
    """The run's message is where its record says, and no later run's is at
    or before it (which a reset in between would make so)."""
    if not 0 <= cut_at < len(history):
        return False
    message = history[cut_at]
    if message.role != "user" or message.content != named.request:
        return False
    positions = (request_at(record) for record in later)
    return all(at is None or at > cut_at for at in positions)
