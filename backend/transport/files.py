"""The files API: a conversation's uploads and tools' artifacts.

- `POST /api/conversations/{id}/files` — multipart: one `file` part and an
  optional `description` field; 201 with the file's description
  (`FileInfo`). A conversation open in a live session of the caller's that
  has no message yet is created for it.
- `GET /api/conversations/{id}/files` — `{"items": [FileInfo, …]}`, oldest first.
- `GET /api/conversations/{id}/files/{file_id}` — the content, as an
  attachment (never rendered by the browser: `Content-Disposition:
  attachment`, a sandboxing CSP, `nosniff`).

Only the conversation's owner sees its files (anyone else: 404). Bounds:
the body is read no further than `LOOPWIRE_MAX_FILE_BYTES` plus the form's
own overhead (413 past it) and within `LOOPWIRE_UPLOAD_TIMEOUT_S` (408
past it, for a client that trickles its body), one file and one field per
request, the kinds `backend/files/kinds.py` takes (415 otherwise, with the reason),
`LOOPWIRE_MAX_FILES_PER_CONVERSATION` files (409), and the owner's quota,
`LOOPWIRE_MAX_FILE_BYTES_PER_USER` (413 `quota_exceeded`: before the body
is read when its declared length cannot fit, when it streams past the room
left, and on the file's real size). A file arriving in a conversation a
session shows is announced there with `files_update`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import quote

from python_multipart.exceptions import MultipartParseError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message

from backend.chat.service import ChatService
from backend.errors import LoopwireError
from backend.files.kinds import FileRefused, FileTooLarge
from backend.files.shelf import FileShelf, Room, info
from backend.store.base import LimitReached, QuotaExceeded, shown_bytes
from backend.store.records import ConversationRecord
from backend.transport.auth import user_of
from backend.transport.bodies import expect_media_type, whole_number
from backend.transport.refusal import Refused

FORM_OVERHEAD = 64 * 1024
"""Bytes a multipart body may have besides the file (boundaries, headers,
the description)."""
DESCRIPTION_BYTES = 2000


class BodyTooLarge(LoopwireError):
    pass


def _context(request: Request) -> tuple[ChatService, FileShelf]:
    service: ChatService = request.app.state.chat
    shelf: FileShelf | None = getattr(request.app.state, "files", None)
    if shelf is None or service.store is None:
        raise Refused(404, "not_found", "this server keeps no files")
    return service, shelf


async def _conversation(
    request: Request, service: ChatService, *, create: bool = False
) -> ConversationRecord:
    """The conversation the path names if the caller owns it (`create`: a
    live session of theirs not stored yet is stored now)."""
    assert service.store is not None
    conversation_id = request.path_params["conversation_id"]
    user = user_of(request)
    record = await service.store.conversation(conversation_id)
    if record is None and create and await service.ensure_stored(conversation_id, user):
        record = await service.store.conversation(conversation_id)
    if record is None or record.owner != user:
        raise Refused(404, "not_found", f"no conversation {conversation_id!r}")
    return record


@dataclass(frozen=True, slots=True)
class Upload:
    name: str
    content: bytes
    description: str


async def upload(request: Request) -> Response:
    service, shelf = _context(request)
    expect_media_type(
        request,
        "multipart/form-data",
        "send the file as multipart/form-data (a `file` part)",
    )
    limit = shelf.max_bytes + FORM_OVERHEAD
    declared = whole_number(request.headers.get("content-length", ""))
    if declared is not None and declared > limit:
        raise Refused(
            413,
            "invalid_message",
            f"the body is {declared} bytes; a file may have {shelf.max_bytes}",
        )
    record = await _conversation(request, service, create=True)
    room = await shelf.room(record.owner)
    try:
        if declared is not None:  # the file is at least the body less the form
            size = max(1, declared - FORM_OVERHEAD)
            room.check(f"the upload ({shown_bytes(declared)})", size)
    except QuotaExceeded as exc:
        raise Refused(413, "quota_exceeded", str(exc)) from exc
    largest = shelf.max_bytes if room.left is None else min(room.left, shelf.max_bytes)
    seconds = service.settings.upload_timeout_s
    try:
        async with asyncio.timeout(seconds):
            sent = await _read_form(request, largest + FORM_OVERHEAD)
    except TimeoutError as exc:
        raise Refused(
            408, "invalid_message", f"the upload took longer than {seconds:g} s"
        ) from exc
    except BodyTooLarge as exc:
        raise _too_large(shelf, room) from exc
    try:
        added = await shelf.add(
            record.id,
            sent.name,
            sent.content,
            origin="upload",
            owner=record.owner,
            description=sent.description,
        )
    except FileTooLarge as exc:
        raise Refused(413, "invalid_message", str(exc)) from exc
    except FileRefused as exc:
        raise Refused(415, "invalid_message", str(exc)) from exc
    except QuotaExceeded as exc:
        raise Refused(413, "quota_exceeded", str(exc)) from exc
    except LimitReached as exc:
        raise Refused(409, "limit_reached", str(exc)) from exc
    return JSONResponse(info(added).model_dump(mode="json"), status_code=201)


def _too_large(shelf: FileShelf, room: Room) -> Refused:
    """The refusal of a body cut off: past the largest file, or past the
    room its owner has left."""
    if room.quota is not None and room.left is not None and room.left < shelf.max_bytes:
        over = f"the upload (over {shown_bytes(room.left)})"
        refused = QuotaExceeded(over, room.used, room.quota)
        return Refused(413, "quota_exceeded", str(refused))
    return Refused(
        413,
        "invalid_message",
        f"the file is over {shelf.max_bytes} bytes, the limit",
    )


async def _read_form(request: Request, limit: int) -> Upload:
    """The form's one file and its description, read no further than `limit`
    bytes (`BodyTooLarge` past it); 400 for a form that is not one."""
    read = 0

    async def receive() -> Message:
        nonlocal read
        message = await request.receive()
        read += len(message.get("body", b""))
        if read > limit:
            raise BodyTooLarge
        return message

    try:
        form = await Request(request.scope, receive).form(max_files=1, max_fields=1)
    except HTTPException as exc:  # Starlette's word for a MultiPartException
        raise Refused(
            400, "invalid_message", f"the form could not be read: {exc.detail}"
        ) from exc
    except (MultiPartException, MultipartParseError) as exc:
        raise Refused(
            400, "invalid_message", f"the form could not be read: {exc}"
        ) from exc
    try:
        extra = sorted(set(form.keys()) - {"file", "description"})
        part = form.get("file")
        description = form.get("description", "")
        if extra:
            raise Refused(
                400, "invalid_message", f"unknown form field: {extra[0][:40]}"
            )
        if not isinstance(part, UploadFile):
            raise Refused(400, "invalid_message", "no `file` part in the form")
        if not isinstance(description, str) or len(description) > DESCRIPTION_BYTES:
            raise Refused(
                400, "invalid_message", "description: text of at most 2000 characters"
            )
        return Upload(part.filename or "file", await part.read(), description)
    finally:
        await form.close()


async def _owned(request: Request) -> tuple[FileShelf, ConversationRecord]:
    """The shelf and the conversation the path names, if the caller owns it."""
    service, shelf = _context(request)
    return shelf, await _conversation(request, service)


async def list_files(request: Request) -> Response:
    shelf, record = await _owned(request)
    items = [info(f).model_dump(mode="json") for f in await shelf.files(record.id)]
    return JSONResponse({"items": items})


def _disposition(name: str) -> str:
    fallback = "".join(c if c.isascii() and c.isprintable() else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name)}"


async def download(request: Request) -> Response:
    shelf, record = await _owned(request)
    file_id = request.path_params["file_id"]
    found = await shelf.read(record.id, file_id)
    if found is None:
        raise Refused(
            404, "not_found", f"no file {file_id[:64]!r} in this conversation"
        )
    stored, content = found
    text = stored.media_type.startswith("text/") or stored.media_type.endswith(
        ("json", "xml", "yaml")
    )
    media_type = f"{stored.media_type}; charset=utf-8" if text else stored.media_type
    return Response(
        content,
        media_type=media_type,
        headers={
            "Content-Disposition": _disposition(stored.name),
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "Cache-Control": "private, no-store",
        },
    )


def routes() -> list[Route]:
    base = "/api/conversations/{conversation_id}/files"
    return [
        Route(base, upload, methods=["POST"]),
        Route(base, list_files, methods=["GET"]),
        Route(base + "/{file_id}", download, methods=["GET"]),
    ]
