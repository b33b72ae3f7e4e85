"""`GET /api/usage` and a conversation's `usage` over a live server: the
caller's own usage per day and model, an admin's view of anyone's or
everyone's, and today's spending against the daily budget."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.budget import DAY_S, day_end, day_start
from backend.store.base import Batch
from backend.store.records import RunRecord
from backend.store.usage_records import RunUsageRecord, utc_day
from backend.transcript import Usage
from backend.transport.usage_api import NOT_YOURS
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM

ALICE = "alice-token-0123456789"  # an admin
BOB = "bob-token-9876543210xyz"  # a user
PRICES = json.dumps({"scripted-model": {"input": 1.0, "output": 2.0}})
ZERO = {
    "runs": 0,
    "llm_calls": 0,
    "estimated_calls": 0,
    "input_tokens": 0,
    "output_tokens": 0,
    "total_tokens": 0,
    "cached_tokens": 0,
    "reasoning_tokens": 0,
    "cost_usd": None,
    "unpriced_runs": 0,
    "active_s": 0.0,
}


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"alice: {ALICE} admin\nbob: {BOB}\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def get(harness: Harness, token: str, **params: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        return await http.get("/api/usage", params=params, headers=bearer(token))


async def yesterday(harness: Harness, owner: str, at: float) -> None:
    """A run of another model, a day earlier, in a conversation long gone."""
    record = RunRecord(
        id=f"old-{owner}",
        conversation_id="gone",
        strategy="react",
        status="finished",
        request="old",
        usage=Usage(
            prompt_tokens=50,
            completion_tokens=5,
            total_tokens=55,
            cached_tokens=20,
            reasoning_tokens=3,
            llm_calls=2,
            estimated_calls=1,
        ),
        model="other-model",
        started_at=at,
        active_ms=4000.0,
        state="{}",
    )
    row = RunUsageRecord.of(record, owner)
    store = harness.server.app.state.store
    await store.write(Batch("gone", at, usage=[row], unfenced=True))


async def started(harness: Harness, token: str, *questions: str) -> tuple[str, float]:
    """Runs through the service as the token's user: its conversation, and
    its first run's start (what the day of its usage is)."""
    client, ready = await harness.ready_client(**bearer(token))
    for question in questions:
        await client.chat(question)
    await harness.service.flush_all()
    runs = await harness.server.app.state.store.runs(ready["session_id"])
    return ready["session_id"], runs[0].started_at


def today_run(active_s: float, *, runs: int = 1) -> dict[str, Any]:
    """The sums of `runs` scripted answers of two words ("hello there")."""
    return {
        **ZERO,
        "runs": runs,
        "llm_calls": runs,
        "input_tokens": 10 * runs,
        "output_tokens": 2 * runs,
        "total_tokens": 12 * runs,
        "cost_usd": 14 * runs / 1e6,
        "active_s": active_s,
    }


OLD = {
    **ZERO,
    "runs": 1,
    "llm_calls": 2,
    "estimated_calls": 1,
    "input_tokens": 50,
    "output_tokens": 5,
    "total_tokens": 55,
    "cached_tokens": 20,
    "reasoning_tokens": 3,
    "unpriced_runs": 1,
    "active_s": 4.0,
}


async def test_a_user_sees_their_usage_per_day_and_model_and_todays_budget(
    start_server: StartServer, tokens: Path, database_url: str
) -> None:
    """Bob's days (oldest first), models, totals and today's spending, exactly."""
    harness = await start_server(
        ScriptedLLM("hello there"),
        database_url=database_url,
        auth_tokens_file=tokens,
        prices=PRICES,
        daily_budget_tokens=1000,
    )
    conversation, at = await started(harness, BOB, "hi")
    await yesterday(harness, "bob", at - DAY_S)
    (run,) = await harness.server.app.state.store.runs(conversation)
    active_s = run.active_ms / 1000

    shown = await get(harness, BOB, days=2)
    assert shown.status_code == 200
    now = time.time()
    today = today_run(active_s)
    assert shown.json() == {
        "user": "bob",
        "since": utc_day(day_start(at) - DAY_S),
        "until": utc_day(at),
        "days": [
            {
                "day": utc_day(at - DAY_S),
                "models": [{"model": "other-model", **OLD}],
                "totals": OLD,
            },
            {
                "day": utc_day(at),
                "models": [{"model": "scripted-model", **today}],
                "totals": today,
            },
        ],
        "totals": {
            **OLD,
            "runs": 2,
            "llm_calls": 3,
            "input_tokens": 60,
            "output_tokens": 7,
            "total_tokens": 67,
            "cost_usd": 14 / 1e6,
            "active_s": 4.0 + active_s,
        },
        "today": {
            "spent": {"tokens": 12, "cost_usd": 14 / 1e6, "time_s": active_s},
            "budget": {"tokens": 1000, "cost_usd": None, "time_s": None},
            "resets_at": day_end(now),
        },
    }
    one_day = (await get(harness, BOB, days=1)).json()
    assert [day["day"] for day in one_day["days"]] == [utc_day(at)]
    assert one_day["since"] == one_day["until"] == utc_day(at)

    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        detail = await http.get(
            f"/api/conversations/{conversation}", headers=bearer(BOB)
        )
    assert detail.json()["usage"] == today


async def test_only_an_admin_sees_another_users_or_everyones_usage(
    start_server: StartServer, tokens: Path, database_url: str
) -> None:
    """Bob may not name Alice (403); Alice sees Bob's, and everyone's by user."""
    harness = await start_server(
        ScriptedLLM("hello there", "hello there", "hello there"),
        database_url=database_url,
        auth_tokens_file=tokens,
        prices=PRICES,
    )
    await started(harness, BOB, "hi", "again")
    await started(harness, ALICE, "hi")
    bob_runs = await get(harness, BOB)
    bob_active = bob_runs.json()["totals"]["active_s"]

    refused = await get(harness, BOB, user="alice")
    assert (refused.status_code, refused.json()) == (
        403,
        {"error_type": "forbidden", "message": NOT_YOURS},
    )
    assert (await get(harness, BOB, user="*")).status_code == 403
    own = await get(harness, BOB, user="bob")
    assert own.status_code == 200 and own.json()["user"] == "bob"

    as_admin = (await get(harness, ALICE, user="bob")).json()
    assert as_admin["totals"] == today_run(bob_active, runs=2)
    assert as_admin["today"]["budget"] == {
        "tokens": None,
        "cost_usd": None,
        "time_s": None,
    }
    everyone = (await get(harness, ALICE, user="*")).json()
    alice_active = everyone["by_user"][0]["active_s"]
    assert (everyone["user"], everyone["today"]) == ("*", None)
    assert everyone["by_user"] == [
        {"user": "alice", **today_run(alice_active)},
        {"user": "bob", **today_run(bob_active, runs=2)},
    ]
    (day,) = everyone["days"]
    assert [m["model"] for m in day["models"]] == ["scripted-model"]
    assert day["models"][0]["runs"] == day["totals"]["runs"] == 3
    assert "by_user" not in as_admin


@pytest.mark.parametrize("days", ["0", "367", "-1", "two", "1.5"])
async def test_days_out_of_range_is_a_400_naming_the_range(
    start_server: StartServer, tokens: Path, days: str
) -> None:
    """`days` must be a whole number from 1 to 366."""
    harness = await start_server(ScriptedLLM(), auth_tokens_file=tokens)
    refused = await get(harness, BOB, days=days)
    assert (refused.status_code, refused.json()) == (
        400,
        {
            "error_type": "invalid_message",
            "message": "days must be a whole number from 1 to 366",
        },
    )
