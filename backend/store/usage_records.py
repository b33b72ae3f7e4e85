"""The usage ledger's records: one row per run, saved or not, the sums
the store makes of them (`store/sql_spending.py`), and the part of the
`Store` (`store/base.py`) that reads them (`UsageLedger`).

Every run is counted, a `save_chat: false` one too (it keeps no
`RunRecord`), and its row outlives its conversation: deleting a
conversation does not give back what its runs spent.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from backend.budget import Spent
from backend.store.records import RunRecord


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def utc_day(at: float) -> str:
    """The UTC day (`YYYY-MM-DD`) epoch second `at` is in."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")


class RunUsageRecord(_Record):
    """What one run used, as the ledger keeps it (`schema.run_usage`)."""

    run_id: str
    owner: str
    conversation_id: str
    model: str = ""
    started_at: float
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    llm_calls: int = 0
    estimated_calls: int = 0
    cost_usd: float | None = None
    """None: its model has no price (the cost is unknown, not 0)."""
    active_ms: float = 0.0

    @classmethod
    def of(cls, run: RunRecord, owner: str) -> RunUsageRecord:
        usage = run.usage
        return cls(
            run_id=run.id,
            owner=owner,
            conversation_id=run.conversation_id,
            model=run.model,
            started_at=run.started_at,
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            cached_tokens=usage.cached_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            llm_calls=usage.llm_calls,
            estimated_calls=usage.estimated_calls,
            cost_usd=run.cost_usd,
            active_ms=run.active_ms,
        )

    @property
    def day(self) -> str:
        return utc_day(self.started_at)


class SpendingTotals(_Record):
    """Sums over some runs. `cost_usd` adds up the known costs only (None:
    no run of them had a price); `unpriced_runs` says how many had none."""

    runs: int = 0
    llm_calls: int = 0
    estimated_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    unpriced_runs: int = 0
    active_s: float = 0.0

    def plus(self, other: SpendingTotals) -> SpendingTotals:
        """Both sums together (as totals: no day, user or model)."""
        mine = self.model_dump(include=_SUMMED)
        theirs = other.model_dump(include=_SUMMED)
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return SpendingTotals(
            **{name: mine[name] + theirs[name] for name in _SUMMED},
            cost_usd=sum(costs) if costs else None,
        )

    def totals(self) -> SpendingTotals:
        """Just the sums (a row without its day, user and model)."""
        return SpendingTotals.model_validate(
            self.model_dump(include=set(SpendingTotals.model_fields))
        )


_SUMMED = set(SpendingTotals.model_fields) - {"cost_usd"}


class SpendingRow(SpendingTotals):
    """The sums of one user's runs of one model on one UTC day."""

    day: str
    """`YYYY-MM-DD`, UTC."""
    user: str
    model: str


class UsageLedger(Protocol):
    """The `Store`'s reading of the ledger (its rows come in `Batch.usage`)."""

    async def spent_since(self, owner: str, since: float) -> Spent:
        """What `owner`'s runs started at or after `since` used: all their
        tokens, their known costs, their seconds of work."""
        ...

    async def spending(
        self, owner: str | None, since: float, until: float
    ) -> list[SpendingRow]:
        """The ledger summed per UTC day, user and model (in that order)
        over the runs started in [since, until); `owner` None: everyone's."""
        ...

    async def conversation_spending(self, conversation_id: str) -> SpendingTotals:
        """The ledger summed over a conversation's runs, saved or not."""
        ...
