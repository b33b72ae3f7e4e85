"""What model calls cost: the operator's price table.

`LOOPWIRE_PRICES` is JSON mapping a model name (as the server reports it,
and as a client names it) to its prices in US dollars per million tokens::

    {"gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.60}}

`cached_input` is what a prompt-cache hit costs (input tokens the server
read from its cache); left out, cached tokens cost as much as the rest of
the input. A model the table does not name has no known cost: loopwire
never invents a price, so its cost is `None`, shown as unknown. The table
is empty by default.

Reasoning tokens are output tokens (`Usage.reasoning_tokens` is a part of
`completion_tokens`), and an estimated count (`Usage.estimated_calls`) is
priced like a reported one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.errors import ConfigError
from backend.transcript import Usage

PER = 1_000_000
"""Prices are per this many tokens."""


class Price(BaseModel):
    """One model's prices, in US dollars per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)

    def cost(self, usage: Usage) -> float:
        """What `usage` cost at these prices, in dollars."""
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        fresh = usage.prompt_tokens - cached
        total = (
            fresh * self.input
            + cached * cached_price
            + usage.completion_tokens * self.output
        )
        return total / PER


class PriceTable:
    """Model name → `Price`; a model not in it costs `None` (unknown)."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self._prices = dict(prices or {})

    @classmethod
    def parse(cls, text: str) -> PriceTable:
        """`LOOPWIRE_PRICES` (JSON, see the module docstring); a
        `ConfigError` says what is wrong."""
        if not text.strip():
            return cls()
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"LOOPWIRE_PRICES is not JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise ConfigError(
                "LOOPWIRE_PRICES must be a JSON object: model name → "
                '{"input": …, "cached_input": …, "output": …} (dollars per '
                "million tokens)"
            )
        prices: dict[str, Price] = {}
        for model, value in raw.items():
            try:
                prices[model] = Price.model_validate(value)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
                    for e in exc.errors()
                )
                raise ConfigError(
                    f"LOOPWIRE_PRICES, model {model!r}: {problems} (give input "
                    "and output, and optionally cached_input, in dollars per "
                    "million tokens)"
                ) from None
        return cls(prices)

    def __bool__(self) -> bool:
        return bool(self._prices)

    def __contains__(self, model: object) -> bool:
        return model in self._prices

    def price(self, model: str) -> Price | None:
        return self._prices.get(model)

    def cost(self, model: str, usage: Usage) -> float | None:
        """What `usage` of `model` cost in dollars; None when the table
        has no price for it (or nothing was used with an unknown model)."""
        price = self._prices.get(model)
        return None if price is None else price.cost(usage)


NO_PRICES = PriceTable()
