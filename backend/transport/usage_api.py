"""What runs used, from the store's usage ledger (`store/usage_records.py`):

- `GET /api/usage[?days=N][&user=NAME|*]`: the caller's usage over the
  last `days` UTC days (1 to 366, default 30; today is the last), per day
  and model, with totals and what is left of today's budget. An admin may
  name another `user`, or `*` for everyone (then `by_user` too); anyone
  else naming another user gets 403.

Every run counts, a `save_chat: false` one too, and a deleted
conversation's runs still count. `cost_usd` sums the known costs only:
null when none of the runs had a price, and `unpriced_runs` says how many
had none (a cost is never invented).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.budget import DAY_S, day_end, day_start
from backend.chat.service import ChatService
from backend.identity.claims import MAX_USER_CHARS
from backend.store.base import Store, StoreError
from backend.store.usage_records import SpendingRow, SpendingTotals, utc_day
from backend.transport.auth import role_of, user_of
from backend.transport.bodies import whole_number
from backend.transport.openapi_parts import errors, json_body
from backend.transport.refusal import Refused
from backend.users import ADMIN

PATH = "/api/usage"
DEFAULT_DAYS = 30
MAX_DAYS = 366
EVERYONE = "*"
NOT_YOURS = "only an admin may see another user's usage; leave `user` out for your own"
UNAVAILABLE = "the store is unavailable; try again later"


def _days(request: Request) -> int:
    days = whole_number(request.query_params.get("days", str(DEFAULT_DAYS)))
    if days is None or not 1 <= days <= MAX_DAYS:
        raise Refused(
            400, "invalid_message", f"days must be a whole number from 1 to {MAX_DAYS}"
        )
    return days


def _whose(request: Request) -> str:
    """The user asked about: the caller, another user or `*` (admins only)."""
    caller = user_of(request)
    asked = request.query_params.get("user", caller)
    if asked == caller:
        return caller
    if role_of(request) != ADMIN:
        raise Refused(403, "forbidden", NOT_YOURS)
    if asked != EVERYONE and not 0 < len(asked) <= MAX_USER_CHARS:
        raise Refused(400, "invalid_message", "user: 1 to 128 characters, or *")
    return asked


def _context(request: Request) -> tuple[ChatService, Store]:
    service: ChatService = request.app.state.chat
    if service.store is None:
        raise Refused(404, "not_found", "this server keeps no usage")
    return service, service.store


async def read(request: Request) -> Response:
    days, user = _days(request), _whose(request)
    service, store = _context(request)
    now = service.now()
    since, until = day_start(now) - (days - 1) * DAY_S, day_end(now)
    try:
        rows = await store.spending(None if user == EVERYONE else user, since, until)
        today = None if user == EVERYONE else await _today(service, store, user, now)
    except StoreError as exc:
        raise Refused(503, "store_error", UNAVAILABLE) from exc
    body: dict[str, Any] = {
        "user": user,
        "since": utc_day(since),
        "until": utc_day(now),
        "days": _by_day(rows),
        "totals": _shown(_sum(rows)),
        "today": today,
    }
    if user == EVERYONE:
        body["by_user"] = _by_user(rows)
    return JSONResponse(body)


async def _today(
    service: ChatService, store: Store, user: str, now: float
) -> dict[str, Any]:
    """What `user` spent today, against their daily budget (nulls: none)."""
    spent = await store.spent_since(user, day_start(now))
    budget = service.runs.daily.budget_for(user)
    return {
        "spent": spent.model_dump(),
        "budget": budget.model_dump(),
        "resets_at": day_end(now),
    }


def _sum(rows: list[SpendingRow]) -> SpendingTotals:
    total = SpendingTotals()
    for row in rows:
        total = total.plus(row)
    return total


def _shown(totals: SpendingTotals) -> dict[str, Any]:
    return totals.totals().model_dump()


def _by_day(rows: list[SpendingRow]) -> list[dict[str, Any]]:
    """Days with usage, oldest first: each model's sums, then the day's."""
    days: dict[str, list[SpendingRow]] = defaultdict(list)
    for row in rows:  # ordered by day, user, model
        days[row.day].append(row)
    return [
        {
            "day": day,
            "models": _models(of_day),
            "totals": _shown(_sum(of_day)),
        }
        for day, of_day in sorted(days.items())
    ]


def _models(rows: list[SpendingRow]) -> list[dict[str, Any]]:
    """One entry per model (everyone's runs of it, for `*`), by name."""
    models: dict[str, list[SpendingRow]] = defaultdict(list)
    for row in rows:
        models[row.model].append(row)
    return [
        {"model": model, **_shown(_sum(of_model))}
        for model, of_model in sorted(models.items())
    ]


def _by_user(rows: list[SpendingRow]) -> list[dict[str, Any]]:
    users: dict[str, list[SpendingRow]] = defaultdict(list)
    for row in rows:
        users[row.user].append(row)
    return [
        {"user": user, **_shown(_sum(of_user))}
        for user, of_user in sorted(users.items())
    ]


def routes() -> list[Route]:
    return [Route(PATH, read, methods=["GET"])]


def usage_paths() -> dict[str, Any]:
    """The route in the OpenAPI document (`transport/openapi.py`)."""
    parameters = [
        {
            "name": "days",
            "in": "query",
            "required": False,
            "description": "How many UTC days, today the last (default 30)",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_DAYS},
        },
        {
            "name": "user",
            "in": "query",
            "required": False,
            "description": "Admins only: another user's name, or `*` for everyone",
            "schema": {"type": "string", "minLength": 1, "maxLength": 128},
        },
    ]
    shown = json_body(
        "`{user, since, until, days: [{day, models: [{model, …sums}], "
        "totals}], totals, today: {spent, budget, resets_at} | null, "
        "by_user (user=* only)}`; sums: runs, llm_calls, estimated_calls, "
        "input/output/total/cached/reasoning tokens, cost_usd (null: no "
        "price), unpriced_runs, active_s"
    )
    return {
        PATH: {
            "get": {
                "summary": "What runs used, per day and model, and today's budget",
                "parameters": parameters,
                "responses": {"200": shown, **errors(400, 403, 404, 503)},
            }
        }
    }
