"""`DailyBudgets`: what each user may spend in a day, applied to their runs.

A user's daily budget is their line's in the tokens file (`users.py`), else
the server's (`LOOPWIRE_DAILY_BUDGET_*`); days are UTC. Before a run starts,
what the user spent today is read from the store's usage ledger (every run,
saved or not, as of its last checkpoint):

- a bound already reached refuses the run (`BudgetExhausted`), saying when
  the day's budget starts over;
- otherwise the run's budget is lowered to what is left of the day, and
  those bounds are marked as the day's (`RunState.budget_day`): reaching
  one ends the run with scope `day`, and no grant raises it.

The store's reading is the referee across instances: two runs of one user
started at once on two instances each get the day's remainder, so together
they may pass it by at most one run's spending.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Protocol

from backend.agent.state import RunState
from backend.budget import (
    DIMENSIONS,
    Budget,
    Dimension,
    Spent,
    day_end,
    day_start,
    shown,
)
from backend.errors import BudgetExhausted, StoreUnavailable
from backend.store.base import StoreError

log = logging.getLogger(__name__)


class Spending(Protocol):
    """The store's reading of a user's spending (`Store.spent_since`)."""

    async def spent_since(self, owner: str, since: float) -> Spent: ...


class DailyBudgets:
    def __init__(
        self,
        spending: Spending | None,
        default: Budget,
        overrides: Mapping[str, Budget] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`spending`: where today's spending is read (None: no store, so
        no daily budget can be kept)."""
        self.spending = spending
        self.default = default
        self.overrides = dict(overrides or {})
        self._clock = clock

    def budget_for(self, user: str) -> Budget:
        """The user's budget per day."""
        return self.overrides.get(user, self.default)

    async def today(self, user: str) -> Spent:
        """What `user` has spent since today's UTC midnight (nothing is read
        for a user without a daily budget). Read before a run's checks, so
        that nothing starts between them and the run (`fit`)."""
        if self.spending is None or self.budget_for(user).unbounded:
            return Spent()
        try:
            return await self.spending.spent_since(user, day_start(self._clock()))
        except StoreError as exc:
            raise StoreUnavailable(
                "today's spending could not be read, so no run was started; try again"
            ) from exc

    def fit(self, state: RunState, spent: Spent) -> None:
        """Fit a new run's budget within what its user has left today, who
        spent `spent` (`today`); `BudgetExhausted` when a bound of the day
        is reached."""
        daily = self.budget_for(state.owner)
        if daily.unbounded or self.spending is None:
            return
        left = daily.less(spent)
        for dimension in DIMENSIONS:
            bound = left.bound(dimension)
            if bound is not None and bound <= 0:
                raise _exhausted(dimension, daily, self._clock())
        for dimension in DIMENSIONS:
            bound, own = left.bound(dimension), state.budget.bound(dimension)
            if bound is not None and (own is None or bound < own):
                state.budget_day.append(dimension)
        state.budget = state.budget.within(left)
        state.budget_cap = state.budget_cap.within(left)


def _exhausted(dimension: Dimension, daily: Budget, now: float) -> BudgetExhausted:
    resets = day_end(now)
    when = datetime.fromtimestamp(resets, UTC).strftime("%Y-%m-%d %H:%M UTC")
    bound = daily.bound(dimension) or 0
    return BudgetExhausted(
        f"your daily budget ({shown(dimension, bound)}) is used up; it starts "
        f"over at {when}",
        resets_at=resets,
    )
