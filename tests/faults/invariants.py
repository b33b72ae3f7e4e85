"""What must hold in loopwire's database whatever faults hit the cluster.

`await check(database_url)` reads PostgreSQL directly (asyncpg, no loopwire
code) and returns the violations found (empty: all hold):

- frames: `seq` is unique per conversation, and each frame's JSON text names
  the `seq`, `session_id` and `run_id` of its row;
- epochs (the fencing token): per conversation, frames in `seq` order have
  non-decreasing epochs, and no frame or run has an epoch above its
  conversation's;
- a run whose conversation has no live owner is final, or `waiting` with a
  pending question or approval in its checkpoint (another instance will take
  it and wait again); `suspended` is allowed too with `allow_suspended`
  (every instance was stopped gracefully);
- a final run's checkpoint has its `ending` (or the phase `ending`), whose
  reason is the run's status (`store_error` is recorded as `error`);
- a run's `steps` is its checkpoint's `step`;
- `notes.key` (a tool call's idempotency key) is unique, and a note with a
  key has its `tool_effects` row (written in the same transaction).

Who owns a conversation lives in Redis (`loopwire:lease:<id>`): pass
`redis_url` to read the leases, or `owned` (the ids), else nobody owns
anything (the check runs once the instances are gone). The schema grows in
parallel with this checker: a check whose column or table does not exist is
skipped with a note (`report()` returns them; `check()` logs them).

`notes_by_text(database_url)`: how many notes hold each text, to assert that
a side-effecting tool (`save_note`) ran exactly once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import redis.asyncio as aioredis

from backend.bus.redis_bus import PREFIX

log = logging.getLogger(__name__)

LIVE_STATUSES = ("running", "waiting", "suspended")
FINAL_REASONS: dict[str, frozenset[str]] = {
    status: frozenset({status})
    for status in (
        "finished",
        "max_steps",
        "stopped",
        "rejected",
        "timeout",
        "interrupted",
    )
}
"""A final run's status → the ending reasons its checkpoint may hold."""
FINAL_REASONS["error"] = frozenset({"error", "store_error"})
LEASE = f"{PREFIX}lease:"


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Checks not made: what they need is not in the schema."""


def dsn(url: str) -> str:
    """asyncpg's form of a (SQLAlchemy) PostgreSQL URL."""
    for scheme in ("postgresql+asyncpg://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql://" + url[len(scheme) :]
    return url


async def live_owners(redis_url: str) -> set[str]:
    """The conversations whose lease is held in Redis now."""
    client = aioredis.from_url(redis_url, decode_responses=True)
    try:
        return {key[len(LEASE) :] async for key in client.scan_iter(match=f"{LEASE}*")}
    finally:
        await client.aclose()


async def check(
    database_url: str,
    *,
    owned: Collection[str] | None = None,
    redis_url: str | None = None,
    allow_suspended: bool = False,
) -> list[str]:
    """The violations (see the module docstring); empty: everything holds."""
    result = await report(
        database_url,
        owned=owned,
        redis_url=redis_url,
        allow_suspended=allow_suspended,
    )
    for note in result.skipped:
        log.info("invariants: skipped: %s", note)
    return result.violations


async def report(
    database_url: str,
    *,
    owned: Collection[str] | None = None,
    redis_url: str | None = None,
    allow_suspended: bool = False,
) -> Report:
    """`check`, with the notes of the checks it could not make."""
    owners = set(owned or ())
    if redis_url is not None:
        owners |= await live_owners(redis_url)
    connection = await asyncpg.connect(dsn(database_url))
    try:
        async with connection.transaction(isolation="repeatable_read", readonly=True):
            return await _Checker(connection, owners, allow_suspended).run()
    finally:
        await connection.close()


async def notes_by_text(database_url: str) -> dict[str, int]:
    """How many notes (all owners) hold each text."""
    connection = await asyncpg.connect(dsn(database_url))
    try:
        rows = await connection.fetch(
            "SELECT text, count(*) AS n FROM notes GROUP BY text"
        )
    finally:
        await connection.close()
    return {row["text"]: int(row["n"]) for row in rows}


class _Checker:
    def __init__(
        self, connection: asyncpg.Connection, owners: set[str], allow_suspended: bool
    ) -> None:
        self.db = connection
        self.owners = owners
        self.allow_suspended = allow_suspended
        self.out = Report()
        self.columns: set[tuple[str, str]] = set()

    def bad(self, text: str) -> None:
        self.out.violations.append(text)

    def has(self, check: str, *columns: str) -> bool:
        """Whether every `table.column` exists; else note `check` skipped."""
        missing = [c for c in columns if tuple(c.split(".", 1)) not in self.columns]
        if missing:
            self.out.skipped.append(f"{check}: no {', '.join(missing)} yet")
        return not missing

    async def run(self) -> Report:
        rows = await self.db.fetch(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema()"
        )
        self.columns = {(r["table_name"], r["column_name"]) for r in rows}
        epochs = await self._conversation_epochs()
        await self._frames(epochs)
        await self._runs(epochs)
        await self._notes()
        return self.out

    async def _conversation_epochs(self) -> dict[str, int | None]:
        if self.has("epochs above the conversation's", "conversations.epoch"):
            rows = await self.db.fetch("SELECT id, epoch FROM conversations")
            # a clean let-go stores the epoch negated: its size is the ceiling
            return {r["id"]: abs(r["epoch"]) for r in rows}
        rows = await self.db.fetch("SELECT id FROM conversations")
        return {r["id"]: None for r in rows}

    async def _frames(self, epochs: dict[str, int | None]) -> None:
        duplicates = await self.db.fetch(
            "SELECT conversation_id, seq, count(*) AS n FROM frames "
            "GROUP BY conversation_id, seq HAVING count(*) > 1"
        )
        for row in duplicates:
            self.bad(
                f"frames: conversation {row['conversation_id']} has {row['n']} "
                f"frames with seq {row['seq']}"
            )
        epoch = "epoch" if self.has("frame epochs", "frames.epoch") else "NULL"
        rows = await self.db.fetch(
            f"SELECT conversation_id, seq, run_id, text, {epoch} AS epoch FROM frames "
            "ORDER BY conversation_id, seq"
        )
        previous: tuple[str, int, int] | None = None  # conversation, seq, epoch
        for row in rows:
            cid, seq = row["conversation_id"], row["seq"]
            where = f"frames: conversation {cid} seq {seq}"
            self._frame_text(where, row)
            frame_epoch = row["epoch"]
            if frame_epoch is None:
                continue
            ceiling = epochs.get(cid)
            if ceiling is not None and frame_epoch > ceiling:
                self.bad(
                    f"{where}: epoch {frame_epoch} above its conversation's {ceiling}"
                )
            if (
                previous is not None
                and previous[0] == cid
                and frame_epoch < previous[2]
            ):
                self.bad(
                    f"{where}: epoch {frame_epoch} after seq {previous[1]}'s "
                    f"epoch {previous[2]} (a deposed owner wrote after its successor)"
                )
            previous = (cid, seq, frame_epoch)

    def _frame_text(self, where: str, row: asyncpg.Record) -> None:
        try:
            envelope = json.loads(row["text"])
        except ValueError as exc:
            self.bad(f"{where}: its text is not JSON ({exc})")
            return
        if not isinstance(envelope, dict):
            self.bad(f"{where}: its text is not a JSON object")
            return
        expected = {
            "seq": row["seq"],
            "session_id": row["conversation_id"],
            "run_id": row["run_id"],
        }
        for name, value in expected.items():
            if envelope.get(name) != value:
                self.bad(f"{where}: its text says {name} {envelope.get(name)!r}")

    async def _runs(self, epochs: dict[str, int | None]) -> None:
        epoch = "epoch" if self.has("run epochs", "runs.epoch") else "NULL"
        rows = await self.db.fetch(
            f"SELECT id, conversation_id, status, steps, state, {epoch} AS epoch FROM runs "
            "ORDER BY conversation_id, started_at"
        )
        for row in rows:
            run_id, cid, status = row["id"], row["conversation_id"], row["status"]
            where = f"runs: run {run_id} ({status}, conversation {cid})"
            ceiling = epochs.get(cid)
            if (
                row["epoch"] is not None
                and ceiling is not None
                and row["epoch"] > ceiling
            ):
                self.bad(
                    f"{where}: epoch {row['epoch']} above its conversation's {ceiling}"
                )
            try:
                state = json.loads(row["state"])
            except ValueError as exc:
                self.bad(f"{where}: its checkpoint is not JSON ({exc})")
                continue
            if not isinstance(state, dict):
                self.bad(f"{where}: its checkpoint is not a JSON object")
                continue
            if state.get("step") != row["steps"]:
                self.bad(
                    f"{where}: steps {row['steps']}, its checkpoint's step "
                    f"{state.get('step')!r}"
                )
            if status in LIVE_STATUSES:
                self._live(where, cid, status, state)
            else:
                self._final(where, status, state)

    def _live(self, where: str, cid: str, status: str, state: dict[str, Any]) -> None:
        if cid in self.owners:
            return
        pending = state.get("pending_question") or state.get("pending_approval")
        if status == "waiting" and pending:
            return
        if status == "suspended" and self.allow_suspended:
            return
        if status == "waiting":
            self.bad(f"{where}: nobody owns it and its checkpoint waits for nothing")
        else:
            self.bad(f"{where}: nobody owns it, yet it is not over")

    def _final(self, where: str, status: str, state: dict[str, Any]) -> None:
        reasons = FINAL_REASONS.get(status)
        if reasons is None:
            self.bad(f"{where}: unknown status")
            return
        ending = state.get("ending")
        if not isinstance(ending, dict):
            if state.get("phase") != "ending":
                self.bad(
                    f"{where}: over, but its checkpoint has no ending "
                    f"(phase {state.get('phase')!r})"
                )
            return
        if ending.get("reason") not in reasons:
            self.bad(f"{where}: its checkpoint ends with {ending.get('reason')!r}")

    async def _notes(self) -> None:
        if not self.has("note keys", "notes.key"):
            return
        rows = await self.db.fetch(
            "SELECT key, count(*) AS n FROM notes WHERE key IS NOT NULL "
            "GROUP BY key HAVING count(*) > 1"
        )
        for row in rows:
            self.bad(f"notes: {row['n']} notes with the key {row['key']!r}")
        if not self.has("notes' effects", "tool_effects.key"):
            return
        rows = await self.db.fetch(
            "SELECT n.key FROM notes n LEFT JOIN tool_effects e ON e.key = n.key "
            "WHERE n.key IS NOT NULL AND e.key IS NULL ORDER BY n.key"
        )
        for row in rows:
            self.bad(f"notes: the note with the key {row['key']!r} has no tool effect")
