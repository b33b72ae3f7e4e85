"""Branches: the versions of a conversation that edits set aside, and the
switch between them.

An edit (or a retry: `chat` with `replace_from`) no longer loses the turns
it replaces: the history from the edited message on, and the runs that made
it, are set aside as a branch (`set_aside`, written with the next batch:
`Batch.set_aside`). `BranchSwitcher.switch` brings one back: the messages
from where it forks are set aside in turn (a branch of their own), the
branch's messages take their place in the history, its runs rejoin the
conversation, and its clients get `branch_switched` followed by the
restored runs' frames, sent again with new `seq`s. The replay log stays the
conversation's story in order, so a client that replays it from any point
ends showing the version that is current.

Branches nest: a branch set aside keeps the branches that forked from its
messages (`BranchRecord.parent`), and those come back with it. Only a
branch forking from the conversation as it stands can be switched to. A
reset of the history drops every branch (`Journal.branches_dropped`).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from backend.chat.replacement import conversation_runs, request_at
from backend.chat.run_views import run_view
from backend.chat.session import Session
from backend.errors import Busy, InvalidMessage, Moved, StoreUnavailable
from backend.protocol import BranchSwitched, RestoredRun
from backend.store.base import Fenced, SetAside, Store, StoreError
from backend.store.records import BranchRecord, RunRecord
from backend.text import shorten
from backend.transcript import Frame

ID_PREVIEW = 40
MOVED = "another server holds this conversation now; reconnect and switch there"
UNAVAILABLE = "the conversation store is unavailable; try again later"
log = logging.getLogger(__name__)


def set_aside(
    session: Session, fork_at: int, run_ids: Sequence[str], created_at: float
) -> SetAside:
    """Cut the session's history at `fork_at` and keep what was cut, with
    the runs that made it, as a branch (journalled for the next batch)."""
    history, journal = session.history, session.journal
    tail = SetAside(
        branch_id=uuid.uuid4().hex,
        fork_at=fork_at,
        messages=[history[n] for n in range(fork_at, len(history))],
        run_ids=list(run_ids),
        created_at=created_at,
    )
    history.truncate(fork_at)
    if journal is not None:
        journal.history_truncated(fork_at)
        journal.tail_set_aside(tail)
    return tail


class Flushes(Protocol):
    """Writing a session's journal (`SessionTable`)."""

    async def flush(self, session: Session) -> None: ...

    async def flush_held(self, session: Session) -> None: ...

    async def flush_quietly(self, session: Session) -> None: ...


class BranchSwitcher:
    def __init__(self, store: Store | None, table: Flushes) -> None:
        self.store = store
        self.table = table

    async def switch(self, session: Session, branch_id: str) -> dict[str, Any]:
        """Bring branch `branch_id` back in place of the messages from where
        it forks (see the module). What an HTTP client is told: the branch
        the replaced messages became, and the runs brought back."""
        journal = session.journal
        if self.store is None or journal is None:
            raise InvalidMessage("this server keeps no conversations, so no branches")
        _check_free(session)
        await self._flushed(session)  # the store has every branch and run
        async with session.flushing:
            branch, runs, frames, stored = await self._read(session.id, branch_id)
            # nothing awaited from here on: no run starts in between
            _check_free(session)  # another client may have started one
            if session.journal is not journal:
                raise InvalidMessage("this conversation was deleted meanwhile")
            live = conversation_runs(
                stored, journal.runs.values(), removed=journal.removed_runs
            )
            replaced = _replaced(session, branch, live)
            ids = [run.id for run in replaced]
            tail = set_aside(session, branch.fork_at, ids, replaced[0].started_at)
            for message in branch.messages:
                session.history.append(message)
            journal.branch_restored(branch.id, [run.id for run in runs])
            switched = BranchSwitched(
                fork_at=branch.fork_at,
                set_aside=tail.branch_id,
                removed=tail.run_ids,
                restored=[_restored(run) for run in runs],
                resent=len(frames),
            )
            await self._stored(session)  # before anyone is told of it
            session.notify.branch_switched(switched, frames)
        await self.table.flush_quietly(session)  # else written with the next flush
        return switched.model_dump(include={"set_aside", "removed", "restored"})

    async def _stored(self, session: Session) -> None:
        """The switch written (the lock held), so that a client told of it
        reads it back; a store that fails keeps it for the next flush (the
        session has switched: its clients are told all the same)."""
        try:
            await self.table.flush_held(session)
        except Fenced as exc:
            raise Moved(MOVED) from exc
        except StoreError as exc:
            log.error("session %s: the switch is not stored yet: %s", session.id, exc)

    async def _flushed(self, session: Session) -> None:
        try:
            with _store_readable():
                await self.table.flush(session)
        except Fenced as exc:  # let go: its clients reconnect to the new owner
            raise Moved(MOVED) from exc

    async def _read(
        self, conversation_id: str, branch_id: str
    ) -> tuple[BranchRecord, list[RunRecord], list[Frame], list[RunRecord]]:
        """The branch with its runs and frames, and the conversation's runs."""
        assert self.store is not None
        with _store_readable():
            found = await self.store.branch(conversation_id, branch_id)
            live = await self.store.runs(conversation_id)
        shown = shorten(branch_id, ID_PREVIEW)
        if found is None:
            raise InvalidMessage(
                f"switch_branch: {shown} is not a branch of this conversation"
            )
        if found[0].parent is not None:
            raise InvalidMessage(
                f"switch_branch: branch {shown} forks from another branch "
                f"({found[0].parent}); switch to that one first"
            )
        return (*found, live)


@contextlib.contextmanager
def _store_readable() -> Iterator[None]:
    """A store failure as the client is told it (nothing was changed)."""
    try:
        yield
    except Fenced:
        raise
    except StoreError as exc:
        raise StoreUnavailable(UNAVAILABLE) from exc


def _check_free(session: Session) -> None:
    if session.run is not None:
        raise Busy(
            "cannot switch branches while a run is active "
            f"({session.run.run_id}); wait for response_complete or stop it"
        )


def _replaced(
    session: Session, branch: BranchRecord, live: list[RunRecord]
) -> list[RunRecord]:
    """The conversation's runs from where `branch` forks (oldest first),
    after checking that the history still forks there: a user message at
    `fork_at`, asked by the first of those runs."""
    at = branch.fork_at
    replaced = [r for r in live if (n := request_at(r)) is not None and n >= at]
    history = session.history
    lined_up = (
        at < len(history)
        and history[at].role == "user"
        and bool(replaced)
        and request_at(replaced[0]) == at
        and history[at].content == replaced[0].request
    )
    if not lined_up:
        raise InvalidMessage(
            "switch_branch: the conversation no longer forks where this branch "
            "does (its history was cleared or cut since)"
        )
    return replaced


def _restored(run: RunRecord) -> RestoredRun:
    return RestoredRun(run_id=run.id, request=run.request, mode=run_view(run)["mode"])
