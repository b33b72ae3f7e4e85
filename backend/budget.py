"""Budgets: how much a run, or a user in a day, may spend.

A `Budget` bounds three things, each optional (None: no bound):

- `tokens`: tokens of model calls, input and output (`Usage.total_tokens`);
- `cost_usd`: their cost in dollars, by the price table
  (`llm/prices.py`); a model without a price has no known cost, so a cost
  bound cannot stop its runs (the start of such a run is logged);
- `time_s`: seconds of work (waits for a person do not count: the run's
  active time, `RunState.active_ms`).

A run's budget is the server's (`LOOPWIRE_RUN_BUDGET_*`), or less when its
`chat` asks for less (never more), and at most what the user has left of
their daily budget (`LOOPWIRE_DAILY_BUDGET_*`, or their own line in the
tokens file). It is enforced as the step budget is (`agent/budget_meter.py`):
a warning at `WARN_AT` of a bound, and at a bound the run ends with reason
`budget` before its next phase, the model writing the final answer within
a small reserved allowance. `grant_budget` raises a running run's budget,
up to the server's cap and the day's remainder.

These are values, shared by the loop, the chat service, the store and the
transport.
"""

from __future__ import annotations

import math
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

Dimension = Literal["tokens", "cost", "time"]
DIMENSIONS: tuple[Dimension, ...] = ("tokens", "cost", "time")
Scope = Literal["run", "day"]
"""Whose bound was reached: the run's own, or what the user had left of
their day (which no grant can raise)."""
WARN_AT = 0.8
"""The share of a bound whose use is warned about (once per bound)."""
DAY_S = 86_400
_N = TypeVar("_N", int, float)


class Budget(BaseModel):
    """Bounds on tokens, dollars and seconds of work; None: unbounded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    time_s: float | None = Field(default=None, ge=0)

    def bound(self, dimension: Dimension) -> float | None:
        if dimension == "tokens":
            return self.tokens
        if dimension == "cost":
            return self.cost_usd
        return self.time_s

    @property
    def unbounded(self) -> bool:
        return self.tokens is None and self.cost_usd is None and self.time_s is None

    def within(self, other: Budget) -> Budget:
        """Each bound the lower of this one's and `other`'s."""
        return Budget(
            tokens=_least(self.tokens, other.tokens),
            cost_usd=_least(self.cost_usd, other.cost_usd),
            time_s=_least(self.time_s, other.time_s),
        )

    def plus(self, more: Budget) -> Budget:
        """Each bound raised by `more`'s (an unbounded one stays so; a bound
        `more` leaves out stays as it is)."""
        return Budget(
            tokens=_sum(self.tokens, more.tokens),
            cost_usd=_sum(self.cost_usd, more.cost_usd),
            time_s=_sum(self.time_s, more.time_s),
        )

    def less(self, spent: Spent) -> Budget:
        """What is left of this budget after `spent` (never below 0)."""
        return Budget(
            tokens=None if self.tokens is None else max(self.tokens - spent.tokens, 0),
            cost_usd=None
            if self.cost_usd is None
            else max(self.cost_usd - spent.cost_usd, 0.0),
            time_s=None if self.time_s is None else max(self.time_s - spent.time_s, 0),
        )


UNBOUNDED = Budget()


class Spent(BaseModel):
    """What was used against a budget."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: int = 0
    cost_usd: float = 0.0
    time_s: float = 0.0

    def of(self, dimension: Dimension) -> float:
        if dimension == "tokens":
            return self.tokens
        if dimension == "cost":
            return self.cost_usd
        return self.time_s


def reached(budget: Budget, spent: Spent) -> Dimension | None:
    """The first bound `spent` has reached, if any."""
    for dimension in DIMENSIONS:
        bound = budget.bound(dimension)
        if bound is not None and spent.of(dimension) >= bound:
            return dimension
    return None


def shown(dimension: Dimension, bound: float) -> str:
    """A bound as people read it: "200,000 tokens", "$2", "600 seconds of
    work"."""
    if dimension == "tokens":
        return f"{int(bound):,} tokens"
    if dimension == "cost":
        return f"${bound:g}"
    return f"{bound:g} seconds of work"


def day_start(now: float) -> float:
    """The start (UTC midnight, epoch seconds) of the day `now` is in."""
    return math.floor(now / DAY_S) * DAY_S


def day_end(now: float) -> float:
    """When the day `now` is in ends and daily budgets start over."""
    return day_start(now) + DAY_S


def _least(a: _N | None, b: _N | None) -> _N | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _sum(a: _N | None, b: _N | None) -> _N | None:
    if a is None or b is None:
        return a
    return a + b
