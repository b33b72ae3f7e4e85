"""The conversations API: what the store keeps, for scripts and the UI.

- `GET /api/conversations?limit=20&cursor=…` — the caller's conversations,
  newest first; `next` is the cursor of the following page (null: no more).
- `GET /api/conversations?q=milk&limit=20` — a search: the caller's
  conversations whose title or a message holds every word (the last one
  as a prefix), best match first, each with `match` (`in`, `position`,
  `snippet`); one list, `next` is null (`store/search.py`).
- `…&origin=page,unknown` (either form) — only the conversations started
  by those kinds of client (`backend/origins.py`; each item has `origin`).
- `GET /api/conversations/{id}` — one conversation: its messages (the whole
  history, as stored) and its runs (the user's message that started each,
  its mode, status, steps, usage, timings, trace), and `usage`: the sums
  of all its runs, unsaved ones too (`GET /api/usage`'s, `usage_api.py`).
- `PATCH /api/conversations/{id}` with `{"title": "…"}` — rename it; with
  `{"instructions": "…"}` (or both) — set its custom instructions (empty
  clears them; `GET` shows them as `instructions`).
- `DELETE /api/conversations/{id}` — delete it, with its runs and frames
  (refused while a run is active in it).

Errors are JSON `{"error_type": ..., "message": ...}` with a fitting status.
A session id is a conversation id: reconnecting with it continues it.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.chat.run_views import run_view
from backend.chat.service import ChatService
from backend.errors import NoSuchConversation, ProtocolError
from backend.origins import parse_origins
from backend.store.base import Store
from backend.store.records import ConversationRecord
from backend.store.search import SearchHit
from backend.transport.auth import user_of
from backend.transport.bodies import StrictBody, read_model, whole_number
from backend.transport.refusal import Refused

DEFAULT_PAGE = 20
MAX_PAGE = 100
MAX_QUERY = 500
"""The longest search (`q`), in characters."""


class Rename(StrictBody):
    """A new `title`, new custom `instructions` (empty: none), or both."""

    title: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    instructions: str | None = None


def _summary(record: ConversationRecord) -> dict[str, Any]:
    return record.model_dump(
        include={"id", "title", "created_at", "updated_at", "origin"}
    )


def _origins(request: Request) -> frozenset[str] | None:
    """The origins asked for (`?origin=page,unknown`), None for all."""
    if "origin" not in request.query_params:
        return None
    try:
        return parse_origins(request.query_params["origin"])
    except ValueError as exc:
        raise Refused(400, "invalid_message", str(exc)) from exc


def _limit(request: Request) -> int:
    limit = whole_number(request.query_params.get("limit", str(DEFAULT_PAGE)))
    if limit is None or not 1 <= limit <= MAX_PAGE:
        raise Refused(
            400, "invalid_message", f"limit must be a whole number from 1 to {MAX_PAGE}"
        )
    return limit


def _context(request: Request) -> tuple[ChatService, Store]:
    service: ChatService = request.app.state.chat
    if service.store is None:
        raise Refused(404, "not_found", "this server does not keep conversations")
    return service, service.store


async def found_conversation(
    request: Request,
) -> tuple[ChatService, Store, ConversationRecord]:
    """The conversation the path names, if the caller may see it."""
    service, store = _context(request)
    conversation_id = request.path_params["conversation_id"]
    record = await store.conversation(conversation_id)
    if record is None or record.owner != user_of(request):
        raise Refused(404, "not_found", f"no conversation {conversation_id!r}")
    return service, store, record


async def list_conversations(request: Request) -> Response:
    _, store = _context(request)
    limit, origins = _limit(request), _origins(request)
    if "q" in request.query_params:
        return await _search(request, store, limit, origins)
    try:
        page = await store.conversations(
            user_of(request),
            limit=limit,
            cursor=request.query_params.get("cursor"),
            origins=origins,
        )
    except ValueError as exc:
        raise Refused(400, "invalid_message", str(exc)) from exc
    items = [_summary(record) for record in page.items]
    return JSONResponse({"items": items, "next": page.next})


async def _search(
    request: Request, store: Store, limit: int, origins: frozenset[str] | None
) -> Response:
    """The caller's conversations matching `q`, best first: one list, no
    cursor (of the best `limit`, those of `origins` if given)."""
    text = request.query_params["q"]
    if not text.strip() or len(text) > MAX_QUERY:
        raise Refused(
            400, "invalid_message", f"q must be 1 to {MAX_QUERY} characters, not blank"
        )
    if "cursor" in request.query_params:
        raise Refused(400, "invalid_message", "a search (q) takes no cursor")
    hits = await store.search(user_of(request), text, limit=limit)
    if origins is not None:
        hits = [hit for hit in hits if hit.conversation.origin in origins]
    return JSONResponse({"items": [_found_in(hit) for hit in hits], "next": None})


def _found_in(hit: SearchHit) -> dict[str, Any]:
    match = {"in": hit.where, "position": hit.position, "snippet": hit.snippet}
    return {**_summary(hit.conversation), "match": match}


async def get_conversation(request: Request) -> Response:
    service, store, record = await found_conversation(request)
    with contextlib.suppress(ProtocolError, NoSuchConversation):
        # the owner could not be asked: the store has it up to its last save
        await service.flush_session(record.id, record.owner)
    messages = await store.messages(record.id)
    runs = await store.runs(record.id)
    usage = await store.conversation_spending(record.id)
    return JSONResponse(
        {
            **_summary(record),
            "instructions": _instructions(record),
            "messages": [m.model_dump(mode="json") for m in messages],
            "runs": [run_view(run) for run in runs],
            "usage": usage.model_dump(),
        }
    )


def _instructions(record: ConversationRecord) -> str:
    """The conversation's custom instructions (`chat/instructions.py`)."""
    text = record.settings.get("instructions", "")
    return text if isinstance(text, str) else ""


