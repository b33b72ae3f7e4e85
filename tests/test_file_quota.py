"""The per-user quota on files (`LOOPWIRE_MAX_FILE_BYTES_PER_USER`): an
upload or an artifact past it is refused, before its body is read when its
length says so; concurrent uploads do not overshoot it, on one instance or
several (the store is the referee); the issue's figure, scaled down."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import sqlalchemy as sa

from backend.store.base import QuotaExceeded
from backend.store.records import ConversationRecord, FileRecord
from backend.store.sql import SqlStore
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason
from tests.test_files import AS_ALICE, AS_BOB, live, upload, users
from tests.ws_client import label

KiB = 1024
MiB = 1024 * KiB
ADVICE = "delete conversations whose files you no longer need"


def text(size: int, mark: str = "") -> bytes:
    """`size` bytes of text, starting with `mark` (distinct content)."""
    return (mark + "x" * size)[:size].encode()


def blobs_on_disk(files_dir: Path) -> dict[str, int]:
    """The blobs under `files_dir`: name → size (leftovers not counted)."""
    return {
        path.name: path.stat().st_size
        for path in files_dir.glob("??/*")
        if not path.name.startswith(".")
    }


async def test_an_upload_past_the_quota_is_refused_and_another_users_is_not(
    start_server: StartServer, tmp_path: Path
) -> None:
    """An upload past a user's quota gets 413 and is not stored; other users may."""
    harness = await start_server(
        ScriptedLLM(),
        auth_tokens_file=users(tmp_path),
        max_file_bytes_per_user=10 * KiB,
        files_dir=tmp_path / "files",
    )
    _, alices = await live(harness, AS_ALICE)
    _, bobs = await live(harness, AS_BOB)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        kept = [
            await upload(http, alices, f"{n}.txt", text(4 * KiB, n), headers=AS_ALICE)
            for n in "ab"
        ]
        refused = await upload(
            http, alices, "c.txt", text(4 * KiB, "c"), headers=AS_ALICE
        )
        bob = await upload(http, bobs, "c.txt", text(4 * KiB, "bob"), headers=AS_BOB)
        listed = await http.get(f"/api/conversations/{alices}/files", headers=AS_ALICE)
    assert [r.status_code for r in kept] == [201, 201]
    assert (refused.status_code, refused.json()) == (
        413,
        {
            "error_type": "quota_exceeded",
            "message": "'c.txt' (4 KiB) would take your files past your quota: "
            f"8 KiB of 10 KiB used; {ADVICE}",
        },
    )
    assert bob.status_code == 201, bob.text
    assert [f["name"] for f in listed.json()["items"]] == ["a.txt", "b.txt"]
    # the refused file's content was never written
    assert sorted(blobs_on_disk(tmp_path / "files").values()) == [4 * KiB] * 3
    assert await harness.server.app.state.store.file_bytes("alice") == 8 * KiB


