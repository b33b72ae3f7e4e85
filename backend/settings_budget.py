"""The settings of what runs may spend (`Settings` has them): the price
table (`llm/prices.py`), the budget of every run, and each user's daily
budget (`backend/budget.py`). Every bound is off (0 or empty) by default."""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings

from backend.budget import Budget
from backend.errors import ConfigError
from backend.llm.prices import PriceTable


class BudgetSettings(BaseSettings):
    prices: str = ""
    """JSON: model → {"input", "cached_input", "output"} in dollars per
    million tokens (`llm/prices.py`). Empty: costs are unknown."""
    run_budget_tokens: int = Field(default=0, ge=0)
    """Tokens (input and output) a run may use; 0: no bound."""
    run_budget_cost_usd: float = Field(default=0.0, ge=0)
    """Dollars a run may cost by the price table; 0: no bound."""
    run_budget_time_s: float = Field(default=0.0, ge=0)
    """Seconds of work a run may do before it ends with reason `budget`
    (a soft bound, checked between phases and raisable by `grant_budget`;
    `LOOPWIRE_RUN_TIMEOUT_S` stays the hard one); 0: no bound."""
    daily_budget_tokens: int = Field(default=0, ge=0)
    """Tokens each user may use per day (UTC); 0: no bound. The tokens
    file may give a user their own (`users.py`)."""
    daily_budget_cost_usd: float = Field(default=0.0, ge=0)
    daily_budget_time_s: float = Field(default=0.0, ge=0)
    budget_final_tokens: int = Field(default=1024, ge=16)
    """The most output tokens the final answer of a run that reached its
    budget may write (its reserved allowance, spent beyond the bound)."""

    @model_validator(mode="after")
    def _prices_parse(self) -> BudgetSettings:
        try:
            PriceTable.parse(self.prices)
        except ConfigError as exc:  # a validation error, as every bad setting is
            raise ValueError(str(exc)) from None
        return self

    @property
    def price_table(self) -> PriceTable:
        return PriceTable.parse(self.prices)

    @property
    def run_budget(self) -> Budget:
        """The server's cap on every run (None where the setting is 0)."""
        return Budget(
            tokens=self.run_budget_tokens or None,
            cost_usd=self.run_budget_cost_usd or None,
            time_s=self.run_budget_time_s or None,
        )

    @property
    def daily_budget(self) -> Budget:
        """Each user's budget per day, unless the tokens file gives theirs."""
        return Budget(
            tokens=self.daily_budget_tokens or None,
            cost_usd=self.daily_budget_cost_usd or None,
            time_s=self.daily_budget_time_s or None,
        )
