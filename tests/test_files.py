"""A conversation's files: upload and download with ownership, every
refusal, `files_update` to the session that shows the conversation, the
manifest in the reason prompt, and the `read_file` / `write_file` tools."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.files.kinds import clean_name
from tests.conftest import Harness, StartServer
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.fakes import ScriptedLLM, calls, observe, reason
from tests.pdf_files import pdf_bytes
from tests.server_process import server_process
from tests.ws_client import Client, label, labels

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"
AS_ALICE = {"Authorization": f"Bearer {ALICE}"}
AS_BOB = {"Authorization": f"Bearer {BOB}"}
CSV = b"city,population\nOslo,709000\nBergen,291000\n"


def users(tmp_path: Path) -> Path:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice: {ALICE}\nbob: {BOB}\n")
    tokens.chmod(0o600)
    return tokens


async def live(
    harness: Harness, headers: dict[str, str] | None = None
) -> tuple[Client, str]:
    """A connected client and its (not yet stored) conversation's id."""
    client, ready = await harness.ready_client(**(headers or {}))
    return client, str(ready["session_id"])


def upload(
    http: httpx.AsyncClient,
    conversation: str,
    name: str,
    content: bytes,
    *,
    headers: dict[str, str] | None = None,
    **fields: str,
) -> Any:
    return http.post(
        f"/api/conversations/{conversation}/files",
        files={"file": (name, content)},
        data=fields,
        headers=headers,
    )


async def test_upload_list_and_download_for_the_owner_only(
    start_server: StartServer, tmp_path: Path
) -> None:
    """An upload is cleaned, announced and served to its owner, and a 404 to others."""
    harness = await start_server(ScriptedLLM(), auth_tokens_file=users(tmp_path))
    client, conversation = await live(harness, AS_ALICE)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        response = await upload(
            http,
            conversation,
            "../../etc/.cities.csv",
            CSV,
            headers=AS_ALICE,
            description="Two cities",
        )
        assert response.status_code == 201, response.text
        added = response.json()
        assert {k: added[k] for k in ("name", "media_type", "size", "origin")} == {
            "name": "cities.csv",  # the path and the leading dot are gone
            "media_type": "text/csv",
            "size": len(CSV),
            "origin": "upload",
        }
        assert added["description"] == "Two cities"

        # the live session that shows the conversation hears of it
        update = await client.recv()
        assert (update["type"], update["added"]) == ("files_update", [added["id"]])
        assert update["files"] == [added]

        base = f"/api/conversations/{conversation}/files"
        listed = await http.get(base, headers=AS_ALICE)
        assert listed.json() == {"items": [added]}
        got = await http.get(f"{base}/{added['id']}", headers=AS_ALICE)
        assert got.content == CSV
        assert got.headers["content-type"] == "text/csv; charset=utf-8"
        assert got.headers["content-disposition"] == (
            "attachment; filename=\"cities.csv\"; filename*=UTF-8''cities.csv"
        )
        assert got.headers["content-security-policy"].startswith("sandbox")
        assert got.headers["x-content-type-options"] == "nosniff"

        # kept by content, under the files folder, never by the client's name
        digest = hashlib.sha256(CSV).hexdigest()
        files_dir = harness.server.app.state.settings.files_dir
        assert (files_dir / digest[:2] / digest).read_bytes() == CSV

        for attempt in (
            await http.get(base, headers=AS_BOB),
            await http.get(f"{base}/{added['id']}", headers=AS_BOB),
            await upload(http, conversation, "x.txt", b"x", headers=AS_BOB),
            await http.get(f"{base}/nope", headers=AS_ALICE),
        ):
            assert attempt.status_code == 404, attempt.text
            assert attempt.json()["error_type"] == "not_found"


