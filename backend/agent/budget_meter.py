"""`BudgetMeter`: one run's spending against its budget (`backend/budget.py`).

The driver reads it between phases, as `next_turn` reads the step budget:

- once a bound is `WARN_AT` (80 %) used, `agent_budget_warning` says so
  (once per bound, again after a grant takes it back below);
- at a bound the run ends with reason `budget` (`agent_budget_reached`),
  and the model writes the final answer with at most
  `BudgetMeter.final_tokens` output tokens — the reserved allowance, spent
  beyond the bound. The token and cost bounds are checked before a phase
  that calls the model (no tool call queued or running): calls the model
  already asked for run first, since they cost no tokens. The time bound
  is checked at every boundary (tool calls queued are then not run).

A cost bound needs the run's model to have a price (`llm/prices.py`);
without one its cost is unknown and that bound cannot be reached (the run's
start logs it). The bounds live in the run state (`RunState.budget`,
`budget_cap`, `budget_day`), so a run continued after a restart keeps
them and what it spent.
"""

from __future__ import annotations

import logging

from backend.agent.loop import AgentContext, Final
from backend.agent.state import RunState
from backend.budget import (
    DIMENSIONS,
    UNBOUNDED,
    WARN_AT,
    Budget,
    Dimension,
    Scope,
    Spent,
    day_end,
    reached,
    shown,
)
from backend.llm.prices import NO_PRICES, PriceTable
from backend.protocol import AgentBudgetReached, AgentBudgetWarning, BudgetLimits

log = logging.getLogger(__name__)

DEFAULT_FINAL_TOKENS = 1024

_NAMES: dict[Dimension, str] = {
    "tokens": "token budget",
    "cost": "cost budget",
    "time": "time budget",
}


class BudgetMeter:
    def __init__(
        self,
        state: RunState,
        prices: PriceTable = NO_PRICES,
        final_tokens: int = DEFAULT_FINAL_TOKENS,
    ) -> None:
        self.state = state
        self.prices = prices
        self.final_tokens = final_tokens
        """The most output tokens the final answer after a bound may use."""

    @property
    def bounded(self) -> bool:
        return not self.state.budget.unbounded

    def spent(self) -> Spent:
        """What the run has used: tokens, dollars (0 when unpriced), seconds."""
        state = self.state
        cost = self.prices.cost(state.model, state.usage)
        return Spent(
            tokens=state.usage.total_tokens,
            cost_usd=cost or 0.0,
            time_s=state.active_ms / 1000,
        )

    def unpriced(self) -> bool:
        """A cost bound this run cannot reach: its model has no price."""
        state = self.state
        return state.budget.cost_usd is not None and state.model not in self.prices

    def check(self, ctx: AgentContext) -> Final | None:
        """Between phases: warn of bounds nearly used; at a bound, the run's
        ending (reason `budget`, the model to write the final answer)."""
        state = self.state
        if state.budget.unbounded:
            return None
        spent = self.spent()
        calls_next = not state.queue and state.in_flight is None
        budget = state.budget if calls_next else Budget(time_s=state.budget.time_s)
        dimension = reached(budget, spent)
        if dimension is None:
            self._warn(ctx, spent)
            return None
        return self._reached(ctx, dimension, spent)

    def grant(self, more: Budget) -> Budget:
        """Raise the run's bounds by `more`, up to its cap; what was added."""
        state = self.state
        before = state.budget
        state.budget = before.plus(more).within(state.budget_cap)
        spent = self.spent()
        state.budget_warned = [
            d for d in state.budget_warned if not self._below_warning(d, spent)
        ]
        return _difference(state.budget, before)

    def can_grant(self, dimension: Dimension) -> bool:
        """Whether a grant can raise this bound (it is below its cap)."""
        bound = self.state.budget.bound(dimension)
        cap = self.state.budget_cap.bound(dimension)
        return bound is not None and (cap is None or bound < cap)

    def limits(self) -> BudgetLimits:
        return as_limits(self.state.budget)

    def _warn(self, ctx: AgentContext, spent: Spent) -> None:
        state = self.state
        for dimension in DIMENSIONS:
            bound = state.budget.bound(dimension)
            if bound is None or dimension in state.budget_warned:
                continue
            if spent.of(dimension) >= WARN_AT * bound:
                state.budget_warned.append(dimension)
                ctx.emit(
                    AgentBudgetWarning(
                        step=state.step,
                        dimension=dimension,
                        used=round(spent.of(dimension), 6),
                        limit=bound,
                        scope=self._scope(dimension),
                        can_grant=self.can_grant(dimension),
                    )
                )

    def _reached(self, ctx: AgentContext, dimension: Dimension, spent: Spent) -> Final:
        state = self.state
        bound = state.budget.bound(dimension)
        assert bound is not None
        scope = self._scope(dimension)
        ctx.emit(
            AgentBudgetReached(
                step=state.step,
                dimension=dimension,
                used=round(spent.of(dimension), 6),
                limit=bound,
                scope=scope,
                can_grant=self.can_grant(dimension),
                resets_at=day_end(state.started_at) if scope == "day" else None,
            )
        )
        whose = "the user's daily" if scope == "day" else "the run's"
        why = (
            f"{whose.capitalize()} {_NAMES[dimension]} ({shown(dimension, bound)}) "
            "is used up, so the loop ends here. Answer briefly with what you "
            "have found so far, and say what is still open."
        )
        return Final(None, "budget", why)

    def _scope(self, dimension: Dimension) -> Scope:
        return "day" if dimension in self.state.budget_day else "run"

    def _below_warning(self, dimension: Dimension, spent: Spent) -> bool:
        bound = self.state.budget.bound(dimension)
        return bound is None or spent.of(dimension) < WARN_AT * bound


def as_limits(budget: Budget) -> BudgetLimits:
    """A `Budget` as the protocol says it."""
    return BudgetLimits(
        tokens=budget.tokens, cost_usd=budget.cost_usd, time_s=budget.time_s
    )


def from_limits(limits: BudgetLimits | None) -> Budget:
    """The protocol's `BudgetLimits` as a `Budget` (None: unbounded)."""
    if limits is None:
        return UNBOUNDED
    return Budget(tokens=limits.tokens, cost_usd=limits.cost_usd, time_s=limits.time_s)


def _difference(after: Budget, before: Budget) -> Budget:
    """How much each bound rose (0 where unchanged; None where unbounded)."""

    def rise(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a - b

    tokens = rise(after.tokens, before.tokens)
    return Budget(
        tokens=None if tokens is None else int(tokens),
        cost_usd=rise(after.cost_usd, before.cost_usd),
        time_s=rise(after.time_s, before.time_s),
    )