async def rename_conversation(request: Request) -> Response:
    """Rename it, set its instructions, or both (the instructions first)."""
    service, store, record = await found_conversation(request)
    change = await read_model(request, Rename, "conversation change")
    if change.title is None and change.instructions is None:
        raise Refused(400, "invalid_message", "give a title, instructions or both")
    missing = Refused(404, "not_found", f"no conversation {record.id!r}")
    title, text = change.title or record.title, _instructions(record)
    if change.instructions is not None:
        try:
            text = service.runs.instructions.checked(change.instructions)
        except ProtocolError as exc:
            raise Refused(400, exc.error_type, str(exc)) from exc
        if not await store.set_conversation_instructions(record.id, text):
            raise missing
    if change.title is not None and not await store.rename_conversation(
        record.id, change.title
    ):
        raise missing
    shown = _summary(record.model_copy(update={"title": title}))
    return JSONResponse({**shown, "instructions": text})


async def delete_conversation(request: Request) -> Response:
    service, store, record = await found_conversation(request)
    try:
        forgotten = await service.forget_anywhere(record.id, record.owner)
    except (ProtocolError, NoSuchConversation) as exc:
        raise Refused(503, "unavailable", str(exc)) from exc
    if not forgotten:
        raise Refused(
            409, "busy", "a run is active in this conversation; stop it first"
        )
    await store.delete_conversation(record.id)
    request.app.state.blob_collector.wake()  # its files' contents may be unused now
    return Response(status_code=204)


def routes() -> list[Route]:
    one = "/api/conversations/{conversation_id}"
    return [
        Route("/api/conversations", list_conversations, methods=["GET"]),
        Route(one, get_conversation, methods=["GET"]),
        Route(one, rename_conversation, methods=["PATCH"]),
        Route(one, delete_conversation, methods=["DELETE"]),
    ]