async def test_a_file_name_with_other_scripts_is_kept_and_quoted(
    start_server: StartServer,
) -> None:
    """A non-ASCII file name is kept and sent with an ASCII fallback and UTF-8 form."""
    harness = await start_server(ScriptedLLM())
    _, conversation = await live(harness)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        added = (await upload(http, conversation, "rapport été.md", b"# Hei")).json()
        got = await http.get(f"/api/conversations/{conversation}/files/{added['id']}")
    assert added["name"] == "rapport été.md"
    assert got.headers["content-disposition"] == (
        'attachment; filename="rapport _t_.md"; '
        "filename*=UTF-8''rapport%20%C3%A9t%C3%A9.md"
    )


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("../../etc/passwd", "passwd"),
        ("..\\..\\boot.ini", "boot.ini"),
        ("a\x00b\x07c.txt", "abc.txt"),
        ('what?<is>"this":|*.md', "whatisthis.md"),
        ("   .hidden  name.txt ", "hidden name.txt"),
        ("/", "file"),
        ("x" * 300 + ".csv", "x" * 116 + ".csv"),
        ("ab\u202ecod.exe", "abcod.exe"),
    ],
)
def test_names_are_cleaned(raw: str, clean: str) -> None:
    """Path parts and control, bidi and reserved characters go; long names are cut."""
    assert clean_name(raw) == clean


REFUSALS = [
    ("tool.exe", b"MZ\x90\x00", 415, "files of type .exe are not taken"),
    ("bomb.zip", b"PK\x03\x04" + b"\x00" * 40, 415, "is an archive"),
    ("notes.txt", b"PK\x03\x04zip inside", 415, "is an archive"),
    ("latin1.txt", "café".encode("latin-1"), 415, "is not UTF-8 text"),
    ("nul.txt", b"a\x00b", 415, "is not text (it holds NUL bytes)"),
    ("fake.png", b"GIF89a....", 415, "is not a PNG file"),
    ("fake.pdf", b"hello", 415, "is not a PDF file"),
    ("empty.txt", b"", 415, "is empty"),
    ("big.txt", b"x" * 3000, 413, "the largest file taken is 2048 bytes"),
]


@pytest.mark.parametrize(("name", "content", "status", "reason"), REFUSALS)
async def test_a_refused_file_says_why_and_keeps_nothing(
    start_server: StartServer, name: str, content: bytes, status: int, reason: str
) -> None:
    """A bad, empty or oversized file is refused, saying why, and nothing is kept."""
    harness = await start_server(ScriptedLLM(), max_file_bytes=2048)
    _, conversation = await live(harness)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        response = await upload(http, conversation, name, content)
        listed = await http.get(f"/api/conversations/{conversation}/files")
    assert response.status_code == status
    assert response.json()["error_type"] == "invalid_message"
    assert reason in response.json()["message"]
    assert listed.json() == {"items": []}


async def test_the_form_and_the_count_are_bounded(start_server: StartServer) -> None:
    """Bad or oversized upload forms are refused; files per conversation are capped."""
    harness = await start_server(
        ScriptedLLM(), max_file_bytes=2048, max_files_per_conversation=2
    )
    _, conversation = await live(harness)
    base = f"/api/conversations/{conversation}/files"
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        as_json = await http.post(base, json={"file": "x"})
        two = await http.post(
            base, files=[("file", ("a.txt", b"a")), ("file", ("b.txt", b"b"))]
        )
        field = await http.post(base, files={"file": (None, "not a file")})
        extra = await http.post(
            base, files={"file": ("a.txt", b"a")}, data={"path": "/etc"}
        )
        # declared too large: refused before the body is read
        declared = await http.post(
            base,
            content=b"x" * (2048 + 64 * 1024 + 1),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )

        # streamed past the limit without saying how large
        async def chunks() -> Any:
            yield b'--b\r\nContent-Disposition: form-data; name="file"; '
            yield b'filename="a.txt"\r\n\r\n'
            for _ in range(100):
                yield b"x" * 1024

        streamed = await http.post(
            base,
            content=chunks(),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )
        kept = [await upload(http, conversation, f"{n}.txt", b"n") for n in "ab"]
        third = await upload(http, conversation, "c.txt", b"c")
        listed = await http.get(base)
    assert (as_json.status_code, as_json.json()["message"]) == (
        415,
        "send the file as multipart/form-data (a `file` part)",
    )
    assert two.status_code == 400 and "Too many files" in two.json()["message"]
    assert (field.status_code, field.json()["message"]) == (
        400,
        "no `file` part in the form",
    )
    assert (extra.status_code, extra.json()["message"]) == (
        400,
        "unknown form field: path",
    )
    assert (declared.status_code, declared.json()["message"]) == (
        413,
        f"the body is {2048 + 64 * 1024 + 1} bytes; a file may have 2048",
    )
    assert (streamed.status_code, streamed.json()["message"]) == (
        413,
        "the file is over 2048 bytes, the limit",
    )
    assert [r.status_code for r in kept] == [201, 201]
    assert (third.status_code, third.json()) == (
        409,
        {
            "error_type": "limit_reached",
            "message": "this conversation has 2 files already, the most it takes",
        },
    )
    assert [f["name"] for f in listed.json()["items"]] == ["a.txt", "b.txt"]


