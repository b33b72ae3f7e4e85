"""`SqlStore`: the `Store` on SQLAlchemy's asyncio engine, SQLite or
PostgreSQL (`engine.py`). Each method takes its turn on the database (a
transaction to write, a connection to read) and runs the statements of
its part: `sql_conversations`, `writes` (a flush, the fence, tool
effects), `sql_files`, `sql_notes`, `sql_identity`. `open()` applies the
migrations.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import Callable, Collection, Coroutine, Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError

from backend.aio import finished
from backend.budget import Spent
from backend.store import (
    sql_branches,
    sql_conversations,
    sql_files,
    sql_grants,
    sql_identity,
    sql_notes,
    sql_search,
    sql_shares,
    sql_spending,
    sql_user_settings,
    writes,
)
from backend.store.base import Batch, EffectKey, Loaded, StoreError
from backend.store.engine import Database, failing
from backend.store.group_commit import GroupCommit
from backend.store.records import (
    BranchRecord,
    ConversationRecord,
    FileRecord,
    NoteRecord,
    Page,
    RunRecord,
)
from backend.store.rows import decode_cursor
from backend.store.search import SearchHit
from backend.store.share_records import ShareRecord
from backend.store.usage_records import SpendingRow, SpendingTotals
from backend.store.user_records import SignInRecord, ToolGrantRecord, UsageRecord
from backend.telemetry.metrics import NO_METRICS, Metrics
from backend.transcript import Frame, Message


class SqlStore:
    def __init__(self, url: str) -> None:
        self.url = url
        self._db = Database(url)
        self._engine = self._db.engine
        self._statements = writes.Statements(self._db.dialect)
        self._group = GroupCommit(self.write_all)
        """Runs' checkpoints written together while a commit is under way."""
        self.metrics: Metrics = NO_METRICS
        """Where the time of each write of conversations is counted."""

    async def open(self) -> None:
        async with failing("cannot open the database"):
            await self._db.upgrade()

    async def close(self) -> None:
        await self._db.dispose()

    async def revision(self) -> str | None:
        return await self._db.revision()

    # ------------------------------------------------------------ conversations

    async def create_conversation(self, record: ConversationRecord) -> None:
        async with self._db.begin() as conn:
            await sql_conversations.create(conn, record)

    async def take(
        self, conversation_id: str, *, max_frame_bytes: int
    ) -> Loaded | None:
        async with (
            failing(f"cannot load conversation {conversation_id}"),
            self._db.begin() as conn,
        ):
            return await sql_conversations.take(
                conn, self._statements, conversation_id, max_frame_bytes
            )

    async def conversation(self, conversation_id: str) -> ConversationRecord | None:
        async with self._db.connect() as conn:
            return await sql_conversations.conversation(conn, conversation_id)

    async def conversations(
        self,
        owner: str,
        *,
        limit: int,
        cursor: str | None = None,
        origins: Collection[str] | None = None,
    ) -> Page:
        after = None if cursor is None else decode_cursor(cursor)
        async with self._db.connect() as conn:
            return await sql_conversations.page(conn, owner, limit, after, origins)

    async def search(self, owner: str, text: str, *, limit: int) -> list[SearchHit]:
        postgresql = self._db.dialect == "postgresql"
        async with failing("cannot search conversations"), self._db.connect() as conn:
            return await sql_search.search(
                conn, owner, text, limit, postgresql=postgresql
            )

    async def rename_conversation(self, conversation_id: str, title: str) -> bool:
        async with self._db.begin() as conn:
            return await sql_conversations.rename(conn, conversation_id, title)

    async def delete_conversation(self, conversation_id: str) -> bool:
        async with self._db.begin() as conn:
            await sql_grants.forget_conversation(conn, conversation_id)
            return await sql_conversations.remove(conn, conversation_id)

    # ------------------------------------------------------------ contents

    async def messages(self, conversation_id: str) -> list[Message]:
        async with self._db.connect() as conn:
            return await sql_conversations.history(conn, conversation_id)

    async def runs(self, conversation_id: str) -> list[RunRecord]:
        async with self._db.connect() as conn:
            return await sql_conversations.runs_of(conn, conversation_id)

    async def branches(self, conversation_id: str) -> list[BranchRecord]:
        async with self._db.connect() as conn:
            return await sql_branches.branches_of(conn, conversation_id)

    async def branch(
        self, conversation_id: str, branch_id: str
    ) -> tuple[BranchRecord, list[RunRecord], list[Frame]] | None:
        async with self._db.connect() as conn:
            record = await sql_branches.branch(conn, conversation_id, branch_id)
            if record is None:
                return None
            runs = await sql_branches.runs_in(conn, conversation_id, branch_id)
            ids = [run.id for run in runs]
            frames = await sql_branches.frames_of(conn, conversation_id, ids)
            return record, runs, frames

    async def live_runs(
        self, conversation_id: str | None = None, *, parked: bool = True
    ) -> list[RunRecord]:
        async with self._db.connect() as conn:
            return await sql_conversations.live_runs(conn, conversation_id, parked)

    async def live_conversations(self, *, parked: bool = True) -> list[str]:
        async with self._db.connect() as conn:
            return await sql_conversations.live_conversations(conn, parked)

    async def frames(self, conversation_id: str, *, max_bytes: int) -> list[Frame]:
        async with self._db.connect() as conn:
            return await sql_conversations.last_frames(conn, conversation_id, max_bytes)

    async def last_seq(self, conversation_id: str) -> int:
        async with self._db.connect() as conn:
            return await sql_conversations.last_seq(conn, conversation_id)

    # ------------------------------------------------------------ writes

    async def write(self, batch: Batch) -> None:
        await self._group.write(batch)

    async def write_all(self, batches: Sequence[Batch]) -> None:
        if not batches:
            return
        names = ", ".join(b.conversation_id for b in batches[:3])
        more = f" and {len(batches) - 3} more" if len(batches) > 3 else ""
        started = time.perf_counter()
        async with failing(f"cannot save conversation {names}{more}"):
            await self._db.transact(writes.write, self._statements, batches)
        self.metrics.store_flush(time.perf_counter() - started)

    async def release(self, held: Sequence[tuple[str, int]]) -> None:
        if not held:
            return
        rows = [{"cid": cid, "held": epoch} for cid, epoch in held]
        async with (
            failing(f"cannot release {len(rows)} conversations"),
            self._db.begin() as conn,
        ):
            await conn.execute(self._statements.release, rows)

    async def effect(self, key: str) -> str | None:
        async with (
            failing(f"cannot read tool effect {key!r}"),
            self._db.connect() as conn,
        ):
            return await writes.effect_done(conn, key)

    # ------------------------------------------------------------ files

    async def add_file(
        self,
        record: FileRecord,
        *,
        limit: int,
        quota: int | None = None,
        effect: EffectKey | None = None,
    ) -> FileRecord:
        async with (
            failing(f"cannot keep file {record.name!r}"),
            self._db.begin() as conn,
        ):
            if effect is not None:
                done = await sql_files.file(conn, record.conversation_id, record.id)
                if done is not None:  # made before under this key
                    return done
            postgresql = self._db.dialect == "postgresql"
            await sql_files.add_file(conn, record, limit, quota, postgresql=postgresql)
            if effect is not None:
                made = record.model_dump_json()
                await writes.record_effect(
                    conn, self._statements, effect, made, record.created_at
                )
            return record

    async def file_bytes(self, owner: str) -> int:
        async with (
            failing(f"cannot count the files of {owner!r}"),
            self._db.connect() as conn,
        ):
            return await sql_files.file_bytes(conn, owner)

    async def referenced_blobs(self, digests: Collection[str]) -> set[str]:
        wanted = set(digests)
        if not wanted:
            return set()
        async with (
            failing("cannot list the files' contents"),
            self._db.connect() as conn,
        ):
            return await sql_files.referenced(conn, wanted)

    async def files(self, conversation_id: str) -> list[FileRecord]:
        async with self._db.connect() as conn:
            return await sql_files.files_of(conn, conversation_id)

    async def file(self, conversation_id: str, file_id: str) -> FileRecord | None:
        async with self._db.connect() as conn:
            return await sql_files.file(conn, conversation_id, file_id)

    # ------------------------------------------------------------ notes

    async def add_note(
        self,
        owner: str,
        text: str,
        saved_at: float,
        *,
        limit: int,
        effect: EffectKey | None = None,
    ) -> NoteRecord:
        async with failing("cannot save the note"):
            for _attempt in range(3):  # two writers may pick the same number or key
                with contextlib.suppress(IntegrityError):
                    async with self._db.begin() as conn:
                        return await sql_notes.add_note(
                            conn, self._statements, owner, text, saved_at, limit, effect
                        )
        raise StoreError("could not number the note; try again")

    async def notes(self, owner: str) -> list[NoteRecord]:
        async with self._db.connect() as conn:
            return await sql_notes.notes_of(conn, owner)

    async def delete_note(
        self, owner: str, note_id: int, *, effect: EffectKey | None = None
    ) -> NoteRecord | None:
        async with failing("cannot delete the note"), self._db.begin() as conn:
            return await sql_notes.delete_note(
                conn, self._statements, owner, note_id, effect
            )

    # ------------------------------------------------------------ sign-ins

    async def add_signin(self, record: SignInRecord, *, forget_before: float) -> None:
        async with failing("cannot keep the sign-in"), self._db.begin() as conn:
            await sql_identity.add_signin(conn, record, forget_before)

    async def signin(self, signin_id: str) -> SignInRecord | None:
        async with failing("cannot read a sign-in"), self._db.connect() as conn:
            return await sql_identity.signin(conn, signin_id)

    async def live_signins(
        self, now: float, *, user: str | None = None, limit: int = 1000
    ) -> list[SignInRecord]:
        async with failing("cannot list sign-ins"), self._db.connect() as conn:
            return await sql_identity.live_signins(conn, now, user, limit)

    async def revoke_signin(self, signin_id: str, at: float) -> SignInRecord | None:
        async with failing("cannot revoke a sign-in"), self._db.begin() as conn:
            done = await sql_identity.revoke(conn, at, signin_id=signin_id, user=None)
        return done[0] if done else None

    async def revoke_signins(self, user: str, at: float) -> list[str]:
        async with failing("cannot revoke sign-ins"), self._db.begin() as conn:
            done = await sql_identity.revoke(conn, at, signin_id=None, user=user)
        return [record.id for record in done]

    async def touch_signin(self, signin_id: str, at: float) -> None:
        async with failing("cannot note a sign-in's use"), self._db.begin() as conn:
            await sql_identity.touch(conn, signin_id, at)

    async def usage(self) -> list[UsageRecord]:
        async with failing("cannot count usage"), self._db.connect() as conn:
            return await sql_identity.usage(conn)

    # ------------------------------------------------------------ the usage ledger

    async def spent_since(self, owner: str, since: float) -> Spent:
        async with failing("cannot count what was spent"), self._db.connect() as conn:
            return await sql_spending.spent_since(conn, owner, since)

    async def spending(
        self, owner: str | None, since: float, until: float
    ) -> list[SpendingRow]:
        async with failing("cannot count what was spent"), self._db.connect() as conn:
            return await sql_spending.spending(conn, owner, since, until)

    async def conversation_spending(self, conversation_id: str) -> SpendingTotals:
        async with failing("cannot count what was spent"), self._db.connect() as conn:
            return await sql_spending.conversation_spending(conn, conversation_id)

    # ------------------------------------------------------------ tool grants

    async def tool_grants(self, user: str) -> list[ToolGrantRecord]:
        async with failing("cannot read tool grants"), self._db.connect() as conn:
            return await sql_grants.grants(conn, user)

    async def add_tool_grant(self, record: ToolGrantRecord) -> None:
        async with failing("cannot keep the tool grant"), self._db.begin() as conn:
            await sql_grants.add(conn, record)

    async def revoke_tool_grant(
        self, user: str, grant_id: str
    ) -> ToolGrantRecord | None:
        async with failing("cannot revoke the tool grant"), self._db.begin() as conn:
            return await sql_grants.revoke(conn, user, grant_id)

    # ------------------------------------------------------------ instructions

    async def user_instructions(self, user: str) -> str:
        async with failing("cannot read instructions"), self._db.connect() as conn:
            return await sql_user_settings.user_instructions(conn, user)

    async def set_user_instructions(self, user: str, text: str, at: float) -> None:
        async with failing("cannot keep instructions"), self._db.begin() as conn:
            await sql_user_settings.set_user_instructions(conn, user, text, at)

    async def set_conversation_instructions(
        self, conversation_id: str, text: str
    ) -> bool:
        async with failing("cannot keep instructions"), self._db.begin() as conn:
            return await sql_user_settings.set_conversation_instructions(
                conn, conversation_id, text
            )

    async def run_instructions(
        self, user: str, conversation_id: str
    ) -> tuple[str, str]:
        async with failing("cannot read instructions"):
            return await self._db.read(
                sql_user_settings.run_instructions, user, conversation_id
            )

    # ------------------------------------------------------------ shares

    async def add_share(self, record: ShareRecord) -> None:
        async with failing("cannot keep the share"), self._db.begin() as conn:
            await sql_shares.add(conn, record)

    async def share(self, share_id: str) -> ShareRecord | None:
        async with failing("cannot read a share"), self._db.connect() as conn:
            return await sql_shares.share(conn, share_id)

    async def shares(self, conversation_id: str) -> list[ShareRecord]:
        async with failing("cannot list shares"), self._db.connect() as conn:
            return await sql_shares.of_conversation(conn, conversation_id)

    async def delete_share(self, share_id: str, owner: str) -> bool:
        async with failing("cannot delete the share"), self._db.begin() as conn:
            return await sql_shares.remove(conn, share_id, owner)

    # ------------------------------------------------------------ for tests

    async def run_sync(self, fn: Any) -> Any:
        """Run `fn(sync_connection)` in a transaction (migration tests)."""
        async with self._db.begin() as conn:
            return await conn.run_sync(fn)


def _whole(method: Callable[..., Coroutine[Any, Any, Any]]) -> Any:
    @functools.wraps(method)
    async def whole(self: SqlStore, *args: Any, **kwargs: Any) -> Any:
        return await finished(method(self, *args, **kwargs))

    return whole


for _name, _method in list(vars(SqlStore).items()):
    if inspect.iscoroutinefunction(_method) and not _name.startswith("_"):
        setattr(SqlStore, _name, _whole(_method))
"""Every call of the store runs to its end, a cancelled caller's too
(`aio.finished`): a transaction cut inside a statement would leave its
connection, thrown away, holding the database's locks."""
