"""`read_file` and `write_file`: tools that work with the conversation's files.

A tool names a file by its id (the manifest in the reason prompt lists
them) or, for `read_file`, by its name (the newest of that name), never by
a path. `read_file` gives text files' text (PDFs' text
when `pypdf` can read them); `write_file` makes a text artifact that joins
the conversation's files, announced to its clients with `files_update`.

A PDF's text is extracted in a worker process (`Runner`, the executor's
`ProcessPool`): pypdf is pure Python, and a crafted file of a few KB can
keep it busy for many seconds. On the event loop that froze the whole
server; in a thread it could not be stopped. In a process it is killed at
the tool's timeout (or on Stop) and the server goes on answering.
"""

from __future__ import annotations

import io
from typing import Any

from pydantic import BaseModel, Field

from backend.errors import ToolError
from backend.files.kinds import FileRefused
from backend.files.shelf import FileShelf
from backend.files.skill import ReadFileSkill
from backend.store.base import LimitReached
from backend.store.records import FileRecord
from backend.tools.base import Reconciled, Tool, ToolContext, ToolEffect
from backend.tools.effects import effect_key
from backend.tools.executor import Runner

READ_CHARS = 20_000
"""Characters of a file `read_file` returns at most (the executor cuts a
result to `LOOPWIRE_TOOL_RESULT_MAX_CHARS` on top)."""
PDF_PAGES = 50


class ReadFileArgs(BaseModel):
    file_id: str = Field(
        min_length=1,
        max_length=200,
        description="The file's id from the file list, or its name.",
    )


class WriteFileArgs(BaseModel):
    name: str = Field(
        min_length=1, max_length=120, description="A file name such as summary.md."
    )
    content: str = Field(min_length=1, description="The text to write.")
    description: str = Field(
        default="", max_length=300, description="One line on what the file holds."
    )


def pdf_text(content: bytes) -> str:
    """The text of a PDF's first `PDF_PAGES` pages (in a worker process:
    see the module's docstring)."""
    try:
        from pypdf import PdfReader
    except ImportError:  # pragma: no cover - pypdf is a dependency
        raise ToolError("PDF text cannot be read on this server") from None
    try:
        reader = PdfReader(io.BytesIO(content))
        pages = [page.extract_text() or "" for page in reader.pages[:PDF_PAGES]]
    except Exception as exc:  # pypdf raises many kinds on a broken file
        raise ToolError(f"the PDF could not be read: {exc}") from None
    return "\n\n".join(f"[page {n}]\n{text}" for n, text in enumerate(pages, 1))


class _FileActions:
    """What the file tools do, on one `shelf`; `pdfs` runs `pdf_text`."""

    def __init__(self, shelf: FileShelf, pdfs: Runner) -> None:
        self.shelf = shelf
        self.pdfs = pdfs

    async def read_file(self, args: ReadFileArgs, ctx: ToolContext) -> dict[str, Any]:
        found = await self.shelf.read(ctx.session_id, args.file_id)
        listed = None
        if found is None:  # a name, perhaps: the newest file of that name
            listed = await self.shelf.files(ctx.session_id)
            named = [f for f in listed if f.name.casefold() == args.file_id.casefold()]
            if named:
                found = await self.shelf.read(ctx.session_id, named[-1].id)
        if found is None:
            listed = listed or await self.shelf.files(ctx.session_id)
            ids = ", ".join(f"{f.id} ({f.name})" for f in listed[-10:]) or "none"
            raise ToolError(
                f"this conversation has no file {args.file_id!r}; files: {ids}"
            )
        record, content = found
        if record.media_type == "application/pdf":
            text = await self.pdfs.run(pdf_text, content)
        elif record.media_type.startswith("image/"):
            raise ToolError(f"{record.name} is an image; its content is not text")
        else:
            text = content.decode("utf-8", errors="replace")
        return {
            "name": record.name,
            "media_type": record.media_type,
            "size": record.size,
            "text": text[:READ_CHARS],
            "truncated": len(text) > READ_CHARS,
        }

    async def write_file(self, args: WriteFileArgs, ctx: ToolContext) -> dict[str, Any]:
        try:
            record = await self.shelf.add(
                ctx.session_id,
                args.name,
                args.content.encode(),
                origin="artifact",
                owner=ctx.owner,
                description=args.description,
                run_id=ctx.run_id,
                effect=effect_key(ctx, "write_file"),
            )
        except (FileRefused, LimitReached) as exc:  # the quota's too
            raise ToolError(str(exc)) from exc
        return _written(record)

    async def wrote(self, ctx: ToolContext) -> Reconciled:
        """Whether a `write_file` cut off by a crash made its file."""
        key = ctx.idempotency_key
        record = await self.shelf.made(ctx.session_id, key) if key else None
        if record is None:
            return Reconciled(took_effect=False)
        return Reconciled(took_effect=True, result=_written(record))


def file_tools(shelf: FileShelf, pdfs: Runner) -> list[Tool[Any]]:
    """The file tools; `pdfs` runs `pdf_text` away from the event loop."""
    act = _FileActions(shelf, pdfs)
    return [
        Tool(
            "read_file",
            "Read a file of this conversation (an upload or an earlier tool's "
            "file) by its id or its name: text, or a PDF's text.",
            ReadFileArgs,
            act.read_file,
            ToolEffect(read_only=True, idempotent=True),
            summary="Reads one of this conversation's files.",
            origin=lambda result: f"the file {result['name']}",
            offline=ReadFileSkill(),
        ),
        Tool(
            "write_file",
            "Write a text file (such as a summary, a CSV or a Markdown report) "
            "that joins this conversation's files for the user to download.",
            WriteFileArgs,
            act.write_file,
            ToolEffect(untrusted_result=False),  # asks: it writes
            summary="Saves a text file in this conversation for you to download; "
            "asks you first.",
            reconcile=act.wrote,
        ),
    ]


def _written(record: FileRecord) -> dict[str, Any]:
    return {"file_id": record.id, "name": record.name, "size": record.size}
