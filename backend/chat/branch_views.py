"""How a conversation's branches are shown by the API: where the
conversation as it stands forks, and the versions at each fork."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backend.chat.replacement import request_at
from backend.store.records import BranchRecord, RunRecord
from backend.transcript import Message


def forks(
    branches: Sequence[BranchRecord],
    runs: Sequence[RunRecord],
    history: Sequence[Message],
) -> list[dict[str, Any]]:
    """Each place where the conversation as it stands (`runs`, oldest
    first, and `history`, as stored) has other versions, in history order:
    `fork_at`, the current version's first run (`run_id`), the versions
    oldest first (`branch_id` null for the current one, what its first
    message asked, when it was made) and `current`, the current one's
    index. A branch whose fork the history no longer reaches (a reset or
    an edit earlier cut it) is left out."""
    here = {at: run for run in runs if (at := request_at(run)) is not None}
    at_fork: dict[int, list[BranchRecord]] = {}
    for branch in branches:
        if branch.parent is None:
            at_fork.setdefault(branch.fork_at, []).append(branch)
    shown = []
    for at in sorted(at_fork):
        run = here.get(at)
        if run is None or not _asked_at(history, at, run.request):
            continue
        versions = [_version(branch) for branch in at_fork[at]]
        versions.append(
            {"branch_id": None, "request": run.request, "created_at": run.started_at}
        )
        versions.sort(key=lambda version: version["created_at"])
        current = next(n for n, v in enumerate(versions) if v["branch_id"] is None)
        shown.append(
            {"fork_at": at, "run_id": run.id, "current": current, "versions": versions}
        )
    return shown


def _asked_at(history: Sequence[Message], at: int, request: str) -> bool:
    return (
        at < len(history)
        and history[at].role == "user"
        and (history[at].content == request)
    )


def _version(branch: BranchRecord) -> dict[str, Any]:
    asked = next((m.content for m in branch.messages if m.role == "user"), "")
    return {
        "branch_id": branch.id,
        "request": asked or "",
        "created_at": branch.created_at,
    }