async def test_a_body_that_cannot_fit_is_refused_before_it_is_read(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A declared length past the room left is answered before the body
    comes; a body streamed without one is cut off at the room left."""
    harness = await start_server(
        ScriptedLLM(),
        max_file_bytes=200 * KiB,
        max_file_bytes_per_user=100 * KiB,
        files_dir=tmp_path / "files",
    )
    _, conversation = await live(harness)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        first = await upload(http, conversation, "a.txt", text(90 * KiB))
    assert first.status_code == 201, first.text

    host, port = harness.server.url("").removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    declared = 150 * KiB
    writer.write(
        (
            f"POST /api/conversations/{conversation}/files HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\n"
            "Content-Type: multipart/form-data; boundary=b\r\n"
            f"Content-Length: {declared}\r\n\r\n"
            '--b\r\nContent-Disposition: form-data; name="file"; '
            'filename="b.txt"\r\n\r\n'
        ).encode()
    )  # and nothing more: the rest never comes
    await writer.drain()
    status, *headers = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
    length = next(
        int(h.split(":")[1]) for h in headers if h.lower().startswith("content-length")
    )
    body = json.loads(await reader.readexactly(length))
    writer.close()
    assert status == "HTTP/1.1 413 Request Entity Too Large"
    assert body == {
        "error_type": "quota_exceeded",
        "message": "the upload (150 KiB) would take your files past your quota: "
        f"90 KiB of 100 KiB used; {ADVICE}",
    }

    async def chunks() -> Any:
        yield b'--b\r\nContent-Disposition: form-data; name="file"; '
        yield b'filename="b.txt"\r\n\r\n'
        for _ in range(150):
            yield b"x" * KiB

    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        streamed = await http.post(
            f"/api/conversations/{conversation}/files",
            content=chunks(),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )
        listed = await http.get(f"/api/conversations/{conversation}/files")
    assert (streamed.status_code, streamed.json()) == (
        413,
        {
            "error_type": "quota_exceeded",
            "message": "the upload (over 10 KiB) would take your files past your "
            f"quota: 90 KiB of 100 KiB used; {ADVICE}",
        },
    )
    assert [f["name"] for f in listed.json()["items"]] == ["a.txt"]


async def test_an_artifact_past_the_quota_is_a_tool_error_the_model_sees(
    start_server: StartServer, tmp_path: Path
) -> None:
    """A `write_file` past the quota fails as a tool error the model sees."""
    llm = ScriptedLLM(
        reason("Write the report.", tools=["write_file"]),
        calls(("write_file", {"name": "report.md", "content": "x" * 3000})),
        observe("it could not be written", should_continue=False, final="No room."),
    )
    harness = await start_server(
        llm, max_file_bytes_per_user=4 * KiB, files_dir=tmp_path / "files"
    )
    client, conversation = await live(harness)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        added = await upload(http, conversation, "notes.txt", text(2 * KiB))
    assert added.status_code == 201, added.text
    assert label(await client.recv()) == "files_update"

    await client.send(type="chat", content="write a report", agent_mode=True)
    frames = await client.until_label("tool_approval_request:write_file")
    await client.send(
        type="tool_approval_response",
        tool_call_id=frames[-1]["tool_call_id"],
        approved=True,
    )
    frames += await client.run()
    refusal = (
        "'report.md' (2.9 KiB) would take your files past your quota: "
        f"2 KiB of 4 KiB used; {ADVICE}"
    )
    [failed] = [f for f in frames if f["type"] == "tool_error"]
    assert (failed["tool_name"], failed["error"]) == ("write_file", refusal)
    assert [f for f in frames if f["type"] == "files_update"] == []
    [observed] = [r for r in llm.requests if r.purpose == "observe"]
    [result] = [m for m in observed.messages if m.role == "tool"]
    assert refusal in (result.content or "")


async def test_concurrent_uploads_past_the_quota_one_succeeds(
    start_server: StartServer, tmp_path: Path, database_url: str
) -> None:
    """On SQLite and PostgreSQL: two uploads of 6 KiB under a 10 KiB quota,
    sent at once; one is kept, one refused, and one content is on disk."""
    harness = await start_server(
        ScriptedLLM(),
        database_url=database_url,
        max_file_bytes_per_user=10 * KiB,
        files_dir=tmp_path / "files",
    )
    conversations = [(await live(harness))[1] for _ in range(2)]
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        answers = await asyncio.gather(
            *(
                upload(http, c, f"{n}.txt", text(6 * KiB, str(n)))
                for n, c in enumerate(conversations)
            )
        )
    assert sorted(a.status_code for a in answers) == [201, 413]
    [refused] = [a.json() for a in answers if a.status_code == 413]
    assert refused["error_type"] == "quota_exceeded"
    assert list(blobs_on_disk(tmp_path / "files").values()) == [6 * KiB]
    assert await harness.server.app.state.store.file_bytes("local") == 6 * KiB


def file_record(fid: str, conversation_id: str, size: int) -> FileRecord:
    return FileRecord(
        id=fid,
        conversation_id=conversation_id,
        name=f"{fid}.txt",
        media_type="text/plain",
        size=size,
        sha256=fid * 64,
        origin="upload",
        created_at=time.time(),
    )


def watch_statements(stores: list[SqlStore]) -> asyncio.Event:
    """Set once every store has sent its quota lock or its file's insert:
    its sum is read, or it waits its turn to read it."""
    sent: set[int] = set()
    every = asyncio.Event()

    def noted(number: int) -> Any:
        def before(*args: Any) -> None:
            statement: str = args[2]
            if "pg_advisory_xact_lock" in statement or statement.startswith(
                "INSERT INTO files"
            ):
                sent.add(number)
                if len(sent) == len(stores):
                    every.set()

        return before

    for number, store in enumerate(stores):
        sa.event.listen(
            store._engine.sync_engine, "before_cursor_execute", noted(number)
        )
    return every


async def test_two_instances_cannot_both_take_the_last_room(
    pg_database_url: str,
) -> None:
    """Two stores (as two instances would have) add a file of one owner's
    each, under a quota both fit in alone but not together. The files
    table is held locked until both have sent their quota lock or their
    insert: without the owner's lock both sums would read 0 and both
    inserts go through once it is let go. One file is kept, one refused."""
    first, second = SqlStore(pg_database_url), SqlStore(pg_database_url)
    await first.open()
    await second.open()
    admin = await asyncpg.connect(
        pg_database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
    )
    try:
        for cid in ("c1", "c2"):
            await first.create_conversation(
                ConversationRecord(id=cid, owner="ann", created_at=1, updated_at=1)
            )
        both_sent = watch_statements([first, second])
        await admin.execute("BEGIN; LOCK TABLE files IN SHARE MODE")
        adding = [
            asyncio.create_task(
                store.add_file(file_record(fid, cid, 6 * KiB), limit=10, quota=10 * KiB)
            )
            for store, fid, cid in ((first, "a", "c1"), (second, "b", "c2"))
        ]
        await both_sent.wait()
        await admin.execute("COMMIT")
        outcomes = await asyncio.gather(*adding, return_exceptions=True)
    finally:
        await admin.close()
        await first.close()
        await second.close()
    kept = [o for o in outcomes if isinstance(o, FileRecord)]
    refused = [o for o in outcomes if isinstance(o, QuotaExceeded)]
    assert (len(kept), len(refused)) == (1, 1), outcomes
    assert (refused[0].used, refused[0].quota) == (6 * KiB, 10 * KiB)


@pytest.mark.parametrize("at_once", [True, False])
async def test_300_mib_under_a_100_mib_quota_scaled_down(
    start_server: StartServer, tmp_path: Path, at_once: bool
) -> None:
    """The issue's figure, at a hundredth of a hundredth: 30 uploads of
    100 KiB (300 MiB in 3.6 s there) into three conversations under a 1 MiB
    quota, all at once or one after another. Ten are kept, twenty refused,
    and the disk holds the ten."""
    harness = await start_server(
        ScriptedLLM(),
        max_file_bytes=100 * KiB,
        max_file_bytes_per_user=1 * MiB,
        files_dir=tmp_path / "files",
    )
    conversations = [(await live(harness))[1] for _ in range(3)]
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        sends = [
            upload(http, conversations[n % 3], f"{n}.txt", text(100 * KiB, f"{n}-"))
            for n in range(30)
        ]
        if at_once:
            answers = await asyncio.gather(*sends)
        else:
            answers = [await send for send in sends]
    statuses = [a.status_code for a in answers]
    assert (statuses.count(201), statuses.count(413)) == (10, 20)
    assert {a.json()["error_type"] for a in answers if a.status_code == 413} == {
        "quota_exceeded"
    }
    on_disk = blobs_on_disk(tmp_path / "files")
    assert (len(on_disk), sum(on_disk.values())) == (10, 10 * 100 * KiB)
    assert sum(on_disk.values()) <= 1 * MiB
    assert await harness.server.app.state.store.file_bytes("local") == 1000 * KiB
    assert len(harness.server.app.state.files._owners) == 0  # no lock left behind
