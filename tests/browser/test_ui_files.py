"""Files in the browser: attach with the picker or by dropping, the strip of
the conversation's files (download links), a refused file's reason, a
tool's artifact appearing as it is made, and the strip after a reload."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from playwright.async_api import expect

from tests.browser.geometry import why_not_clickable
from tests.browser.ui import DESKTOP, PHONE, App, OpenApp
from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, calls, observe, reason

pytestmark = pytest.mark.asyncio(loop_scope="session")

CSV = b"city,population\nOslo,709000\n"


async def drop(app: App, name: str, text: str) -> None:
    """Drop a file on the chat as a user dragging it from their desktop would."""
    await app.page.evaluate(
        """([name, text]) => {
          const data = new DataTransfer();
          data.items.add(new File([text], name, { type: 'text/plain' }));
          const chat = document.getElementById('chat');
          for (const type of ['dragenter', 'dragover', 'drop']) {
            chat.dispatchEvent(new DragEvent(type, { dataTransfer: data, bubbles: true, cancelable: true }));
          }
        }""",
        [name, text],
    )


async def test_attach_drop_download_and_a_refusal(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """Picked and dropped files list, download intact, survive reload; `.exe` fails."""
    harness = await start_server(ScriptedLLM())
    app = await open_app(harness)
    strip = app.loc("#files")
    await expect(strip).to_be_hidden()

    await app.loc("#file-picker").set_input_files(
        files=[{"name": "cities.csv", "mimeType": "text/csv", "buffer": CSV}]
    )
    chip = app.page.get_by_role("link", name="Download cities.csv (28 bytes)")
    await expect(chip).to_be_visible()
    async with app.page.expect_download() as waiting:
        await chip.click()
    download = await waiting.value
    assert download.suggested_filename == "cities.csv"
    saved = Path(await download.path())
    assert await asyncio.to_thread(saved.read_bytes) == CSV

    await drop(app, "notes.md", "# Notes\n")
    await expect(app.loc(".file-chip .file-name")).to_have_text(
        ["cities.csv", "notes.md"]
    )
    await expect(app.loc("#drop-zone")).to_be_hidden()

    await drop(app, "setup.exe", "MZ")
    notice = app.loc(".notice-error")
    await expect(notice).to_contain_text("“setup.exe” was not added")
    await expect(notice).to_contain_text("files of type .exe are not taken")
    await expect(app.loc(".file-chip")).to_have_count(2)
    # Chromium logs any answer with an error status; this one was expected
    refused = "the server responded with a status of 415 (Unsupported Media Type)"
    assert [p for p in app.problems if refused in p] == [
        f"console error: Failed to load resource: {refused}"
    ]
    app.problems.clear()

    # the conversation exists now (a file came first): its address says so
    session = await app.connection("connection.sessionId")
    await expect(app.page).to_have_url(f"{harness.server.url('')}/c/{session}")
    await app.page.reload()
    await app.expect_connected()
    await expect(app.loc(".file-chip .file-name")).to_have_text(
        ["cities.csv", "notes.md"]
    )


async def test_a_tools_artifact_appears_as_it_is_made(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """A file written by an approved tool shows as a tool-made download chip."""
    llm = ScriptedLLM(
        reason("Write it.", tools=["write_file"]),
        calls(("write_file", {"name": "plan.md", "content": "# Plan\n1. Go"})),
        observe(should_continue=False, final="Saved plan.md."),
    )
    harness = await start_server(llm)
    app = await open_app(harness)
    await app.type_and_send("write me a plan")
    await expect(app.dialog).to_be_visible()  # writing a file asks
    await expect(app.loc("#approval-untrusted")).to_be_hidden()  # read nothing
    await app.page.get_by_role("button", name="Approve").click()
    await app.wait_idle()
    chip = app.loc(".file-chip[data-origin=artifact] a")
    await expect(chip).to_have_attribute(
        "aria-label", "Download plan.md (12 bytes, made by a tool)"
    )
    await expect(app.answers()).to_have_text("Saved plan.md.")


async def test_an_approval_after_reading_a_file_says_where_the_request_may_come_from(
    start_server: StartServer, open_app: OpenApp
) -> None:
    """The run read the user's uploaded file (text the user did not write),
    then asks to write one: the dialog warns, naming the file, and the
    notice and the buttons are on screen at desktop and phone sizes."""
    llm = ScriptedLLM(
        reason("Read it.", tools=["read_file"]),
        calls(("read_file", {"file_id": "PLACEHOLDER"})),
        observe("It lists Oslo."),
        reason("Write it.", tools=["write_file"]),
        calls(("write_file", {"name": "plan.md", "content": "# Plan\n1. Go"})),
        observe(should_continue=False, final="Saved plan.md."),
    )
    harness = await start_server(llm)
    app = await open_app(harness)
    await app.loc("#file-picker").set_input_files(
        files=[{"name": "cities.csv", "mimeType": "text/csv", "buffer": CSV}]
    )
    await expect(app.loc(".file-chip .file-name")).to_have_text(["cities.csv"])
    file_id = await app.loc(".file-chip[data-file-id]").get_attribute("data-file-id")
    assert file_id
    llm._steps[1] = calls(("read_file", {"file_id": file_id}))
    await app.type_and_send("make a plan from my file")
    await expect(app.dialog).to_be_visible()
    notice = app.loc("#approval-untrusted")
    await expect(notice).to_contain_text("This run has read text you did not write.")
    await expect(app.loc("#approval-untrusted-list li")).to_have_text(
        ["read_file (step 1): the file cities.csv"]
    )
    approve = app.page.get_by_role("button", name="Approve")
    reject = app.page.get_by_role("button", name="Reject")
    for size in (DESKTOP, PHONE):
        await app.page.set_viewport_size(size)  # type: ignore[arg-type]
        assert await why_not_clickable(notice) == [], size
        for button in (reject, approve):
            assert await why_not_clickable(button) == [], size
    await reject.click()
    await app.wait_idle()
    await expect(app.loc(".file-chip .file-name")).to_have_text(["cities.csv"])