async def test_the_manifest_lists_the_files_and_tools_read_and_write_them(
    start_server: StartServer,
) -> None:
    """Reason prompts list the files, which `read_file` and `write_file` use."""
    llm = ScriptedLLM(
        reason("Read the file.", tools=["read_file"]),
        calls(("read_file", {"file_id": "PLACEHOLDER"})),
        observe("the file has two cities"),
        reason("Write a summary.", tools=["write_file"]),
        calls(
            (
                "write_file",
                {
                    "name": "summary.md",
                    "content": "# Cities\nOslo, Bergen",
                    "description": "The cities, summed up",
                },
            )
        ),
        observe("the summary is written"),
        reason("done", finish=True, final="Done: summary.md"),
    )
    harness = await start_server(llm)  # the default tools, read_file and write_file too
    client, conversation = await live(harness)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        added = (await upload(http, conversation, "cities.csv", CSV)).json()
    assert label(await client.recv()) == "files_update"
    # the scripted call names the uploaded file's id
    llm._steps[1] = calls(("read_file", {"file_id": added["id"]}))

    await client.send(type="chat", content="sum up my file", agent_mode=True)
    frames = await client.until_label("tool_approval_request:write_file")
    await client.send(  # writing asks; the run had read the file: it says so
        type="tool_approval_response",
        tool_call_id=frames[-1]["tool_call_id"],
        approved=True,
    )
    assert frames[-1]["untrusted_sources"] == [
        {"tool_name": "read_file", "step": 1, "origin": "the file cities.csv"}
    ]
    frames += await client.run()
    complete = [f for f in frames if f["type"] == "tool_complete"]
    assert complete[0]["tool_name"] == "read_file"
    assert "Oslo,709000" in complete[0]["result"]["text"]
    [update] = [f for f in frames if f["type"] == "files_update"]
    artifact = update["files"][-1]
    assert update["added"] == [artifact["id"]]
    assert {
        k: artifact[k] for k in ("name", "media_type", "origin", "description")
    } == {
        "name": "summary.md",
        "media_type": "text/markdown",
        "origin": "artifact",
        "description": "The cities, summed up",
    }
    assert artifact["run_id"] == frames[0]["run_id"]

    reasons = [r for r in llm.requests if r.purpose == "reason"]
    first, second, third = (r.messages[-1].content or "" for r in reasons)
    line = f"- `{added['id']}` cities.csv (text/csv, {len(CSV)} bytes)"
    assert line in first and "summary.md" not in first
    assert line in second and line in third
    assert (
        f"- `{artifact['id']}` summary.md (text/markdown, 21 bytes, made by a tool): "
        "The cities, summed up" in third
    )
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        got = await http.get(
            f"/api/conversations/{conversation}/files/{artifact['id']}"
        )
    assert got.content == b"# Cities\nOslo, Bergen"


async def test_a_missing_file_is_a_tool_error_naming_the_files(
    start_server: StartServer,
) -> None:
    """`read_file` on an unknown id fails, listing the files the conversation has."""
    llm = ScriptedLLM(
        reason("Read it.", tools=["read_file"]),
        calls(("read_file", {"file_id": "nope"})),
        observe(should_continue=False, final="No such file."),
    )
    harness = await start_server(llm)
    client, _ = await live(harness)
    frames = await client.chat("read nope", agent_mode=True)
    [failed] = [f for f in frames if f["type"] == "tool_error"]
    assert failed["error"] == "this conversation has no file 'nope'; files: none"


async def test_an_upload_that_trickles_is_cut_off_in_time(
    start_server: StartServer,
) -> None:
    """An upload that stalls is answered 408 at the upload timeout, keeping nothing."""
    harness = await start_server(ScriptedLLM(), upload_timeout_s=0.5)
    _, conversation = await live(harness)
    host, port = harness.server.url("").removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        f"POST /api/conversations/{conversation}/files HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n"
        "Content-Type: multipart/form-data; boundary=b\r\n"
        "Content-Length: 2000\r\n\r\n"
        '--b\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
    )
    writer.write(head.encode())  # then nothing more: the rest never comes
    await writer.drain()
    head_back = await reader.readuntil(b"\r\n\r\n")  # answered without the rest
    status, *headers = head_back.decode().split("\r\n")
    length = next(
        int(h.split(":")[1]) for h in headers if h.lower().startswith("content-length")
    )
    body = json.loads(await reader.readexactly(length))
    writer.close()
    assert status == "HTTP/1.1 408 Request Timeout"
    assert body == {
        "error_type": "invalid_message",
        "message": "the upload took longer than 0.5 s",
    }
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        listed = await http.get(f"/api/conversations/{conversation}/files")
    assert listed.json() == {"items": []}


def crafted_pdf() -> bytes:
    """6 KB that pypdf needs over ten seconds of CPU to read: one page of
    300,000 one-letter lines, deflated."""
    return pdf_bytes(["\n".join("a" for _ in range(300_000))], compress=True)


async def test_a_crafted_pdf_never_freezes_the_server(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """`read_file` extracts a PDF's text in a worker process, killed at the
    tool's timeout: meanwhile a real server process keeps answering
    /healthz, one request after another, until the tool's timeout is
    reported (it froze for 10.8 s when the text was extracted on the event
    loop, and answered none). No time is asserted: the figures are printed."""
    database = f"sqlite+aiosqlite:///{tmp_path / 'loopwire.db'}"
    content = crafted_pdf()
    assert len(content) < 10_000
    async with (
        server_process(
            database, llm_base_url=fake_openai.base_url, tool_timeout_s=2
        ) as server,
        AsyncExitStack() as stack,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as http,
    ):
        client = await server.client(stack)
        ready = await client.recv()
        conversation = str(ready["session_id"])
        added = (await upload(http, conversation, "invoice.pdf", content)).json()
        assert label(await client.recv()) == "files_update"
        fake_openai.script(
            Reply(tool_calls=[("read_file", {"file_id": added["id"]})]),
            Reply(content="Unreadable."),
        )
        await client.send(type="chat", content="read it", selected_tools=["read_file"])
        await client.until_label("tool_start:read_file")
        ended = asyncio.create_task(client.run())
        round_trips: list[float] = []
        gc.freeze()  # the test process's own heap: not the server's pauses
        try:
            while not ended.done():
                started = time.perf_counter()
                assert (await http.get("/healthz")).status_code == 200
                round_trips.append(time.perf_counter() - started)
        finally:
            gc.unfreeze()
        frames = await ended
    assert labels(frames)[0] == "tool_error:read_file:timeout"
    round_trips.sort()
    print(
        f"/healthz during the PDF: {len(round_trips)} round trips, median "
        f"{round_trips[len(round_trips) // 2] * 1000:.1f} ms, max "
        f"{round_trips[-1] * 1000:.1f} ms"
    )
    assert len(round_trips) > 10
